package drivertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// topicIndexCases check ontimedriver.TopicIndex. Run includes them (group
// "TopicIndex"); a driver that does not implement TopicIndex, or whose
// TopicIndexed reports false, has them skipped, except NoIndex, which
// then checks that the methods refuse with ErrNoTopicIndex.
func topicIndexCases() []testCase {
	return []testCase{
		{"Empty", testIndexEmpty},
		{"DueNotEarly", testIndexDueNotEarly},
		{"Horizon", testIndexHorizon},
		{"EmptiedTopicsLeave", testIndexEmptiedLeave},
		{"RetryAndSnoozeStay", testIndexRetryStays},
		{"FireNowAndReplay", testIndexFireReplay},
		{"Pattern", testIndexPattern},
		{"PatternNext", testIndexPatternNext},
		{"LimitAndOrder", testIndexLimit},
		{"Subscribe", testIndexSubscribe},
		{"Invalid", testIndexInvalid},
		{"NoIndex", testIndexNone},
	}
}

// RunTopicIndex runs only the TopicIndex cases of the suite (Run runs
// them too), each a parallel subtest with its own driver. It fails when
// the driver does not implement ontimedriver.TopicIndex.
func RunTopicIndex(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("drivertest: Harness.New is nil")
	}
	probe := h.New(t)
	if _, ok := probe.(ontimedriver.TopicIndex); !ok {
		t.Fatalf("drivertest: %T does not implement ontimedriver.TopicIndex", probe)
	}
	for _, c := range topicIndexCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(newEnv(t, h))
		})
	}
}

// index returns the driver's TopicIndex, or skips the case when it keeps
// none.
func (e *env) index() ontimedriver.TopicIndex {
	e.t.Helper()
	ti, ok := e.d.(ontimedriver.TopicIndex)
	if !ok {
		e.t.Skipf("%T does not implement ontimedriver.TopicIndex", e.d)
	}
	if !ti.TopicIndexed() {
		e.t.Skipf("%T keeps no topic index in this configuration (TopicIndexed is false)", e.d)
	}
	return ti
}

// dueTopics calls DueTopics and checks the shape of its result.
func (e *env) dueTopics(pattern string, limit int) *ontimedriver.DueTopicsResult {
	e.t.Helper()
	r, err := e.index().DueTopics(e.ctx, pattern, 0, limit)
	if err != nil {
		e.t.Fatalf("DueTopics(%q, %d): %v", pattern, limit, err)
	}
	if r == nil || r.Now.IsZero() {
		e.t.Fatalf("DueTopics(%q, %d): nil result or zero Now: %+v", pattern, limit, r)
	}
	if len(r.Topics) > limit {
		e.t.Errorf("DueTopics(%q, %d): %d topics", pattern, limit, len(r.Topics))
	}
	for _, topic := range r.Topics {
		if !ontimedriver.MatchTopic(pattern, topic) {
			e.t.Errorf("DueTopics(%q): topic %q does not match", pattern, topic)
		}
	}
	if !r.Next.IsZero() && !r.Next.After(r.Now.Truncate(time.Millisecond)) {
		e.t.Errorf("DueTopics(%q): Next %s is not after Now %s", pattern, ts(r.Next), ts(r.Now))
	}
	return r
}

// waitDue waits until DueTopics(pattern) lists topic and returns that
// result.
func (e *env) waitDue(pattern, topic string) *ontimedriver.DueTopicsResult {
	e.t.Helper()
	var r *ontimedriver.DueTopicsResult
	WaitFor(e.t, waitTimeout, func() bool {
		r = e.dueTopics(pattern, 1000)
		return slices.Contains(r.Topics, topic)
	}, fmt.Sprintf("DueTopics(%q) to list %q", pattern, topic))
	return r
}

// testIndexEmpty: a fresh namespace has no due topic and no Next.
func testIndexEmpty(e *env) {
	e.index()
	r := e.dueTopics("*", 10)
	if len(r.Topics) != 0 || !r.Next.IsZero() {
		e.t.Errorf("fresh store: DueTopics = %v, Next %s; want none, zero", r.Topics, ts(r.Next))
	}
}

// testIndexDueNotEarly: a topic's first timer, due in 300 ms, is not
// listed before the store's clock reaches its due time (for a topic
// scheduled once, the index holds exactly its due time), and Next reports
// it; a topic due now is listed at once.
func testIndexDueNotEarly(e *env) {
	e.index()
	due := e.put("idx.soon", dueIn("a", 300*time.Millisecond, "p"))[0].Due
	e.put("idx.now", dueNow("b", "p"))
	r := e.dueTopics("*", 10)
	if !slices.Contains(r.Topics, "idx.now") {
		e.t.Errorf("DueTopics = %v right after a timer due now was written, want idx.now in it", r.Topics)
	}
	for {
		r = e.dueTopics("*", 10)
		if slices.Contains(r.Topics, "idx.soon") {
			if r.Now.Before(due) {
				e.t.Fatalf("idx.soon listed at store Now %s, before its timer's due time %s", ts(r.Now), ts(due))
			}
			break
		}
		if r.Now.After(due.Add(waitTimeout)) {
			e.t.Fatalf("idx.soon not listed %v after its due time %s", waitTimeout, ts(due))
		}
		if !r.Now.Before(due) {
			continue // due now: the next call must list it
		}
		if r.Next.IsZero() || r.Next.After(due) {
			e.t.Fatalf("before idx.soon is due: Next = %s, want at or before its due time %s", ts(r.Next), ts(due))
		}
		time.Sleep(pollInterval)
	}
	res := e.claim("idx.soon", 10, longLease)
	if len(res.Timers) != 1 {
		e.t.Errorf("claim of the listed topic took %v, want a", claimedIDs(res))
	}
}

// testIndexHorizon: DueTopics with a horizon lists the topics due within
// it, each with its instant (the due time as stored, never before it),
// earliest first; Next is the first instant beyond the horizon; a
// negative horizon is refused.
func testIndexHorizon(e *env) {
	ti := e.index()
	near := e.put("hz.near", dueIn("a", 200*time.Millisecond, "p"))[0].Due
	mid := e.put("hz.mid", dueIn("b", 400*time.Millisecond, "p"))[0].Due
	far := e.put("hz.far", dueIn("c", time.Hour, "p"))[0].Due
	r, err := ti.DueTopics(e.ctx, "hz.*", 10*time.Second, 10)
	if err != nil {
		e.t.Fatalf("DueTopics within 10s: %v", err)
	}
	if !slices.Equal(r.Topics, []string{"hz.near", "hz.mid"}) || len(r.At) != 2 {
		e.t.Fatalf("DueTopics within 10s = %v at %v, want [hz.near hz.mid] with their instants", r.Topics, r.At)
	}
	for i, want := range []time.Time{near, mid} {
		// A lower bound that is exact for a topic written once.
		if !r.At[i].Equal(want) {
			e.t.Errorf("%s: At %s, want its due time %s", r.Topics[i], ts(r.At[i]), ts(want))
		}
	}
	if !r.Next.Equal(far) {
		e.t.Errorf("Next = %s, want hz.far's due time %s", ts(r.Next), ts(far))
	}
	r, err = ti.DueTopics(e.ctx, "hz.*", 0, 10)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.Now.Before(near) && len(r.Topics) != 0 {
		e.t.Errorf("DueTopics within 0 at %s = %v, want none before %s", ts(r.Now), r.Topics, ts(near))
	}
	if _, err := ti.DueTopics(e.ctx, "*", -time.Second, 10); !errors.Is(err, ontimedriver.ErrInvalid) {
		e.t.Errorf("DueTopics with a negative horizon: %v, want ErrInvalid", err)
	}
}

// testIndexEmptiedLeave: claiming every timer of a topic moves its entry
// to the lease deadline; acking them removes the topic (no due topic, no
// Next); a topic emptied by dead-lettering leaves too.
func testIndexEmptiedLeave(e *env) {
	e.index()
	const topic = "idx.leave"
	e.put(topic, dueNow("a", "p"), dueNow("b", "p"), dueNow("c", "p"))
	e.waitDue("*", topic)
	res := e.claim(topic, 10, longLease)
	if len(res.Timers) != 3 {
		e.t.Fatalf("claimed %v, want a, b, c", claimedIDs(res))
	}
	r := e.dueTopics("*", 10)
	if slices.Contains(r.Topics, topic) {
		e.t.Errorf("after every timer was claimed (lease %v): DueTopics = %v, want %s left out", longLease, r.Topics, topic)
	}
	if r.Next.IsZero() || r.Next.After(res.Timers[0].LeaseUntil) {
		e.t.Errorf("after the claim: Next = %s, want the lease deadline %s (or earlier)", ts(r.Next), ts(res.Timers[0].LeaseUntil))
	}
	ops := make([]ontimedriver.Settlement, 0, 3)
	for _, c := range res.Timers[:2] {
		ops = append(ops, ackOp(c))
	}
	ops = append(ops, deadOp(res.Timers[2], ontimedriver.ReasonRejected, "no"))
	for i, err := range e.settle(topic, ops...) {
		if err != nil {
			e.t.Fatalf("settle %d: %v", i, err)
		}
	}
	r = e.dueTopics("*", 10)
	if len(r.Topics) != 0 || !r.Next.IsZero() {
		e.t.Errorf("after every timer was settled: DueTopics = %v, Next %s; want none, zero", r.Topics, ts(r.Next))
	}
}

// testIndexRetryStays: a retried or snoozed timer keeps its topic in the
// index: listed again by its new due time at the latest.
func testIndexRetryStays(e *env) {
	e.index()
	for _, kind := range []ontimedriver.SettleKind{ontimedriver.Retry, ontimedriver.Snooze} {
		topic := "idx.stay." + kind.String()
		e.put(topic, dueNow("a", "p"))
		c := e.claimOne(e.d, topic, "a", longLease)
		op := retryOp(c, 200*time.Millisecond, "again")
		if kind == ontimedriver.Snooze {
			op = snoozeOp(c, 200*time.Millisecond)
		}
		if err := e.settle1(topic, op); err != nil {
			e.t.Fatalf("%s: %v", kind, err)
		}
		r := e.dueTopics(topic, 10)
		if !slices.Contains(r.Topics, topic) && (r.Next.IsZero() || r.Next.After(r.Now.Add(200*time.Millisecond+time.Millisecond))) {
			e.t.Errorf("after a %s in 200ms: DueTopics = %v, Next %s (Now %s); want the topic due or next within 200ms", kind, r.Topics, ts(r.Next), ts(r.Now))
		}
		e.waitDue(topic, topic)
		if got := e.claimWait(e.d, topic, 10, longLease); len(got.Timers) != 1 {
			e.t.Errorf("%s: claimed %v after the topic was listed, want a", kind, claimedIDs(got))
		}
	}
}

// testIndexFireReplay: FireNow and ReplayDead make a topic due at once.
func testIndexFireReplay(e *env) {
	e.index()
	e.put("idx.fire", dueIn("a", time.Hour, "p"))
	if r := e.dueTopics("*", 10); slices.Contains(r.Topics, "idx.fire") {
		e.t.Fatalf("a timer due in an hour: DueTopics = %v", r.Topics)
	}
	if _, err := e.d.FireNow(e.ctx, "idx.fire", "a"); err != nil {
		e.t.Fatal(err)
	}
	e.waitDue("*", "idx.fire")

	if e.lacks.NoDeadLetters {
		return
	}
	const topic = "idx.replay"
	e.kill(topic, "b")
	if r := e.dueTopics(topic, 10); len(r.Topics) != 0 || !r.Next.IsZero() {
		e.t.Fatalf("a topic holding only a dead letter: DueTopics = %v, Next %s; want none, zero", r.Topics, ts(r.Next))
	}
	if n, err := e.d.ReplayDead(e.ctx, topic, []string{"b"}); err != nil || n != 1 {
		e.t.Fatalf("ReplayDead = %d, %v", n, err)
	}
	e.waitDue(topic, topic)
}

// patternTopics are topics with every kind of character a topic may hold.
var patternTopics = []string{
	"tenant-a", "tenant-b", "tenant-ab", "tenant.a", "tenantXa", "other",
	"a.b", "a-b", "a+b", "axb", "x:y/z@w~q_1", "t", "tenant-", "b.tenant-a",
}

// patterns are checked against MatchTopic.
var patterns = []string{
	"*", "**", "tenant-*", "tenant-?", "tenant-??", "tenant?a", "tenant.*",
	"a.b", "a?b", "*b", "*-*", "x:y/*", "?", "??????", "t*a*", "*.*", "*_1",
	"a+b", "*tenant-a", "*a*b*", "t*", "*t", "other", "nothing",
}

// testIndexPattern: DueTopics lists exactly the due topics that match a
// pattern, as ontimedriver.MatchTopic matches them.
func testIndexPattern(e *env) {
	e.index()
	for _, topic := range patternTopics {
		e.put(topic, dueNow("a", "p"))
	}
	e.put("tenant-later", dueIn("a", time.Hour, "p"))
	for _, p := range patterns {
		var want []string
		for _, topic := range patternTopics {
			if ontimedriver.MatchTopic(p, topic) {
				want = append(want, topic)
			}
		}
		got := slices.Clone(e.dueTopics(p, 1000).Topics)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			e.t.Errorf("DueTopics(%q) = %v, want %v", p, got, want)
		}
	}
}

// testIndexPatternNext: Next is the earliest later entry that matches the
// pattern, not the earliest of all.
func testIndexPatternNext(e *env) {
	e.index()
	now := e.now()
	soon := now.Add(10 * time.Minute).Truncate(time.Millisecond)
	later := now.Add(time.Hour).Truncate(time.Millisecond)
	e.put("other", dueAt("a", soon, "p"))
	e.put("tenant-x", dueAt("a", later, "p"))
	e.put("tenant-now", dueNow("a", "p"))
	r := e.dueTopics("tenant-*", 10)
	if !slices.Equal(r.Topics, []string{"tenant-now"}) || !r.Next.Equal(later) {
		e.t.Errorf("DueTopics(tenant-*) = %v, Next %s; want [tenant-now], %s", r.Topics, ts(r.Next), ts(later))
	}
	r = e.dueTopics("*", 10)
	if !r.Next.Equal(soon) {
		e.t.Errorf("DueTopics(*): Next %s, want %s", ts(r.Next), ts(soon))
	}
	r = e.dueTopics("nomatch-*", 10)
	if len(r.Topics) != 0 || !r.Next.IsZero() {
		e.t.Errorf("DueTopics(nomatch-*) = %v, Next %s; want none, zero", r.Topics, ts(r.Next))
	}
}

// testIndexLimit: DueTopics returns at most limit topics, earliest first.
func testIndexLimit(e *env) {
	e.index()
	now := e.now()
	var want []string
	for i := range 5 {
		topic := fmt.Sprintf("idx.limit.%d", i)
		want = append(want, topic)
		// published out of order, due in order
		e.put(topic, dueAt("a", now.Add(time.Duration(i-10)*time.Second), "p"))
	}
	if r := e.dueTopics("*", 2); !slices.Equal(r.Topics, want[:2]) {
		e.t.Errorf("DueTopics(*, 2) = %v, want %v", r.Topics, want[:2])
	}
	if r := e.dueTopics("idx.limit.*", 3); !slices.Equal(r.Topics, want[:3]) {
		e.t.Errorf("DueTopics(idx.limit.*, 3) = %v, want %v", r.Topics, want[:3])
	}
	if r := e.dueTopics("*", 10); !slices.Equal(r.Topics, want) {
		e.t.Errorf("DueTopics(*, 10) = %v, want %v", r.Topics, want)
	}
	if r := e.dueTopics("*", 100000); !slices.Equal(r.Topics, want) {
		e.t.Errorf("DueTopics(*, 100000) = %v, want %v", r.Topics, want)
	}
}

// testIndexSubscribe: SubscribeTopics (on a peer, as another worker
// process would) gets the topic and due time of a timer written to a
// matching topic, and nothing for one that does not match.
func testIndexSubscribe(e *env) {
	e.index()
	peer, ok := e.peer().(ontimedriver.TopicIndex)
	if !ok {
		e.t.Fatalf("the peer %T does not implement TopicIndex", e.peer())
	}
	ch, cancel, err := peer.SubscribeTopics(e.ctx, "tenant-*")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cancel)
	due := e.put("tenant-x", dueIn("a", 50*time.Millisecond, "p"))[0].Due
	timeout := time.After(noteTimeout)
	for got := false; !got; {
		select {
		case w := <-ch:
			switch {
			case w.Topic == "":
				// "any topic": allowed, not what this waits for
			case w.Topic != "tenant-x":
				e.t.Fatalf("wake-up for %q, want tenant-x", w.Topic)
			case !w.Due.IsZero() && !near(w.Due, due, time.Millisecond):
				e.t.Fatalf("wake-up for tenant-x due %s, want %s", ts(w.Due), ts(due))
			default:
				got = true
			}
		case <-timeout:
			e.t.Fatalf("no wake-up for tenant-x within %v", noteTimeout)
		}
	}
	e.put("other", dueNow("a", "p"))
	e.put("tenant", dueNow("a", "p"))
	select {
	case w := <-ch:
		if w.Topic != "" {
			e.t.Errorf("wake-up for %q, which does not match tenant-*", w.Topic)
		}
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	cancel() // harmless
	e.put("tenant-y", dueNow("a", "p"))
	select {
	case w := <-ch:
		if w.Topic != "" {
			e.t.Errorf("wake-up for %q after cancel", w.Topic)
		}
	case <-time.After(100 * time.Millisecond):
	}
}

// testIndexInvalid: a pattern that ValidatePattern refuses, or a limit
// below 1, is refused with ErrInvalid.
func testIndexInvalid(e *env) {
	ti := e.index()
	for _, p := range []string{"", "a b", "{x}", "a[b]", "tenant#1", "\\"} {
		if _, err := ti.DueTopics(e.ctx, p, 0, 10); !errors.Is(err, ontimedriver.ErrInvalid) {
			e.t.Errorf("DueTopics(%q): %v, want ErrInvalid", p, err)
		}
		if _, cancel, err := ti.SubscribeTopics(e.ctx, p); !errors.Is(err, ontimedriver.ErrInvalid) {
			if cancel != nil {
				cancel()
			}
			e.t.Errorf("SubscribeTopics(%q): %v, want ErrInvalid", p, err)
		}
	}
	for _, n := range []int{0, -1} {
		if _, err := ti.DueTopics(e.ctx, "*", 0, n); !errors.Is(err, ontimedriver.ErrInvalid) {
			e.t.Errorf("DueTopics(*, %d): %v, want ErrInvalid", n, err)
		}
	}
}

// testIndexNone: a driver that implements TopicIndex but keeps no index
// in its configuration refuses with ErrNoTopicIndex.
func testIndexNone(e *env) {
	ti, ok := e.d.(ontimedriver.TopicIndex)
	if !ok {
		e.t.Skipf("%T does not implement ontimedriver.TopicIndex", e.d)
	}
	if ti.TopicIndexed() {
		e.t.Skip("the driver keeps a topic index")
	}
	if _, err := ti.DueTopics(e.ctx, "*", 0, 10); !errors.Is(err, ontimedriver.ErrNoTopicIndex) {
		e.t.Errorf("DueTopics without an index: %v, want ErrNoTopicIndex", err)
	}
	if _, cancel, err := ti.SubscribeTopics(e.ctx, "*"); !errors.Is(err, ontimedriver.ErrNoTopicIndex) {
		if cancel != nil {
			cancel()
		}
		e.t.Errorf("SubscribeTopics without an index: %v, want ErrNoTopicIndex", err)
	}
}
