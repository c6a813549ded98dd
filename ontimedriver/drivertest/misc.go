package drivertest

import (
	"errors"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

func miscCases() []testCase {
	return []testCase{
		{"TopicsNeverCross", testTopicsNeverCross},
		{"EmptyTopic", testEmptyTopic},
		{"Ping", testPing},
	}
}

// testTopicsNeverCross: the same id in several topics (whose names extend
// one another) names independent timers.
func testTopicsNeverCross(e *env) {
	const a, b, c = "iso", "iso:sub", "iso2"
	ra := e.put(a, dueNow("same", "in-a"), dueIn("only-a", time.Hour, "x"))
	rb := e.put(b, dueNow("same", "in-b"))
	rc := e.put(c, dueIn("same", time.Hour, "in-c"))

	got := e.claim(a, 10, longLease)
	e.wantIDs("claim "+a, claimedIDs(got), []string{"same"})
	if len(got.Timers) != 1 {
		e.t.FailNow()
	}
	ca := got.Timers[0]
	e.wantPayload("claim "+a, ca.Payload, []byte("in-a"))
	e.wantCounts(a, 1, 1, 0)
	e.wantCounts(b, 1, 0, 0)
	e.wantCounts(c, 1, 0, 0)

	// a's token means nothing in b.
	e.wantErr("ack in "+b+" with "+a+"'s token", e.settle1(b, ackOp(ca)), ontimedriver.ErrLeaseLost)
	e.wantErr("extend in "+b+" with "+a+"'s token", e.extend(b, time.Hour, leaseOf(ca))[0], ontimedriver.ErrLeaseLost)
	e.wantScheduled("Get in "+b, e.get(b, "same"), rb[0].Due, 0, []byte("in-b"))
	e.wantScheduled("Get in "+c, e.get(c, "same"), rc[0].Due, 0, []byte("in-c"))
	e.wantGone(b, "only-a")

	// Cancel in b leaves a's lease alone.
	e.wantErr("cancel in "+b, e.d.Cancel(e.ctx, b, "same"), nil)
	e.wantLeased("Get in "+a+" after cancel in "+b, e.get(a, "same"), ca, ra[0].Due)
	e.wantErr("ack in "+a, e.settle1(a, ackOp(ca)), nil)
	e.wantScheduled("Get in "+c+" after ack in "+a, e.get(c, "same"), rc[0].Due, 0, []byte("in-c"))

	// Dead letters are per topic too.
	e.put(b, dueNow("same", "in-b-2"))
	cb := e.claimOne(e.d, b, "same", longLease)
	e.wantErr("dead in "+b, e.settle1(b, deadOp(cb, "r", "e")), nil)
	if n, err := e.d.ReplayAllDead(e.ctx, a); err != nil || n != 0 {
		e.t.Errorf("ReplayAllDead(%s) = %d, %v; want 0", a, n, err)
	}
	if n, err := e.d.PurgeDead(e.ctx, a, []string{"same"}); err != nil || n != 0 {
		e.t.Errorf("PurgeDead(%s, same) = %d, %v; want 0", a, n, err)
	}
	e.wantIDs("ListDead "+a, deadIDs(e.listDeadAll(a, ontimedriver.ListOptions{})), nil)
	if !e.lacks.NoDeadLetters {
		e.wantIDs("ListDead "+b, deadIDs(e.listDeadAll(b, ontimedriver.ListOptions{})), []string{"same"})
	}
	e.wantCounts(b, 0, 0, 1)

	e.wantIDs("List "+a, timerIDs(e.listAll(a, ontimedriver.ListOptions{})), []string{"only-a"})
	e.wantIDs("List "+c, timerIDs(e.listAll(c, ontimedriver.ListOptions{})), []string{"same"})
	if got := e.claim(b, 10, longLease); len(got.Timers) != 0 {
		e.t.Errorf("claim %s: %q", b, claimedIDs(got))
	}
}

// testEmptyTopic: every call on a topic that never held anything answers
// "nothing" and leaves no trace in Topics.
func testEmptyTopic(e *env) {
	const topic = "empty.never-used"
	ctx := e.ctx
	if _, err := e.d.Get(ctx, topic, "x"); !errors.Is(err, ontimedriver.ErrNotFound) {
		e.t.Errorf("Get: %v, want ErrNotFound", err)
	}
	e.wantErr("Cancel", e.d.Cancel(ctx, topic, "x"), ontimedriver.ErrNotFound)
	e.wantCounts(topic, 0, 0, 0)
	if p, err := e.d.List(ctx, topic, ontimedriver.ListOptions{}); err != nil || p == nil || len(p.Timers) != 0 || p.NextCursor != "" {
		e.t.Errorf("List = %+v, %v; want an empty last page", p, err)
	}
	if p, err := e.d.ListDead(ctx, topic, ontimedriver.ListOptions{}); err != nil || p == nil || len(p.Dead) != 0 || p.NextCursor != "" {
		e.t.Errorf("ListDead = %+v, %v; want an empty last page", p, err)
	}
	if n, err := e.d.ReplayAllDead(ctx, topic); err != nil || n != 0 {
		e.t.Errorf("ReplayAllDead = %d, %v; want 0", n, err)
	}
	if n, err := e.d.ReplayDead(ctx, topic, []string{"x"}); err != nil || n != 0 {
		e.t.Errorf("ReplayDead(x) = %d, %v; want 0", n, err)
	}
	if n, err := e.d.PurgeAllDead(ctx, topic); err != nil || n != 0 {
		e.t.Errorf("PurgeAllDead = %d, %v; want 0", n, err)
	}
	if n, err := e.d.PurgeDead(ctx, topic, []string{"x"}); err != nil || n != 0 {
		e.t.Errorf("PurgeDead(x) = %d, %v; want 0", n, err)
	}
	got := e.claim(topic, 10, longLease)
	if len(got.Timers) != 0 || !got.Next.IsZero() {
		e.t.Errorf("Claim: %q, Next %s; want nothing, zero Next", claimedIDs(got), ts(got.Next))
	}
	bogus := ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "x", Token: "t"}}
	for _, k := range []ontimedriver.SettleKind{ontimedriver.Ack, ontimedriver.Retry, ontimedriver.Snooze, ontimedriver.Dead} {
		bogus.Kind = k
		e.wantErr("Settle "+k.String(), e.settle1(topic, bogus), ontimedriver.ErrLeaseLost)
	}
	e.wantErr("Extend", e.extend(topic, time.Hour, bogus.Lease)[0], ontimedriver.ErrLeaseLost)
	e.wantGone(topic, "x")
	e.wantCounts(topic, 0, 0, 0)
	_, cancel := e.subscribe(e.d, topic)
	cancel()
	if got := e.topics(); len(got) != 0 {
		e.t.Errorf("Topics: %q, want none", got)
	}
}

// testPing: both drivers reach the store.
func testPing(e *env) {
	e.wantErr("Ping", e.d.Ping(e.ctx), nil)
	e.wantErr("Ping (peer)", e.peer().Ping(e.ctx), nil)
}
