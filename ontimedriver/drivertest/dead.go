package drivertest

import (
	"errors"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

func deadCases() []testCase {
	return []testCase{
		{"OrderAndPaging", testDeadOrderAndPaging},
		{"Replay", testDeadReplay},
		{"ReplaySkipsLive", testDeadReplaySkipsLive},
		{"Purge", testDeadPurge},
		{"GetDead", testGetDead},
	}
}

// kill schedules ids due now, claims them and dead-letters them in the order
// given, one Settle call each, a few milliseconds apart so their death times
// differ. It returns the claims.
func (e *env) kill(topic string, ids ...string) map[string]ontimedriver.ClaimedTimer {
	e.t.Helper()
	timers := make([]ontimedriver.NewTimer, len(ids))
	for i, id := range ids {
		timers[i] = dueNow(id, "p-"+id)
	}
	e.put(topic, timers...)
	got := e.claim(topic, len(ids)+1, longLease)
	if len(got.Timers) != len(ids) {
		e.t.Fatalf("claim: %q, want %q", claimedIDs(got), ids)
	}
	cl := make(map[string]ontimedriver.ClaimedTimer)
	for _, c := range got.Timers {
		cl[c.ID] = c
	}
	for i, id := range ids {
		if i > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		e.wantErr("dead "+id, e.settle1(topic, deadOp(cl[id], "r-"+id, "e-"+id)), nil)
	}
	return cl
}

// testDeadOrderAndPaging: ListDead orders by death, pages, filters by Before
// and reports every field.
func testDeadOrderAndPaging(e *env) {
	e.needDeadLetters()
	const topic = "dead.order"
	order := []string{"d3", "d1", "d5", "d2", "d4"}
	cl := e.kill(topic, order...)
	dead := e.listDeadAll(topic, ontimedriver.ListOptions{})
	e.wantIDs("ListDead", deadIDs(dead), order)
	e.wantIDs("ListDead, limit 2", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{Limit: 2})), order)
	e.wantIDs("ListDead, limit 1", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{Limit: 1})), order)
	if len(dead) != len(order) {
		return
	}
	for i, dl := range dead {
		c := cl[dl.ID]
		if dl.Reason != "r-"+dl.ID || dl.Error != "e-"+dl.ID {
			e.t.Errorf("dead %s: Reason %q, Error %q", dl.ID, dl.Reason, dl.Error)
		}
		if !dl.Due.Equal(c.Due) {
			e.t.Errorf("dead %s: Due %s, want %s", dl.ID, ts(dl.Due), ts(c.Due))
		}
		if !e.lacks.NoAttempts && dl.Attempt != 1 {
			e.t.Errorf("dead %s: Attempt %d, want 1", dl.ID, dl.Attempt)
		}
		e.wantPayload("dead "+dl.ID, dl.Payload, []byte("p-"+dl.ID))
		if dl.DiedAt.IsZero() || i > 0 && !dl.DiedAt.After(dead[i-1].DiedAt) {
			e.t.Errorf("dead %s: DiedAt %s, not after the previous death", dl.ID, ts(dl.DiedAt))
		}
	}
	// Before: deaths before an instant between the second and third death.
	if gap := dead[2].DiedAt.Sub(dead[1].DiedAt); gap >= 2*time.Millisecond {
		cut := dead[1].DiedAt.Add(gap / 2)
		e.wantIDs("ListDead Before", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{Before: cut})), order[:2])
		e.wantIDs("ListDead Before, limit 1", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{Before: cut, Limit: 1})), order[:2])
	} else {
		e.t.Errorf("deaths 5 ms apart have DiedAt %s and %s", ts(dead[1].DiedAt), ts(dead[2].DiedAt))
	}
	e.wantCounts(topic, 0, 0, 5)
}

// testDeadReplay: replay by ids and all; replayed timers are scheduled, due at
// once, attempt reset, and claimable.
func testDeadReplay(e *env) {
	e.needDeadLetters()
	const topic = "dead.replay"
	e.kill(topic, "x", "y", "z")
	n, err := e.d.ReplayDead(e.ctx, topic, []string{"x", "ghost"})
	after := e.now()
	if err != nil || n != 1 {
		e.t.Fatalf("ReplayDead(x, ghost) = %d, %v; want 1", n, err)
	}
	ti := e.get(topic, "x")
	e.wantScheduled("Get(x) after replay", ti, time.Time{}, 0, []byte("p-x"))
	if ti.Due.After(after.Add(time.Millisecond)) {
		e.t.Errorf("Get(x) after replay: Due %s, after store now %s; want due at once", ts(ti.Due), ts(after))
	}
	e.wantIDs("ListDead after replaying x", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{})), []string{"y", "z"})
	e.wantCounts(topic, 1, 0, 2)

	// Empty ids never mean "all".
	for _, ids := range [][]string{nil, {}} {
		if n, err := e.d.ReplayDead(e.ctx, topic, ids); err != nil || n != 0 {
			e.t.Fatalf("ReplayDead(%#v) = %d, %v; want 0: empty ids replay nothing", ids, n, err)
		}
	}
	e.wantCounts(topic, 1, 0, 2)
	n, err = e.d.ReplayAllDead(e.ctx, topic)
	if err != nil || n != 2 {
		e.t.Fatalf("ReplayAllDead = %d, %v; want 2", n, err)
	}
	e.wantIDs("ListDead after replaying all", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{})), nil)
	e.wantCounts(topic, 3, 0, 0)
	if n, err := e.d.ReplayAllDead(e.ctx, topic); err != nil || n != 0 {
		e.t.Errorf("ReplayAllDead with no dead letters = %d, %v; want 0", n, err)
	}

	got := e.claim(topic, 10, longLease)
	if len(got.Timers) != 3 {
		e.t.Fatalf("claim after replay: %q, want x, y, z", claimedIDs(got))
	}
	for _, c := range got.Timers {
		e.wantClaimAttempt("claim of replayed "+c.ID, c.Attempt, 1)
		e.wantPayload("claim of replayed "+c.ID, c.Payload, []byte("p-"+c.ID))
	}
}

// testDeadReplaySkipsLive: a dead letter whose id has a live timer is not
// replayed over it and stays dead.
func testDeadReplaySkipsLive(e *env) {
	e.needDeadLetters()
	const topic = "dead.replay-live"
	e.kill(topic, "x", "y")
	res := e.put(topic, dueIn("x", time.Hour, "live"))
	if n, err := e.d.ReplayDead(e.ctx, topic, []string{"x"}); err != nil || n != 0 {
		e.t.Errorf("ReplayDead(x) over a live x = %d, %v; want 0", n, err)
	}
	e.wantScheduled("Get(x)", e.get(topic, "x"), res[0].Due, 0, []byte("live"))
	e.wantIDs("ListDead", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{})), []string{"x", "y"})
	if n, err := e.d.ReplayAllDead(e.ctx, topic); err != nil || n != 1 {
		e.t.Errorf("ReplayAllDead with a live x = %d, %v; want 1 (y)", n, err)
	}
	e.wantScheduled("Get(x)", e.get(topic, "x"), res[0].Due, 0, []byte("live"))
	e.wantScheduled("Get(y)", e.get(topic, "y"), time.Time{}, 0, []byte("p-y"))
	e.wantIDs("ListDead", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{})), []string{"x"})
	e.wantCounts(topic, 2, 0, 1)
}

// testDeadPurge: purge by ids and all, with counts.
func testDeadPurge(e *env) {
	e.needDeadLetters()
	const topic = "dead.purge"
	e.kill(topic, "a", "b", "c", "d")
	if n, err := e.d.PurgeDead(e.ctx, topic, []string{"a", "b", "ghost"}); err != nil || n != 2 {
		e.t.Errorf("PurgeDead(a, b, ghost) = %d, %v; want 2", n, err)
	}
	e.wantIDs("ListDead", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{})), []string{"c", "d"})
	e.wantCounts(topic, 0, 0, 2)
	// Empty ids never mean "all": a filtered list that came out empty
	// deletes nothing.
	for _, ids := range [][]string{nil, {}} {
		if n, err := e.d.PurgeDead(e.ctx, topic, ids); err != nil || n != 0 {
			e.t.Errorf("PurgeDead(%#v) = %d, %v; want 0: empty ids delete nothing", ids, n, err)
		}
	}
	e.wantIDs("ListDead after PurgeDead with empty ids", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{})), []string{"c", "d"})
	if n, err := e.d.PurgeAllDead(e.ctx, topic); err != nil || n != 2 {
		e.t.Errorf("PurgeAllDead = %d, %v; want 2", n, err)
	}
	if n, err := e.d.PurgeAllDead(e.ctx, topic); err != nil || n != 0 {
		e.t.Errorf("PurgeAllDead again = %d, %v; want 0", n, err)
	}
	e.wantIDs("ListDead", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{})), nil)
	e.wantCounts(topic, 0, 0, 0)
	if n, err := e.d.ReplayAllDead(e.ctx, topic); err != nil || n != 0 {
		e.t.Errorf("ReplayAllDead after purge = %d, %v; want 0", n, err)
	}
	e.wantGone(topic, "a")
	e.wantGone(topic, "c")
}

// testGetDead: a DeadLetterGetter reads one dead letter as ListDead lists
// it, and answers ErrNotFound for an unknown id, an unknown topic, a live
// timer's id and a replayed dead letter.
func testGetDead(e *env) {
	e.needDeadLetters()
	g, ok := ontimedriver.As[ontimedriver.DeadLetterGetter](e.d)
	if !ok {
		e.t.Skipf("%T does not implement ontimedriver.DeadLetterGetter", e.d)
	}
	const topic = "dead.get"
	e.kill(topic, "g1", "g2")
	e.put(topic, dueIn("live", time.Hour, "x"))
	for _, dl := range e.listDeadAll(topic, ontimedriver.ListOptions{}) {
		got, err := g.GetDead(e.ctx, topic, dl.ID)
		if err != nil {
			e.t.Errorf("GetDead %s: %v", dl.ID, err)
			continue
		}
		if got.ID != dl.ID || !got.Due.Equal(dl.Due) || !got.DiedAt.Equal(dl.DiedAt) || got.Attempt != dl.Attempt ||
			got.Reason != dl.Reason || got.Error != dl.Error {
			e.t.Errorf("GetDead %s = %+v, ListDead has %+v", dl.ID, *got, dl)
		}
		e.wantPayload("GetDead "+dl.ID, got.Payload, dl.Payload)
	}
	for _, c := range []struct{ topic, id string }{{topic, "nope"}, {"dead.get.never", "g1"}, {topic, "live"}} {
		if _, err := g.GetDead(e.ctx, c.topic, c.id); !errors.Is(err, ontimedriver.ErrNotFound) {
			e.t.Errorf("GetDead %s/%s: %v, want ErrNotFound", c.topic, c.id, err)
		}
	}
	if _, err := e.d.ReplayDead(e.ctx, topic, []string{"g1"}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := g.GetDead(e.ctx, topic, "g1"); !errors.Is(err, ontimedriver.ErrNotFound) {
		e.t.Errorf("GetDead of a replayed dead letter: %v, want ErrNotFound", err)
	}
}
