package ontimeredis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// TestTopicIndexHints runs the TopicIndex cases on one Redis with the
// index kept as on a Redis Cluster: by hints the driver writes after each
// script (TestConformanceCluster runs them on a real Cluster).
func TestTopicIndexHints(t *testing.T) {
	t.Parallel()
	h := harness(ontimeredis.Options{}, drivertest.Features{})
	newD, newPeer := h.New, h.NewPeer
	h.New = func(t testing.TB) ontimedriver.Driver {
		d := newD(t)
		ontimeredis.UseIndexHints(d.(*ontimeredis.Driver))
		return d
	}
	h.NewPeer = func(t testing.TB, d ontimedriver.Driver) ontimedriver.Driver {
		p := newPeer(t, d)
		ontimeredis.UseIndexHints(p.(*ontimeredis.Driver))
		return p
	}
	drivertest.RunTopicIndex(t, h)
}

// indexScore returns the topic's score in the index, or -1 when absent.
func indexScore(t *testing.T, rdb redis.UniversalClient, d *ontimeredis.Driver, topic string) int64 {
	t.Helper()
	// what the driver queued for its background writer first
	if err := ontimeredis.FlushHints(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	next, _ := ontimeredis.IndexKeys(d)
	s, err := rdb.ZScore(t.Context(), next, topic).Result()
	if errors.Is(err, redis.Nil) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return int64(s)
}

// testHintOrder: an exact hint (claim, settle) older than the last applied
// one is not applied, so a late hint cannot raise the entry above a timer
// written after it; a lowering hint (schedule) always lowers, and keeps
// its version when newer.
func testHintOrder(t *testing.T, rdb redis.UniversalClient, d *ontimeredis.Driver) {
	ctx := t.Context()
	hint := func(v int64, kind, score string) {
		t.Helper()
		if err := ontimeredis.WriteHint(ctx, d, "t", v, kind, score); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, score int64) {
		t.Helper()
		if got := indexScore(t, rdb, d, "t"); got != score {
			t.Errorf("%s: index score %d, want %d", what, got, score)
		}
	}
	hint(200, "s", "5000")
	want("exact hint", 5000)
	hint(100, "s", "9000")
	want("an older exact hint", 5000)
	hint(100, "r", "")
	want("an older removal", 5000)
	hint(50, "l", "3000")
	want("an older lowering hint", 3000)
	hint(150, "s", "9000")
	want("an exact hint older than the last applied", 3000)
	hint(300, "l", "4000")
	want("a newer lowering hint above the entry", 3000)
	hint(250, "s", "9000")
	want("an exact hint older than the last lowering one", 3000)
	hint(400, "s", "8000")
	want("a newer exact hint", 8000)
	hint(500, "r", "")
	want("a newer removal", -1)
	hint(450, "s", "8000")
	want("an exact hint older than the removal", -1)
	hint(460, "l", "7000")
	want("a lowering hint after a removal", 7000)
}

func TestIndexHintOrder(t *testing.T) {
	t.Parallel()
	d := newDriver(t, ontimeredis.Options{})
	testHintOrder(t, redistest.NewClient(t), d)
	ontimeredis.UseIndexHints(d)
	testStaleClaimHint(t, redistest.NewClient(t), d)
}

// TestIndexCluster: on a Redis Cluster of three masters, hint ordering,
// SyncTopicIndex, a stale claim hint after a newer schedule, and
// SubscribeTopics hearing topics of every master.
func TestIndexCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	rdb := cluster.NewClient(t)
	plain, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet, NoClusterTopicIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	if plain.TopicIndexed() {
		t.Error("TopicIndexed on a Redis Cluster with NoClusterTopicIndex")
	}
	if _, err := plain.DueTopics(t.Context(), "*", 0, 1); !errors.Is(err, ontimedriver.ErrNoTopicIndex) || !strings.Contains(err.Error(), "NoClusterTopicIndex") {
		t.Errorf("DueTopics with NoClusterTopicIndex: %v, want ErrNoTopicIndex naming the option", err)
	}
	// the default: the index is kept
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if !d.TopicIndexed() {
		t.Error("TopicIndexed is false on a Redis Cluster by default")
	}
	if !d.NeedsIndexRepair() {
		t.Error("NeedsIndexRepair is false on a Redis Cluster")
	}
	t.Run("HintOrder", func(t *testing.T) { testHintOrder(t, rdb, d) })
	t.Run("Sync", func(t *testing.T) { testSync(t, rdb, d) })
	t.Run("StaleClaimHint", func(t *testing.T) { testStaleClaimHint(t, rdb, d) })
	t.Run("BackgroundHints", func(t *testing.T) { testBackgroundHints(t, rdb) })
	t.Run("SubscribeAcrossMasters", func(t *testing.T) {
		ctx := t.Context()
		ch, cancel, err := d.SubscribeTopics(ctx, "spread.*")
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
		want := map[string]bool{}
		for i := range 12 {
			topic := fmt.Sprintf("spread.%d", i)
			want[topic] = true
			if _, err := d.Schedule(ctx, topic, []ontimedriver.NewTimer{{ID: "x", Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.Schedule(ctx, "other", []ontimedriver.NewTimer{{ID: "x", Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(5 * time.Second)
		for len(want) > 0 {
			select {
			case w := <-ch:
				if w.Topic == "other" {
					t.Errorf("wake-up for other, which does not match spread.*")
				}
				delete(want, w.Topic)
			case <-deadline:
				t.Fatalf("no wake-up for %v (topics on every master)", want)
			}
		}
	})
}

// testStaleClaimHint: a claim's exact hint that arrives after the hint of
// a schedule that ran after the claim (two workers, the claimer's hint
// delayed) is not applied: the entry stays at the new timer. The stale
// hint is written by hand with the claim's version, one second older than
// the schedule's clock.
func testStaleClaimHint(t *testing.T, rdb redis.UniversalClient, d *ontimeredis.Driver) {
	ctx := t.Context()
	res, err := d.Schedule(ctx, "stale", []ontimedriver.NewTimer{{ID: "a", Payload: []byte("p")}}, ontimedriver.Upsert)
	if err != nil {
		t.Fatal(err)
	}
	due := res[0].Due
	if got := indexScore(t, rdb, d, "stale"); got != due.UnixMilli() {
		t.Fatalf("after the schedule: index %d, want %d", got, due.UnixMilli())
	}
	stale := due.Add(-time.Second).UnixMicro()
	if err := ontimeredis.WriteHint(ctx, d, "stale", stale, "s", fmt.Sprint(due.Add(time.Hour).UnixMilli())); err != nil {
		t.Fatal(err)
	}
	if err := ontimeredis.WriteHint(ctx, d, "stale", stale, "r", ""); err != nil {
		t.Fatal(err)
	}
	if got := indexScore(t, rdb, d, "stale"); got != due.UnixMilli() {
		t.Errorf("after stale claim hints: index %d, want %d (the schedule's)", got, due.UnixMilli())
	}
	cl, err := d.Claim(ctx, "stale", 10, time.Minute)
	if err != nil || len(cl.Timers) != 1 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	if got := indexScore(t, rdb, d, "stale"); got != cl.Timers[0].LeaseUntil.UnixMilli() {
		t.Errorf("after the claim: index %d, want the lease deadline %d", got, cl.Timers[0].LeaseUntil.UnixMilli())
	}
}

// testBackgroundHints: on a Cluster a hint that lowers a topic's entry is
// written before the call returns, and one that raises it (a claim's) is
// written by the background writer, at the latest when the driver closes.
// The index is read straight from Redis, without FlushHints.
func testBackgroundHints(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	next, _ := ontimeredis.IndexKeys(d)
	raw := func() int64 {
		t.Helper()
		s, err := rdb.ZScore(ctx, next, "bg").Result()
		if errors.Is(err, redis.Nil) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return int64(s)
	}
	res, err := d.Schedule(ctx, "bg", []ontimedriver.NewTimer{{ID: "now", Payload: []byte("p")}}, ontimedriver.Upsert)
	if err != nil {
		t.Fatal(err)
	}
	if got := raw(); got != res[0].Due.UnixMilli() {
		t.Fatalf("right after the publish that filled the topic: index %d, want its due %d (written before the call returned)", got, res[0].Due.UnixMilli())
	}
	later := time.Now().Add(time.Hour)
	if _, err := d.Schedule(ctx, "bg", []ontimedriver.NewTimer{{ID: "later", At: later, Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	if got := raw(); got != res[0].Due.UnixMilli() {
		t.Fatalf("after a publish behind the head: index %d, want %d unchanged", got, res[0].Due.UnixMilli())
	}
	cl, err := d.Claim(ctx, "bg", 10, time.Minute)
	if err != nil || len(cl.Timers) != 1 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := raw(), cl.Timers[0].LeaseUntil.UnixMilli(); got != want {
		t.Errorf("after the claim and Close: index %d, want the lease deadline %d (the claim's hint, written by the background writer)", got, want)
	}
}

// testSync: SyncTopicIndex rebuilds a deleted index with every topic's
// exact head, and leaves out topics that hold no timer.
func testSync(t *testing.T, rdb redis.UniversalClient, d *ontimeredis.Driver) {
	ctx := t.Context()
	heads := map[string]int64{}
	base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	for i := range 30 {
		topic := fmt.Sprintf("sync.%d", i)
		at := base.Add(time.Duration(i) * time.Second)
		if _, err := d.Schedule(ctx, topic, []ontimedriver.NewTimer{{ID: "a", At: at, Payload: []byte("p")}, {ID: "b", At: at.Add(time.Minute), Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
			t.Fatal(err)
		}
		heads[topic] = at.UnixMilli()
	}
	// emptied by a cancel; and one whose head moved later behind the
	// index's back (a raise the index does not see until a claim)
	for _, id := range []string{"a", "b"} {
		if err := d.Cancel(ctx, "sync.0", id); err != nil {
			t.Fatal(err)
		}
	}
	delete(heads, "sync.0")
	if err := d.Cancel(ctx, "sync.1", "a"); err != nil {
		t.Fatal(err)
	}
	heads["sync.1"] = base.Add(time.Second + time.Minute).UnixMilli()

	next, ver := ontimeredis.IndexKeys(d)
	if err := rdb.Del(ctx, next, ver).Err(); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncTopicIndex(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := rdb.ZRangeWithScores(ctx, next, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(heads) {
		t.Errorf("index has %d entries after SyncTopicIndex, want %d", len(got), len(heads))
	}
	for _, z := range got {
		topic := z.Member.(string)
		if want, ok := heads[topic]; !ok || int64(z.Score) != want {
			t.Errorf("index entry %s = %d, want %d (present %v)", topic, int64(z.Score), want, ok)
		}
	}
	r, err := d.DueTopics(ctx, "*", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	earliest := int64(-1)
	for _, h := range heads {
		if earliest < 0 || h < earliest {
			earliest = h
		}
	}
	if len(r.Topics) != 0 || r.Next.UnixMilli() != earliest {
		t.Errorf("DueTopics after the repair = %v, Next %v; want none, %v", r.Topics, r.Next, time.UnixMilli(earliest))
	}
}

func TestSyncTopicIndex(t *testing.T) {
	t.Parallel()
	for _, hints := range []bool{false, true} {
		t.Run(fmt.Sprintf("hints=%v", hints), func(t *testing.T) {
			t.Parallel()
			d := newDriver(t, ontimeredis.Options{})
			if hints {
				ontimeredis.UseIndexHints(d)
			}
			if d.NeedsIndexRepair() != hints {
				t.Errorf("NeedsIndexRepair = %v", d.NeedsIndexRepair())
			}
			testSync(t, redistest.NewClient(t), d)
		})
	}
}

// TestIndexCompatible: the compatible layout keeps no index.
func TestIndexCompatible(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newDriver(t, ontimeredis.Options{Layout: ontimeredis.Compatible})
	if d.TopicIndexed() || d.NeedsIndexRepair() {
		t.Errorf("compatible layout: TopicIndexed %v, NeedsIndexRepair %v; want false, false", d.TopicIndexed(), d.NeedsIndexRepair())
	}
	if _, err := d.DueTopics(ctx, "*", 0, 10); !errors.Is(err, ontimedriver.ErrNoTopicIndex) {
		t.Errorf("DueTopics: %v", err)
	}
	if _, _, err := d.SubscribeTopics(ctx, "*"); !errors.Is(err, ontimedriver.ErrNoTopicIndex) {
		t.Errorf("SubscribeTopics: %v", err)
	}
	if err := d.SyncTopicIndex(ctx); !errors.Is(err, ontimedriver.ErrNoTopicIndex) {
		t.Errorf("SyncTopicIndex: %v", err)
	}
}

// TestIndexCancelEmpties: a cancel that empties a topic removes it from
// the index; one that leaves timers may leave the entry low.
func TestIndexCancelEmpties(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb := redistest.NewClient(t)
	for _, hints := range []bool{false, true} {
		d := newDriver(t, ontimeredis.Options{})
		if hints {
			ontimeredis.UseIndexHints(d)
		}
		if _, err := d.Schedule(ctx, "c", []ontimedriver.NewTimer{{ID: "a", Delay: time.Hour}, {ID: "b", Delay: 2 * time.Hour}}, ontimedriver.Upsert); err != nil {
			t.Fatal(err)
		}
		first := indexScore(t, rdb, d, "c")
		if err := d.Cancel(ctx, "c", "a"); err != nil {
			t.Fatal(err)
		}
		if got := indexScore(t, rdb, d, "c"); got != first {
			t.Errorf("hints=%v: after cancelling the head: %d, want it left at %d", hints, got, first)
		}
		if err := d.Cancel(ctx, "c", "b"); err != nil {
			t.Fatal(err)
		}
		if got := indexScore(t, rdb, d, "c"); got != -1 {
			t.Errorf("hints=%v: after cancelling the last timer: %d, want no entry", hints, got)
		}
	}
}

// TestIndexScale: with 10,000 topics each holding one timer far in the
// future, DueTopics lists none and reports the earliest as Next, with a
// pattern too; the work is bounded: a pattern whose first match lies
// beyond the first 1000 later entries gives up (zero Next: the caller
// polls) instead of reading the whole index.
func TestIndexScale(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rdb := srv.NewClient(t)
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx := t.Context()
	const n = 10000
	base := time.Now().Add(24 * time.Hour).Truncate(time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				at := base.Add(time.Duration(i) * time.Second)
				if _, err := d.Schedule(ctx, fmt.Sprintf("tenant-%05d", i), []ontimedriver.NewTimer{{ID: "x", At: at, Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// warm the script cache, so that every call below is one EVALSHA
	if _, err := d.DueTopics(ctx, "*", 0, 1); err != nil {
		t.Fatal(err)
	}
	check := func(pattern string, next time.Time) {
		t.Helper()
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			r, err := d.DueTopics(ctx, pattern, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Topics) != 0 || !r.Next.Equal(next) {
				t.Errorf("DueTopics(%q) = %d topics, Next %v; want none, %v", pattern, len(r.Topics), r.Next, next)
			}
		}
		usec, calls := evalStats(t, rdb)
		reads := indexReads(t, rdb)
		t.Logf("DueTopics(%q) on %d idle topics: %.0f µs of Redis time, %.1f index reads a call", pattern, n, usec/float64(calls), float64(reads)/float64(calls))
		// Bounded work, counted rather than timed (Redis time grows when a
		// loaded machine pauses Redis): each of the two parts (the due
		// topics, the next one) reads at most 1000 entries, in chunks
		// growing from 16 to 256, so at most 7 reads a part; reading the
		// whole index of 10,000 would take at least 40. That the reads
		// stop at 1000 entries is shown by "*9990" below, whose first
		// match lies beyond them and is not found.
		if calls < 10 {
			t.Fatalf("commandstats counted %d script calls, want at least the 10 made", calls)
		}
		if per := reads / calls; reads > 14*calls {
			t.Errorf("DueTopics(%q) read the index %d times a call, want at most 14 (bounded work)", pattern, per)
		}
	}
	check("*", base)
	check("tenant-*", base)
	check("tenant-0050?", base.Add(500*time.Second))
	check("tenant-09990", base.Add(9990*time.Second)) // one topic: its entry
	check("tenant-x", time.Time{})
	check("*9990", time.Time{}) // beyond the first 1000 later entries: gives up
	check("nomatch-*", time.Time{})
}

// indexReads returns the calls of ZRANGEBYSCORE and ZSCORE (the reads of
// due_topics.lua, counted by commandstats inside a script too) since the
// last CONFIG RESETSTAT.
func indexReads(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\r\n") {
		for _, name := range []string{"zrangebyscore", "zscore"} {
			var c int
			if _, err := fmt.Sscanf(line, "cmdstat_"+name+":calls=%d,", &c); err == nil {
				n += c
			}
		}
	}
	return n
}

// evalStats returns the Redis time (µs) and calls of EVALSHA and EVAL
// since the last CONFIG RESETSTAT.
func evalStats(t *testing.T, rdb *redis.Client) (usec float64, calls int) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		for _, name := range []string{"evalsha", "eval"} {
			var c int
			var u float64
			if _, err := fmt.Sscanf(line, "cmdstat_"+name+":calls=%d,usec=%f,", &c, &u); err == nil {
				calls += c
				usec += u
			}
		}
	}
	return usec, calls
}

// TestSubscribeTopicsDropped: when the pub/sub connection drops, every
// SubscribeTopics subscriber gets a wake-up with an empty Topic, and
// wake-ups flow again once go-redis has subscribed again.
func TestSubscribeTopicsDropped(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rdb := srv.NewClient(t)
	d, err := ontimeredis.New(srv.NewClient(t), &ontimeredis.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx := t.Context()
	ch, cancel, err := d.SubscribeTopics(ctx, "tenant-*")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-ch:
		if w.Topic != "" {
			t.Errorf("after the connection dropped: wake-up for %q, want an empty Topic", w.Topic)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up after the pub/sub connection dropped")
	}
	wait.For(t, 5*time.Second, func() bool {
		n, err := rdb.PubSubNumPat(ctx).Result()
		return err == nil && n == 1
	}, "the pattern subscription restored")
	for len(ch) > 0 {
		<-ch
	}
	if _, err := d.Schedule(ctx, "tenant-b", []ontimedriver.NewTimer{{ID: "x", Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case w := <-ch:
			if w.Topic == "tenant-b" {
				return
			}
		case <-deadline:
			t.Fatal("no wake-up for tenant-b after the subscription was restored")
		}
	}
}

// TestLuaGlob: the pattern arguments of due_topics.lua.
func TestLuaGlob(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    []any
	}{
		{"*", []any{"a"}},
		{"***", []any{"a"}},
		{"a.b-c+d", []any{"e", "a.b-c+d"}},
		{"a.b-c+?", []any{"x", "^a%.b%-c%+.$"}},
		{"t?", []any{"x", "^t.$"}},
		{"tenant-*", []any{"g", "^tenant%-", "", 0}},
		{"*:x", []any{"g", "", "^%:x$", 2}},
		{"a*b**c*d", []any{"g", "^a", "^d$", 1, "b", "c"}},
	} {
		if got := ontimeredis.LuaGlob(c.pattern); !slices.Equal(got, c.want) {
			t.Errorf("luaGlob(%q) = %v, want %v", c.pattern, got, c.want)
		}
	}
}

// TestSubscribeTopicsOverflow: a subscriber that does not read keeps a
// full buffer whose last wake-up has an empty Topic ("look again"), which
// stands for the wake-ups that did not fit.
func TestSubscribeTopicsOverflow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newDriver(t, ontimeredis.Options{})
	// "over.*", not "*": the probe's wake-up must not reach ch, or it could
	// land there while the test drains the buffer.
	ch, cancel, err := d.SubscribeTopics(ctx, "over.*")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	const n = 200
	for i := range n {
		if _, err := d.Schedule(ctx, fmt.Sprintf("over.%d", i), []ontimedriver.NewTimer{{ID: "x", Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
			t.Fatal(err)
		}
	}
	// the last topic's wake-up has been handled once a wake-up of a later
	// subscription (same connection, same order) arrives
	probe, cancelProbe, err := d.SubscribeTopics(ctx, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelProbe()
	if _, err := d.Schedule(ctx, "probe", []ontimedriver.NewTimer{{ID: "x", Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	select {
	case <-probe:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up for probe")
	}
	if len(ch) != cap(ch) {
		t.Fatalf("buffer holds %d of %d after %d wake-ups", len(ch), cap(ch), n)
	}
	var last ontimedriver.TopicWake
	named := 0
	for len(ch) > 0 {
		last = <-ch
		if last.Topic != "" {
			named++
		}
	}
	if last.Topic != "" || named != cap(ch)-1 {
		t.Errorf("after an overflow: last wake-up %+v, %d named ones; want the last with an empty Topic, after %d named", last, named, cap(ch)-1)
	}
}

// TestSubscribeTopicsPrefixEscaped: Redis glob characters in the prefix
// are literal in the PSUBSCRIBE pattern, so a driver with prefix "p*:"
// does not hear the topics of a driver with prefix "pX:".
func TestSubscribeTopicsPrefixEscaped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	base := redistest.Prefix(t)
	glob := newDriver(t, ontimeredis.Options{Prefix: base + "p*?[a]\\:"})
	other := newDriver(t, ontimeredis.Options{Prefix: base + "pXY\\:"})
	ch, cancel, err := glob.SubscribeTopics(ctx, "*")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if _, err := other.Schedule(ctx, "t", []ontimedriver.NewTimer{{ID: "x", Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	if _, err := glob.Schedule(ctx, "mine", []ontimedriver.NewTimer{{ID: "x", Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-ch:
		if w.Topic != "mine" {
			t.Errorf("wake-up for %q, want mine (the other driver's topic leaked through the prefix)", w.Topic)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up for mine")
	}
}
