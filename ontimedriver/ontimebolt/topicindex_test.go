package ontimebolt_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

func dueTopics(t testing.TB, d *ontimebolt.Driver, pattern string, limit int) *ontimedriver.DueTopicsResult {
	t.Helper()
	res, err := d.DueTopics(ctx, pattern, 0, limit)
	if err != nil {
		t.Fatalf("DueTopics(%q, %d): %v", pattern, limit, err)
	}
	if res.Topics == nil {
		t.Fatalf("DueTopics(%q, %d): nil Topics", pattern, limit)
	}
	return res
}

// checkIndex asserts that the index holds every given topic exactly at the
// head of its q bucket in the file, and no entry for a topic without one.
func checkIndex(t testing.TB, d *ontimebolt.Driver, topics ...string) {
	t.Helper()
	for _, topic := range topics {
		want, wok := ontimebolt.FileHead(t, d, topic)
		got, gok := ontimebolt.Indexed(d, topic)
		if wok != gok || !got.Equal(want) {
			t.Fatalf("topic %q: indexed (%v, %v), file head (%v, %v)", topic, got, gok, want, wok)
		}
	}
}

func TestTopicIndexed(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	if !d.TopicIndexed() {
		t.Fatal("TopicIndexed() = false")
	}
	var _ ontimedriver.TopicIndex = d
}

func TestDueTopicsNotBeforeDue(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	res := schedule(t, d, "later", ontimedriver.NewTimer{ID: "a", Delay: 200 * time.Millisecond})
	due := res[0].Due

	first := dueTopics(t, d, "*", 10)
	if len(first.Topics) != 0 && first.Now.Before(due) {
		t.Fatalf("topic due at %v reported due at %v", due, first.Now)
	}
	sawAbsent := false
	wait.For(t, 10*time.Second, func() bool {
		r := dueTopics(t, d, "*", 10)
		if len(r.Topics) == 0 {
			sawAbsent = true
			if !r.Now.Before(due) {
				t.Fatalf("topic due at %v not reported at %v", due, r.Now)
			}
			if !r.Next.Equal(due) {
				t.Fatalf("Next = %v, want the due time %v", r.Next, due)
			}
			return false
		}
		if r.Now.Before(due) {
			t.Fatalf("topic due at %v reported due at %v, before it", due, r.Now)
		}
		if !slices.Equal(r.Topics, []string{"later"}) {
			t.Fatalf("Topics = %v, want [later]", r.Topics)
		}
		if !r.Next.IsZero() {
			t.Fatalf("Next = %v with nothing else scheduled", r.Next)
		}
		// Claimable at once: what DueTopics reports, Claim finds.
		if c := claim(t, d, "later", 10, time.Minute); len(c.Timers) != 1 {
			t.Fatalf("claim of a due topic found %v", ids(c.Timers))
		}
		return true
	}, "the topic to be reported due")
	if !sawAbsent {
		t.Log("the topic was due by the first look (slow machine); the absent case went unchecked")
	}
}

func TestDueTopicsNeverEarly(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	// Due times just ahead of now, at microsecond and sub-microsecond
	// offsets: whenever DueTopics reports one, Claim must find it, and its
	// Now is not before the due time.
	for i := range 50 {
		topic := fmt.Sprintf("t%d", i)
		at := time.Now().Add(time.Duration(i%7)*time.Microsecond + time.Duration(i%3)*300*time.Nanosecond + 2*time.Millisecond)
		res := schedule(t, d, topic, ontimedriver.NewTimer{ID: "x", At: at})
		for {
			r := dueTopics(t, d, topic, 1)
			if len(r.Topics) == 0 {
				if r.Next.IsZero() || r.Now.After(r.Next) || !r.Next.Equal(res[0].Due) {
					t.Fatalf("not due: Now %v, Next %v, due %v", r.Now, r.Next, res[0].Due)
				}
				continue
			}
			if r.Now.Before(res[0].Due) || r.Now.Before(at) {
				t.Fatalf("%s reported due at %v; due %v (asked %v)", topic, r.Now, res[0].Due, at)
			}
			if c := claim(t, d, topic, 1, time.Minute); len(c.Timers) != 1 {
				t.Fatalf("%s: reported due, Claim found nothing", topic)
			}
			break
		}
	}
}

func TestTopicIndexFollowsEveryWrite(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	const topic = "q"
	if _, ok := ontimebolt.Indexed(d, topic); ok {
		t.Fatal("unknown topic is indexed")
	}

	// Schedule: the head.
	res := schedule(t, d, topic,
		ontimedriver.NewTimer{ID: "a"},
		ontimedriver.NewTimer{ID: "b", Delay: time.Hour},
		ontimedriver.NewTimer{ID: "c", Delay: 2 * time.Hour})
	checkIndex(t, d, topic)
	if at, _ := ontimebolt.Indexed(d, topic); !at.Equal(res[0].Due) {
		t.Fatalf("indexed %v, want a's due %v", at, res[0].Due)
	}
	if r := dueTopics(t, d, "*", 10); !slices.Equal(r.Topics, []string{topic}) {
		t.Fatalf("Topics = %v", r.Topics)
	}

	// Claim: exact, the Next it returns (b's due; a's lease is later).
	c := claim(t, d, topic, 10, 3*time.Hour)
	if len(c.Timers) != 1 {
		t.Fatalf("claimed %v", ids(c.Timers))
	}
	checkIndex(t, d, topic)
	if at, _ := ontimebolt.Indexed(d, topic); !at.Equal(c.Next) || !at.Equal(res[1].Due) {
		t.Fatalf("after Claim indexed %v, Claim's Next %v, b's due %v", at, c.Next, res[1].Due)
	}
	r := dueTopics(t, d, "*", 10)
	if len(r.Topics) != 0 || !r.Next.Equal(res[1].Due) {
		t.Fatalf("after Claim: %+v, want none due and Next %v", r, res[1].Due)
	}
	lease := ontimedriver.Lease{ID: "a", Token: c.Timers[0].Token}

	// Extend: the lease moves; b stays the head.
	if errs, err := d.Extend(ctx, topic, []ontimedriver.Lease{lease}, time.Minute); err != nil || errs[0] != nil {
		t.Fatalf("Extend: %v %v", err, errs)
	}
	checkIndex(t, d, topic)
	if at, _ := ontimebolt.Indexed(d, topic); !at.Before(res[1].Due) {
		t.Fatalf("after Extend to a minute, indexed %v, want a's lease deadline", at)
	}

	// FireNow: c is due now.
	if _, err := d.FireNow(ctx, topic, "c"); err != nil {
		t.Fatalf("FireNow: %v", err)
	}
	checkIndex(t, d, topic)
	if r := dueTopics(t, d, "*", 10); !slices.Equal(r.Topics, []string{topic}) {
		t.Fatalf("after FireNow: Topics = %v", r.Topics)
	}

	// Cancel c and b: only leased a is left; its deadline is the head.
	for _, id := range []string{"c", "b"} {
		if err := d.Cancel(ctx, topic, id); err != nil {
			t.Fatalf("Cancel %s: %v", id, err)
		}
		checkIndex(t, d, topic)
	}
	if r := dueTopics(t, d, "*", 10); len(r.Topics) != 0 || r.Next.IsZero() {
		t.Fatalf("only a leased timer: %+v, want none due and Next its deadline", r)
	}

	// Retry with a delay keeps the topic, at the new due time.
	errs := settle(t, d, topic, ontimedriver.Settlement{Lease: lease, Kind: ontimedriver.Retry, Delay: time.Hour, Error: "x"})
	if errs[0] != nil {
		t.Fatalf("Retry: %v", errs[0])
	}
	checkIndex(t, d, topic)
	if _, ok := ontimebolt.Indexed(d, topic); !ok {
		t.Fatal("Retry removed the topic")
	}

	// Snooze keeps it too.
	if _, err := d.FireNow(ctx, topic, "a"); err != nil {
		t.Fatalf("FireNow: %v", err)
	}
	c = claim(t, d, topic, 1, time.Minute)
	lease = ontimedriver.Lease{ID: "a", Token: c.Timers[0].Token}
	settle(t, d, topic, ontimedriver.Settlement{Lease: lease, Kind: ontimedriver.Snooze, Delay: 30 * time.Minute})
	checkIndex(t, d, topic)
	if r := dueTopics(t, d, "*", 10); len(r.Topics) != 0 || r.Next.IsZero() {
		t.Fatalf("after Snooze: %+v", r)
	}

	// Dead: the topic empties and leaves the index.
	if _, err := d.FireNow(ctx, topic, "a"); err != nil {
		t.Fatalf("FireNow: %v", err)
	}
	c = claim(t, d, topic, 1, time.Minute)
	lease = ontimedriver.Lease{ID: "a", Token: c.Timers[0].Token}
	settle(t, d, topic, ontimedriver.Settlement{Lease: lease, Kind: ontimedriver.Dead, Reason: "poison"})
	checkIndex(t, d, topic)
	if _, ok := ontimebolt.Indexed(d, topic); ok {
		t.Fatal("a topic with only dead letters is indexed")
	}
	if r := dueTopics(t, d, "*", 10); len(r.Topics) != 0 || !r.Next.IsZero() {
		t.Fatalf("empty index: %+v", r)
	}

	// ReplayDead brings it back, due now; PurgeDead of nothing changes nothing.
	if n, err := d.ReplayAllDead(ctx, topic); err != nil || n != 1 {
		t.Fatalf("ReplayAllDead = %d, %v", n, err)
	}
	checkIndex(t, d, topic)
	if r := dueTopics(t, d, "*", 10); !slices.Equal(r.Topics, []string{topic}) {
		t.Fatalf("after ReplayAllDead: Topics = %v", r.Topics)
	}
	if _, err := d.PurgeAllDead(ctx, topic); err != nil {
		t.Fatalf("PurgeAllDead: %v", err)
	}
	checkIndex(t, d, topic)

	// Claim and ack the last timer: the topic leaves the index.
	c = claim(t, d, topic, 10, time.Minute)
	if len(c.Timers) != 1 {
		t.Fatalf("claimed %v", ids(c.Timers))
	}
	if _, ok := ontimebolt.Indexed(d, topic); !ok {
		t.Fatal("a leased timer's topic left the index (its lease may expire)")
	}
	settle(t, d, topic, ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "a", Token: c.Timers[0].Token}, Kind: ontimedriver.Ack})
	checkIndex(t, d, topic)
	if _, ok := ontimebolt.Indexed(d, topic); ok {
		t.Fatal("the topic is indexed after its last timer was acked")
	}

	// Claim on an empty or unknown topic leaves nothing behind.
	claim(t, d, topic, 10, time.Minute)
	claim(t, d, "never", 10, time.Minute)
	if n := ontimebolt.IndexLen(d); n != 0 {
		t.Fatalf("index holds %d topics, want 0", n)
	}
}

func TestDueTopicsClaimSetsExact(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	var timers []ontimedriver.NewTimer
	for i := range 10 {
		timers = append(timers, ontimedriver.NewTimer{ID: fmt.Sprint(i), Delay: time.Duration(i) * time.Hour})
	}
	schedule(t, d, "q", timers...)
	c := claim(t, d, "q", 10, 30*time.Minute)
	at, ok := ontimebolt.Indexed(d, "q")
	if !ok || !at.Equal(c.Next) {
		t.Fatalf("after Claim indexed (%v, %v), Claim's Next %v", at, ok, c.Next)
	}
	// The lease (30 minutes) is now the head, before timer 1 (an hour).
	if !at.Equal(c.Timers[0].LeaseUntil) {
		t.Fatalf("indexed %v, want the lease deadline %v", at, c.Timers[0].LeaseUntil)
	}
}

func TestDueTopicsOrderLimitAndPattern(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	// Due in the past at distinct instants, in an order unlike the names'.
	past := map[string]time.Duration{
		"tenant-3": 1, "tenant-1": 2, "other-1": 3, "tenant-20": 4, "tenant-2": 5, "other-2": 6,
	}
	for topic, k := range past {
		schedule(t, d, topic, ontimedriver.NewTimer{ID: "x", At: base.Add(k * time.Second)})
	}
	future := map[string]time.Duration{"tenant-9": 2 * time.Hour, "other-9": time.Hour}
	for topic, delay := range future {
		schedule(t, d, topic, ontimedriver.NewTimer{ID: "x", Delay: delay})
	}
	t9, _ := ontimebolt.Indexed(d, "tenant-9")
	o9, _ := ontimebolt.Indexed(d, "other-9")

	for _, tc := range []struct {
		pattern string
		limit   int
		want    []string
		next    time.Time
	}{
		{"*", 100, []string{"tenant-3", "tenant-1", "other-1", "tenant-20", "tenant-2", "other-2"}, o9},
		{"*", 2, []string{"tenant-3", "tenant-1"}, o9},
		{"tenant-*", 100, []string{"tenant-3", "tenant-1", "tenant-20", "tenant-2"}, t9},
		{"tenant-*", 3, []string{"tenant-3", "tenant-1", "tenant-20"}, t9},
		{"tenant-?", 100, []string{"tenant-3", "tenant-1", "tenant-2"}, t9},
		{"*-2*", 100, []string{"tenant-20", "tenant-2", "other-2"}, time.Time{}},
		{"other-?", 1, []string{"other-1"}, o9},
		{"tenant-2", 100, []string{"tenant-2"}, time.Time{}},
		{"tenant-9", 100, []string{}, t9},
		{"nomatch*", 100, []string{}, time.Time{}},
		{"*", 5000, []string{"tenant-3", "tenant-1", "other-1", "tenant-20", "tenant-2", "other-2"}, o9},
	} {
		r := dueTopics(t, d, tc.pattern, tc.limit)
		if !slices.Equal(r.Topics, tc.want) || !r.Next.Equal(tc.next) {
			t.Errorf("DueTopics(%q, %d) = %v next %v, want %v next %v", tc.pattern, tc.limit, r.Topics, r.Next, tc.want, tc.next)
		}
	}
}

func TestDueTopicsInvalid(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	for _, tc := range []struct {
		pattern string
		limit   int
	}{{"", 1}, {"*", 0}, {"*", -1}, {"a b", 1}, {"a#*", 1}, {strings.Repeat("x", ontimedriver.MaxTopicLen+1), 1}} {
		if _, err := d.DueTopics(ctx, tc.pattern, 0, tc.limit); !errors.Is(err, ontimedriver.ErrInvalid) {
			t.Errorf("DueTopics(%q, %d) = %v, want ErrInvalid", tc.pattern, tc.limit, err)
		}
	}
	if _, _, err := d.SubscribeTopics(ctx, ""); !errors.Is(err, ontimedriver.ErrInvalid) {
		t.Errorf("SubscribeTopics(\"\") = %v, want ErrInvalid", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.DueTopics(cancelled, "*", 0, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("DueTopics(cancelled ctx) = %v", err)
	}
	if _, _, err := d.SubscribeTopics(cancelled, "*"); !errors.Is(err, context.Canceled) {
		t.Errorf("SubscribeTopics(cancelled ctx) = %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DueTopics(ctx, "*", 0, 1); !errors.Is(err, ontimedriver.ErrClosed) {
		t.Errorf("DueTopics after Close = %v, want ErrClosed", err)
	}
	if _, _, err := d.SubscribeTopics(ctx, "*"); !errors.Is(err, ontimedriver.ErrClosed) {
		t.Errorf("SubscribeTopics after Close = %v, want ErrClosed", err)
	}
}

func TestTopicIndexRolledBackWrite(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	schedule(t, d, "old", ontimedriver.NewTimer{ID: "a", Delay: time.Hour})
	before, _ := ontimebolt.Indexed(d, "old")
	// An id over bbolt's key limit makes bbolt refuse the key
	// mid-transaction: the call fails, and its writes (a new topic, an
	// earlier timer) are rolled back.
	for _, topic := range []string{"new", "old"} {
		_, err := d.Schedule(ctx, topic, []ontimedriver.NewTimer{{ID: "b"}, {ID: unstorableID}}, ontimedriver.Upsert)
		if err == nil {
			t.Fatal("Schedule with an unstorable id succeeded")
		}
	}
	if _, ok := ontimebolt.Indexed(d, "new"); ok {
		t.Error("a rolled back Schedule left its topic in the index")
	}
	if at, _ := ontimebolt.Indexed(d, "old"); !at.Equal(before) {
		t.Errorf("a rolled back Schedule moved the index to %v from %v", at, before)
	}
	checkIndex(t, d, "new", "old")
}

func TestTopicIndexReopen(t *testing.T) {
	t.Parallel()
	d, path := open(t, nil)
	var names []string
	for i := range 20 {
		topic := fmt.Sprintf("t%02d", i)
		names = append(names, topic)
		schedule(t, d, topic, ontimedriver.NewTimer{ID: "x", Delay: time.Duration(i) * time.Minute})
	}
	// t00's timer is leased (dropped at reopen: due again at once); t01 is
	// acked empty; t02 has only a dead letter.
	c := claim(t, d, "t00", 1, time.Hour)
	for _, topic := range []string{"t01", "t02"} {
		if _, err := d.FireNow(ctx, topic, "x"); err != nil {
			t.Fatal(err)
		}
		cc := claim(t, d, topic, 1, time.Hour)
		kind := ontimedriver.Ack
		if topic == "t02" {
			kind = ontimedriver.Dead
		}
		settle(t, d, topic, ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "x", Token: cc.Timers[0].Token}, Kind: kind})
	}
	if at, _ := ontimebolt.Indexed(d, "t00"); !at.Equal(c.Timers[0].LeaseUntil) {
		t.Fatalf("leased t00 indexed at %v, want its lease deadline", at)
	}
	want := map[string]time.Time{}
	for _, topic := range names {
		if at, ok := ontimebolt.Indexed(d, topic); ok {
			want[topic] = at
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = reopen(t, path, nil)
	checkIndex(t, d, names...)
	if n := ontimebolt.IndexLen(d); n != 18 {
		t.Fatalf("reopened index holds %d topics, want 18", n)
	}
	for _, topic := range names[3:] {
		if at, _ := ontimebolt.Indexed(d, topic); !at.Equal(want[topic]) {
			t.Errorf("%s: reopened index has %v, had %v", topic, at, want[topic])
		}
	}
	// The dropped lease makes t00 due at once, at its own due time.
	r := dueTopics(t, d, "*", 10)
	if !slices.Equal(r.Topics, []string{"t00"}) {
		t.Fatalf("after reopen due %v, want [t00]", r.Topics)
	}
	if !r.Next.Equal(want["t03"]) {
		t.Fatalf("after reopen Next %v, want t03's %v", r.Next, want["t03"])
	}
}

func TestSubscribeTopics(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	tenants, cancelTenants, err := d.SubscribeTopics(ctx, "tenant-*")
	if err != nil {
		t.Fatal(err)
	}
	all, cancelAll, err := d.SubscribeTopics(ctx, "*")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelAll()
	single, cancelSingle, err := d.Subscribe(ctx, "tenant-1")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelSingle()

	expect := func(ch <-chan ontimedriver.TopicWake, want ontimedriver.TopicWake) {
		t.Helper()
		select {
		case w := <-ch:
			if w.Topic != want.Topic || !w.Due.Equal(want.Due) {
				t.Fatalf("woken with %+v, want %+v", w, want)
			}
		default:
			t.Fatalf("no wake-up, want %+v", want)
		}
	}
	quiet := func(ch <-chan ontimedriver.TopicWake) {
		t.Helper()
		select {
		case w := <-ch:
			t.Fatalf("unexpected wake-up %+v", w)
		default:
		}
	}

	// A matching topic wakes the pattern and "*" subscribers, after the
	// write: the index already has it.
	res := schedule(t, d, "tenant-1", ontimedriver.NewTimer{ID: "a", Delay: time.Hour})
	expect(tenants, ontimedriver.TopicWake{Topic: "tenant-1", Due: res[0].Due})
	expect(all, ontimedriver.TopicWake{Topic: "tenant-1", Due: res[0].Due})
	if at := <-single; !at.Equal(res[0].Due) {
		t.Fatalf("Subscribe got %v", at)
	}

	// A topic that does not match wakes only "*".
	res = schedule(t, d, "other", ontimedriver.NewTimer{ID: "a", Delay: time.Hour})
	quiet(tenants)
	expect(all, ontimedriver.TopicWake{Topic: "other", Due: res[0].Due})

	// A later timer (head does not move): no wake-up, as for Subscribe.
	schedule(t, d, "tenant-1", ontimedriver.NewTimer{ID: "b", Delay: 2 * time.Hour})
	quiet(tenants)
	quiet(all)
	select {
	case at := <-single:
		t.Fatalf("Subscribe woken by a later timer: %v", at)
	default:
	}

	// Full buffer, same topic: the earlier due time is kept.
	r1 := schedule(t, d, "tenant-2", ontimedriver.NewTimer{ID: "a", Delay: 50 * time.Minute})
	schedule(t, d, "tenant-2", ontimedriver.NewTimer{ID: "b", Delay: 40 * time.Minute})
	r3 := schedule(t, d, "tenant-2", ontimedriver.NewTimer{ID: "c", Delay: 30 * time.Minute})
	if !r3[0].Due.Before(r1[0].Due) {
		t.Fatal("clock went backwards")
	}
	expect(tenants, ontimedriver.TopicWake{Topic: "tenant-2", Due: r3[0].Due})
	<-all

	// Full buffer, two topics: one "any topic" wake-up with the earlier due.
	ra := schedule(t, d, "tenant-3", ontimedriver.NewTimer{ID: "a", Delay: 10 * time.Minute})
	schedule(t, d, "tenant-4", ontimedriver.NewTimer{ID: "a", Delay: 20 * time.Minute})
	expect(tenants, ontimedriver.TopicWake{Topic: "", Due: ra[0].Due})
	expect(all, ontimedriver.TopicWake{Topic: "", Due: ra[0].Due})

	// Retry, snooze, replay and FireNow wake as Subscribe does.
	if _, err := d.FireNow(ctx, "tenant-3", "a"); err != nil {
		t.Fatal(err)
	}
	w := <-tenants
	if w.Topic != "tenant-3" {
		t.Fatalf("FireNow woke %+v", w)
	}
	<-all
	c := claim(t, d, "tenant-3", 1, time.Minute)
	settle(t, d, "tenant-3", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "a", Token: c.Timers[0].Token}, Kind: ontimedriver.Retry})
	if w := <-tenants; w.Topic != "tenant-3" {
		t.Fatalf("Retry woke %+v", w)
	}
	<-all

	// cancel closes the channel and is idempotent; the others stay.
	cancelTenants()
	cancelTenants()
	if _, ok := <-tenants; ok {
		t.Fatal("channel open after cancel")
	}
	schedule(t, d, "tenant-5", ontimedriver.NewTimer{ID: "a"})
	if w := <-all; w.Topic != "tenant-5" {
		t.Fatalf("woken with %+v", w)
	}

	// Close closes the remaining channels.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-all; ok {
		t.Fatal("channel open after Close")
	}
}

// TestTopicIndexModel runs random writes over a few topics and checks after
// each that the index is exactly the file's heads, and that DueTopics
// agrees with Claim.
func TestTopicIndexModel(t *testing.T) {
	t.Parallel()
	d, path := open(t, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	topics := []string{"a", "b", "c", "d"}
	type held struct {
		topic string
		lease ontimedriver.Lease
	}
	var leases []held
	steps := 400
	if raceBuild {
		steps = 200
	}
	for step := range steps {
		topic := topics[rng.IntN(len(topics))]
		id := fmt.Sprint(rng.IntN(6))
		switch op := rng.IntN(10); op {
		case 0, 1, 2:
			delay := []time.Duration{0, 0, time.Millisecond, time.Minute, time.Hour}[rng.IntN(5)]
			schedule(t, d, topic, ontimedriver.NewTimer{ID: id, Delay: delay})
		case 3, 4:
			c := claim(t, d, topic, 1+rng.IntN(3), []time.Duration{time.Millisecond, time.Minute}[rng.IntN(2)])
			for _, ct := range c.Timers {
				leases = append(leases, held{topic, ontimedriver.Lease{ID: ct.ID, Token: ct.Token}})
			}
			at, ok := ontimebolt.Indexed(d, topic)
			if ok != !c.Next.IsZero() || !at.Equal(c.Next) {
				t.Fatalf("step %d: after Claim indexed (%v, %v), Claim's Next %v", step, at, ok, c.Next)
			}
		case 5, 6:
			if len(leases) == 0 {
				continue
			}
			i := rng.IntN(len(leases))
			h := leases[i]
			leases = slices.Delete(leases, i, i+1)
			kind := []ontimedriver.SettleKind{ontimedriver.Ack, ontimedriver.Retry, ontimedriver.Snooze, ontimedriver.Dead}[rng.IntN(4)]
			delay := []time.Duration{0, time.Millisecond, time.Minute}[rng.IntN(3)]
			settle(t, d, h.topic, ontimedriver.Settlement{Lease: h.lease, Kind: kind, Delay: delay})
		case 7:
			if len(leases) == 0 {
				continue
			}
			h := leases[rng.IntN(len(leases))]
			if _, err := d.Extend(ctx, h.topic, []ontimedriver.Lease{h.lease}, time.Minute); err != nil {
				t.Fatal(err)
			}
		case 8:
			if err := d.Cancel(ctx, topic, id); err != nil && !errors.Is(err, ontimedriver.ErrNotFound) {
				t.Fatal(err)
			}
		case 9:
			switch rng.IntN(3) {
			case 0:
				if _, err := d.ReplayAllDead(ctx, topic); err != nil {
					t.Fatal(err)
				}
			case 1:
				if _, err := d.PurgeAllDead(ctx, topic); err != nil {
					t.Fatal(err)
				}
			default:
				if _, err := d.FireNow(ctx, topic, id); err != nil && !errors.Is(err, ontimedriver.ErrNotFound) && !errors.Is(err, ontimedriver.ErrLeased) {
					t.Fatal(err)
				}
			}
		}
		checkIndex(t, d, topics...)
		// Every topic DueTopics reports is due by the index, which is the
		// file's head: Claim would find its first q entry claimable.
		r := dueTopics(t, d, "*", 10)
		for _, due := range r.Topics {
			at, _ := ontimebolt.Indexed(d, due)
			if at.After(r.Now) {
				t.Fatalf("step %d: %s reported due at %v, indexed %v", step, due, r.Now, at)
			}
		}
		if step%100 == 99 {
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d = reopen(t, path, nil)
			leases = nil // dropped at reopen
			checkIndex(t, d, topics...)
		}
	}
}

// TestTopicIndexConcurrent writes to many topics from many goroutines (so
// batches share transactions, and some fail and are redone) while others
// read the index, then checks it against the file.
func TestTopicIndexConcurrent(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	topics := make([]string, 16)
	for i := range topics {
		topics[i] = fmt.Sprintf("c%d", i)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := d.DueTopics(ctx, "c1*", 0, 5); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var writers sync.WaitGroup
	for g := range 8 {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 30 {
				topic := topics[rng.IntN(len(topics))]
				switch rng.IntN(4) {
				case 0:
					// Fails mid-transaction: redone without it.
					_, _ = d.Schedule(ctx, topic, []ontimedriver.NewTimer{{ID: "z", Delay: time.Nanosecond}, {ID: unstorableID}}, ontimedriver.Upsert)
				case 1:
					c, err := d.Claim(ctx, topic, 2, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					for _, ct := range c.Timers {
						if _, err := d.Settle(ctx, topic, []ontimedriver.Settlement{{Lease: ontimedriver.Lease{ID: ct.ID, Token: ct.Token}, Kind: ontimedriver.Ack}}); err != nil {
							t.Error(err)
						}
					}
				default:
					if _, err := d.Schedule(ctx, topic, []ontimedriver.NewTimer{{ID: fmt.Sprint(g, "-", i), Delay: time.Duration(rng.IntN(3)) * time.Minute}}, ontimedriver.Upsert); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	checkIndex(t, d, topics...)
}

// manyTopics schedules one timer at due in each of n topics named
// prefix0..prefix(n-1), from concurrent callers so that group commit
// shares the fsyncs.
func manyTopics(t testing.TB, d *ontimebolt.Driver, prefix string, n int, delay time.Duration) {
	t.Helper()
	const callers = 256
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := g; i < n; i += callers {
				_, err := d.Schedule(ctx, fmt.Sprint(prefix, i), []ontimedriver.NewTimer{{ID: "x", Delay: delay}}, ontimedriver.Upsert)
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// TestDueTopicsManyIdleTopics: with 100,000 topics none of which is due,
// DueTopics looks at a handful of index entries, not at every topic. The
// reopened store rebuilds the same index from the file.
func TestDueTopicsManyIdleTopics(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 topics")
	}
	n := 100_000
	if raceBuild {
		n = 20_000 // the same check; -race makes bbolt about 10 times slower
	}
	d, path := open(t, &ontimebolt.Options{MaxBatch: 256})
	manyTopics(t, d, "tenant-", n, time.Hour)
	schedule(t, d, "soonest", ontimedriver.NewTimer{ID: "x", Delay: 30 * time.Minute})
	soonest, _ := ontimebolt.Indexed(d, "soonest")

	check := func(d *ontimebolt.Driver) {
		t.Helper()
		if got := ontimebolt.IndexLen(d); got != n+1 {
			t.Fatalf("index holds %d topics, want %d", got, n+1)
		}
		v0 := ontimebolt.IndexVisited(d)
		r := dueTopics(t, d, "*", 100)
		if len(r.Topics) != 0 || !r.Next.Equal(soonest) {
			t.Fatalf("DueTopics(*) = %v next %v, want none and %v", r.Topics, r.Next, soonest)
		}
		if v := ontimebolt.IndexVisited(d) - v0; v != 1 {
			t.Fatalf("DueTopics(*) over %d idle topics visited %d entries, want 1", n, v)
		}

		// A pattern: entries that do not match are passed over, at most
		// 1000 of them (then Next is unknown), never all of them.
		v0 = ontimebolt.IndexVisited(d)
		r = dueTopics(t, d, "tenant-9999?", 100)
		if len(r.Topics) != 0 {
			t.Fatalf("DueTopics(pattern) = %v", r.Topics)
		}
		if v := ontimebolt.IndexVisited(d) - v0; v > 1001 {
			t.Fatalf("DueTopics(pattern) visited %d entries, want at most 1001", v)
		}
		// A pattern matching the earliest entry: found at once.
		v0 = ontimebolt.IndexVisited(d)
		r = dueTopics(t, d, "soon*", 100)
		if !r.Next.Equal(soonest) {
			t.Fatalf("DueTopics(soon*) Next %v, want %v", r.Next, soonest)
		}
		if v := ontimebolt.IndexVisited(d) - v0; v != 1 {
			t.Fatalf("DueTopics(soon*) visited %d entries, want 1", v)
		}
	}
	check(d)

	// A few due topics among them: exactly those, visiting about as many
	// entries as they are (each visited entry adds at most two to look at).
	for _, topic := range []string{"tenant-17", "tenant-4242", "tenant-9"} {
		if _, err := d.FireNow(ctx, topic, "x"); err != nil {
			t.Fatal(err)
		}
	}
	v0 := ontimebolt.IndexVisited(d)
	r := dueTopics(t, d, "*", 100)
	if !slices.Equal(r.Topics, []string{"tenant-17", "tenant-4242", "tenant-9"}) || !r.Next.Equal(soonest) {
		t.Fatalf("DueTopics(*) = %v next %v", r.Topics, r.Next)
	}
	if v := ontimebolt.IndexVisited(d) - v0; v > 4 {
		t.Fatalf("DueTopics(*) with 3 due visited %d entries, want 4", v)
	}
	for _, topic := range []string{"tenant-17", "tenant-4242", "tenant-9"} {
		c := claim(t, d, topic, 1, time.Minute)
		settle(t, d, topic, ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "x", Token: c.Timers[0].Token}, Kind: ontimedriver.Ack})
	}
	n -= 3

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = reopen(t, path, nil)
	check(d)
}

// TestDueTopicsExpiredLease: a leased timer's topic is indexed at the lease
// deadline, and is due once the lease has expired (Claim then hands the
// timer out again).
func TestDueTopicsExpiredLease(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "a"})
	c := claim(t, d, "q", 1, 50*time.Millisecond)
	deadline := c.Timers[0].LeaseUntil
	wait.For(t, 10*time.Second, func() bool {
		r := dueTopics(t, d, "*", 10)
		if len(r.Topics) == 0 {
			if !r.Next.Equal(deadline) || !r.Now.Before(deadline) {
				t.Fatalf("leased: Now %v, Next %v, lease deadline %v", r.Now, r.Next, deadline)
			}
			return false
		}
		if r.Now.Before(deadline) {
			t.Fatalf("reported due at %v, before the lease deadline %v", r.Now, deadline)
		}
		return true
	}, "the expired lease to be reported due")
	if c := claim(t, d, "q", 1, time.Minute); len(c.Timers) != 1 || c.Timers[0].Attempt != 2 {
		t.Fatalf("after the lease expired Claim got %+v", c.Timers)
	}
}
