package drivertest

import (
	"bytes"
	"errors"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// recurringCases check ontimedriver.Recurring: a recurring timer's tick is
// claimed like a timer, and its settlement arms the next tick in the same
// fenced step. A driver whose RecurringSupported reports false must refuse
// every call with ErrUnsupported (each case checks that instead).
func recurringCases() []testCase {
	return []testCase{
		{"ClaimReportsTick", testRecurringClaimReportsTick},
		{"AckArmsNextTick", testRecurringAckArmsNext},
		{"DeadTickCopied", testRecurringDeadTickCopied},
		{"RetryKeepsTick", testRecurringRetryKeepsTick},
		{"EndWithoutNext", testRecurringEndWithoutNext},
		{"UpsertFencesRunningTick", testRecurringUpsertFences},
		{"CancelFencesRunningTick", testRecurringCancelFences},
		{"IfAbsent", testRecurringIfAbsent},
		{"PauseResume", testRecurringPauseResume},
		{"PauseWhileLeased", testRecurringPauseWhileLeased},
		{"PlainOverRecurring", testRecurringPlainOver},
		{"ListShowsSchedule", testRecurringList},
		{"NextOnPlainTimerIsAck", testRecurringNextOnPlain},
		{"TickInstantBeforeDue", testRecurringTickInstant},
		{"ListRecurring", testRecurringLister},
	}
}

const specA, specB = "every 1h", "every 2h"

// recurring returns the driver's Recurring, or nil after checking that a
// driver that does not keep recurring timers refuses them clearly.
func (e *env) recurring() ontimedriver.Recurring {
	e.t.Helper()
	r, ok := ontimedriver.As[ontimedriver.Recurring](e.d)
	if !ok {
		e.t.Fatalf("%T does not implement ontimedriver.Recurring", e.d)
	}
	if r.RecurringSupported() {
		return r
	}
	_, err := r.ScheduleRecurring(e.ctx, "rec.unsupported", ontimedriver.NewRecurring{ID: "x", Spec: specA, At: time.Now(), Tick: 1, Payload: []byte("p")}, ontimedriver.Upsert)
	if !errors.Is(err, ontimedriver.ErrUnsupported) {
		e.t.Errorf("ScheduleRecurring on a driver without recurring timers: %v, want ErrUnsupported", err)
	}
	if err := r.PauseRecurring(e.ctx, "rec.unsupported", "x"); !errors.Is(err, ontimedriver.ErrUnsupported) {
		e.t.Errorf("PauseRecurring on a driver without recurring timers: %v, want ErrUnsupported", err)
	}
	return nil
}

// putRecurring schedules a recurring timer and checks its result.
func (e *env) putRecurring(r ontimedriver.Recurring, topic, id, spec string, at time.Time, tick int64, payload string) time.Time {
	e.t.Helper()
	res, err := r.ScheduleRecurring(e.ctx, topic, ontimedriver.NewRecurring{ID: id, Spec: spec, At: at, Tick: tick, Payload: []byte(payload)}, ontimedriver.Upsert)
	if err != nil || res.Err != nil {
		e.t.Fatalf("ScheduleRecurring(%q, %q): %v, %v", topic, id, err, res.Err)
	}
	if res.Due.Before(at) || res.Due.After(at.Add(time.Millisecond)) {
		e.t.Errorf("ScheduleRecurring(%q, %q): Due %s, want %s rounded up", topic, id, ts(res.Due), ts(at))
	}
	return res.Due
}

func ackNext(c ontimedriver.ClaimedTimer, due time.Time, n int64) ontimedriver.Settlement {
	op := ackOp(c)
	op.Next = &ontimedriver.Tick{Due: due, N: n}
	return op
}

// wantRecurring checks a timer's schedule entry.
func (e *env) wantRecurring(what string, ti *ontimedriver.TimerInfo, want ontimedriver.RecurringInfo) {
	e.t.Helper()
	if ti.Recurring == nil {
		e.t.Errorf("%s: no schedule entry, want %+v", what, want)
		return
	}
	got := *ti.Recurring
	// TickAt is checked when want has one: stored rounded up to the
	// store's precision
	if !want.TickAt.IsZero() {
		if got.TickAt.Before(want.TickAt) || got.TickAt.After(want.TickAt.Add(time.Millisecond)) {
			e.t.Errorf("%s: TickAt %s, want %s rounded up", what, ts(got.TickAt), ts(want.TickAt))
		}
	}
	if got.TickAt.IsZero() {
		e.t.Errorf("%s: zero TickAt", what)
	}
	got.TickAt, want.TickAt = time.Time{}, time.Time{}
	if got != want {
		e.t.Errorf("%s: schedule entry %+v, want %+v", what, got, want)
	}
}

// testRecurringClaimReportsTick: a claim of a recurring timer reports its
// spec and tick number; Get shows the entry.
func testRecurringClaimReportsTick(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	now := e.now()
	e.putRecurring(r, "rec.claim", "r", specA, now, 7, "body")
	e.wantRecurring("Get before the claim", e.get("rec.claim", "r"), ontimedriver.RecurringInfo{Spec: specA, Tick: 7})
	c := e.claimOne(e.d, "rec.claim", "r", longLease)
	if c.Schedule != specA || c.Tick != 7 {
		e.t.Errorf("claimed tick: Schedule %q Tick %d, want %q 7", c.Schedule, c.Tick, specA)
	}
	e.wantPayload("claimed tick", c.Payload, []byte("body"))
	e.put("rec.claim", dueNow("plain", "x"))
	p := e.claimOne(e.d, "rec.claim", "plain", longLease)
	if p.Schedule != "" || p.Tick != 0 {
		e.t.Errorf("claimed plain timer: Schedule %q Tick %d, want none", p.Schedule, p.Tick)
	}
}

// testRecurringAckArmsNext: an ack with Next arms the next tick (never
// claimable before its due time) with the same payload and attempt 0,
// and records the outcome.
func testRecurringAckArmsNext(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	e.putRecurring(r, "rec.ack", "r", specA, e.now(), 1, "body")
	c := e.claimOne(e.d, "rec.ack", "r", longLease)
	next := e.now().Add(300 * time.Millisecond)
	e.wantErr("ack with next", e.settle1("rec.ack", ackNext(c, next, 2)), nil)
	ti := e.get("rec.ack", "r")
	e.wantRecurring("Get after the ack", ti, ontimedriver.RecurringInfo{Spec: specA, Tick: 2, TickAt: next, LastTick: 1, LastOutcome: "ack"})
	if ti.State != ontimedriver.StateScheduled || ti.Due.Before(next) || ti.Due.After(next.Add(time.Millisecond)) {
		e.t.Errorf("Get after the ack: state %s due %s, want scheduled at %s", ti.State, ts(ti.Due), ts(next))
	}
	e.wantStoredAttempt("next tick", ti.Attempt, 0)
	// a second settlement with the spent token is refused: the tick is
	// settled once
	e.wantErr("second ack of the tick", e.settle1("rec.ack", ackNext(c, next, 2)), ontimedriver.ErrLeaseLost)
	c2 := e.claimOne(e.d, "rec.ack", "r", longLease)
	if c2.Tick != 2 || c2.Due.Before(next) || c2.TickAt.Before(next) || c2.TickAt.After(next.Add(time.Millisecond)) {
		e.t.Errorf("second tick: Tick %d Due %s TickAt %s, want 2 at or after %s", c2.Tick, ts(c2.Due), ts(c2.TickAt), ts(next))
	}
	e.wantClaimAttempt("second tick", c2.Attempt, 1)
	e.wantPayload("second tick", c2.Payload, []byte("body"))
	e.wantCounts("rec.ack", 0, 1, 0)
}

// testRecurringDeadTickCopied: a dead tick is copied to the dead letters
// as <id>#<tick> and the schedule keeps running.
func testRecurringDeadTickCopied(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	e.putRecurring(r, "rec.dead", "r", specA, e.now(), 3, "body")
	c := e.claimOne(e.d, "rec.dead", "r", longLease)
	op := deadOp(c, ontimedriver.ReasonRejected, "boom")
	next := e.now().Add(time.Hour)
	op.Next = &ontimedriver.Tick{Due: next, N: 4}
	e.wantErr("dead with next", e.settle1("rec.dead", op), nil)
	e.wantRecurring("Get after the dead tick", e.get("rec.dead", "r"), ontimedriver.RecurringInfo{Spec: specA, Tick: 4, LastTick: 3, LastOutcome: "dead"})
	dead := e.listDeadAll("rec.dead", ontimedriver.ListOptions{})
	e.wantIDs("dead letters", deadIDs(dead), []string{ontimedriver.DeadTickID("r", 3)})
	if len(dead) == 1 {
		e.wantPayload("dead tick", dead[0].Payload, []byte("body"))
		if dead[0].Reason != ontimedriver.ReasonRejected || dead[0].Error != "boom" {
			e.t.Errorf("dead tick: reason %q error %q", dead[0].Reason, dead[0].Error)
		}
	}
	e.wantCounts("rec.dead", 1, 0, 1)
}

// testRecurringRetryKeepsTick: a retried tick comes back as the same tick
// with its attempt counted.
func testRecurringRetryKeepsTick(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	at := e.putRecurring(r, "rec.retry", "r", specA, e.now(), 5, "body")
	c := e.claimOne(e.d, "rec.retry", "r", longLease)
	if !c.TickAt.Equal(at) {
		e.t.Errorf("claimed tick: TickAt %s, want %s", ts(c.TickAt), ts(at))
	}
	e.wantErr("retry", e.settle1("rec.retry", retryOp(c, 50*time.Millisecond, "again")), nil)
	c2 := e.claimOne(e.d, "rec.retry", "r", longLease)
	if c2.Tick != 5 || c2.Schedule != specA || !c2.TickAt.Equal(at) {
		e.t.Errorf("retried tick: Tick %d Schedule %q TickAt %s, want 5 %q %s", c2.Tick, c2.Schedule, ts(c2.TickAt), specA, ts(at))
	}
	e.wantClaimAttempt("retried tick", c2.Attempt, 2)
}

// testRecurringEndWithoutNext: an ack without Next ends the schedule; a
// dead tick without Next is still stored as <id>#<tick>.
func testRecurringEndWithoutNext(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	e.putRecurring(r, "rec.end", "a", specA, e.now(), 1, "x")
	e.wantErr("ack", e.settle1("rec.end", ackOp(e.claimOne(e.d, "rec.end", "a", longLease))), nil)
	e.wantGone("rec.end", "a")
	e.putRecurring(r, "rec.end", "d", specA, e.now(), 2, "x")
	e.wantErr("dead", e.settle1("rec.end", deadOp(e.claimOne(e.d, "rec.end", "d", longLease), "r", "e")), nil)
	e.wantGone("rec.end", "d")
	e.wantIDs("dead letters", deadIDs(e.listDeadAll("rec.end", ontimedriver.ListOptions{})), []string{ontimedriver.DeadTickID("d", 2)})
	// the entry went with the timer: a plain timer with the id is plain
	e.put("rec.end", dueIn("a", time.Hour, "x"))
	if ti := e.get("rec.end", "a"); ti.Recurring != nil {
		e.t.Errorf("plain timer after the schedule ended: entry %+v", *ti.Recurring)
	}
}

// testRecurringUpsertFences: replacing a schedule while its tick runs
// drops the lease: the running tick cannot arm the old schedule's next
// tick.
func testRecurringUpsertFences(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	e.putRecurring(r, "rec.upsert", "r", specA, e.now(), 1, "old")
	c := e.claimOne(e.d, "rec.upsert", "r", longLease)
	later := e.now().Add(time.Hour)
	e.putRecurring(r, "rec.upsert", "r", specB, later, 1, "new")
	e.wantErr("ack of the replaced tick", e.settle1("rec.upsert", ackNext(c, e.now(), 2)), ontimedriver.ErrLeaseLost)
	ti := e.get("rec.upsert", "r")
	e.wantRecurring("Get after the upsert", ti, ontimedriver.RecurringInfo{Spec: specB, Tick: 1})
	e.wantPayload("Get after the upsert", ti.Payload, []byte("new"))
	if ti.State != ontimedriver.StateScheduled || ti.Due.Before(later) {
		e.t.Errorf("Get after the upsert: %s at %s, want scheduled at %s", ti.State, ts(ti.Due), ts(later))
	}
	if res := e.claim("rec.upsert", 10, longLease); len(res.Timers) != 0 {
		e.t.Errorf("claim after the upsert: %v, want nothing (due in an hour)", claimedIDs(res))
	}
}

// testRecurringCancelFences: cancelling a schedule while its tick runs
// ends it: the running tick's settlement is refused and arms nothing.
func testRecurringCancelFences(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	e.putRecurring(r, "rec.cancel", "r", specA, e.now(), 1, "x")
	c := e.claimOne(e.d, "rec.cancel", "r", longLease)
	e.wantErr("cancel", e.d.Cancel(e.ctx, "rec.cancel", "r"), nil)
	e.wantErr("ack after the cancel", e.settle1("rec.cancel", ackNext(c, e.now(), 2)), ontimedriver.ErrLeaseLost)
	e.wantGone("rec.cancel", "r")
	e.wantErr("pause after the cancel", r.PauseRecurring(e.ctx, "rec.cancel", "r"), ontimedriver.ErrNotFound)
	e.wantCounts("rec.cancel", 0, 0, 0)
	// CancelBatch too
	e.putRecurring(r, "rec.cancel", "b", specA, e.now().Add(time.Hour), 1, "x")
	errs, err := e.d.CancelBatch(e.ctx, "rec.cancel", []string{"b"})
	if err != nil || len(errs) != 1 || errs[0] != nil {
		e.t.Fatalf("CancelBatch: %v %v", errs, err)
	}
	e.put("rec.cancel", dueIn("b", time.Hour, "x"))
	if ti := e.get("rec.cancel", "b"); ti.Recurring != nil {
		e.t.Errorf("plain timer after CancelBatch of a schedule: entry %+v", *ti.Recurring)
	}
}

// testRecurringIfAbsent: IfAbsent refuses an id that exists (plain or
// recurring) and writes nothing.
func testRecurringIfAbsent(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	later := e.now().Add(time.Hour)
	e.putRecurring(r, "rec.ifabsent", "r", specA, later, 1, "x")
	res, err := r.ScheduleRecurring(e.ctx, "rec.ifabsent", ontimedriver.NewRecurring{ID: "r", Spec: specB, At: e.now(), Tick: 9, Payload: []byte("y")}, ontimedriver.IfAbsent)
	if err != nil || !errors.Is(res.Err, ontimedriver.ErrExists) {
		e.t.Errorf("IfAbsent over a schedule: %v, %v; want ErrExists", err, res.Err)
	}
	e.wantRecurring("Get after IfAbsent", e.get("rec.ifabsent", "r"), ontimedriver.RecurringInfo{Spec: specA, Tick: 1})
	e.put("rec.ifabsent", dueIn("p", time.Hour, "x"))
	res, err = r.ScheduleRecurring(e.ctx, "rec.ifabsent", ontimedriver.NewRecurring{ID: "p", Spec: specB, At: e.now(), Tick: 1, Payload: []byte("y")}, ontimedriver.IfAbsent)
	if err != nil || !errors.Is(res.Err, ontimedriver.ErrExists) {
		e.t.Errorf("IfAbsent over a plain timer: %v, %v; want ErrExists", err, res.Err)
	}
	if ti := e.get("rec.ifabsent", "p"); ti.Recurring != nil {
		e.t.Errorf("plain timer after a refused IfAbsent: entry %+v", *ti.Recurring)
	}
	// invalid input is refused
	if _, err := r.ScheduleRecurring(e.ctx, "rec.ifabsent", ontimedriver.NewRecurring{ID: "z", Spec: "", At: e.now(), Tick: 1}, ontimedriver.Upsert); !errors.Is(err, ontimedriver.ErrInvalid) {
		e.t.Errorf("empty spec: %v, want ErrInvalid", err)
	}
	if _, err := r.ScheduleRecurring(e.ctx, "rec.ifabsent", ontimedriver.NewRecurring{ID: "z", Spec: specA, At: e.now(), Tick: 0}, ontimedriver.Upsert); !errors.Is(err, ontimedriver.ErrInvalid) {
		e.t.Errorf("tick 0: %v, want ErrInvalid", err)
	}
}

// testRecurringPauseResume: a paused schedule's tick is not claimable;
// Resume arms the tick it is given.
func testRecurringPauseResume(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	e.putRecurring(r, "rec.pause", "r", specA, e.now(), 1, "x")
	e.wantErr("pause", r.PauseRecurring(e.ctx, "rec.pause", "r"), nil)
	e.wantErr("pause again", r.PauseRecurring(e.ctx, "rec.pause", "r"), nil)
	if res := e.claim("rec.pause", 10, longLease); len(res.Timers) != 0 {
		e.t.Errorf("claim of a paused schedule: %v, want nothing", claimedIDs(res))
	}
	ti := e.get("rec.pause", "r")
	e.wantRecurring("Get while paused", ti, ontimedriver.RecurringInfo{Spec: specA, Tick: 1, Paused: true})
	e.wantCounts("rec.pause", 1, 0, 0)
	next := e.now().Add(200 * time.Millisecond)
	e.wantErr("resume", r.ResumeRecurring(e.ctx, "rec.pause", "r", ontimedriver.Tick{Due: next, N: 6}), nil)
	e.wantRecurring("Get after resume", e.get("rec.pause", "r"), ontimedriver.RecurringInfo{Spec: specA, Tick: 6})
	c := e.claimOne(e.d, "rec.pause", "r", longLease)
	if c.Tick != 6 || c.Due.Before(next) {
		e.t.Errorf("tick after resume: Tick %d Due %s, want 6 at or after %s", c.Tick, ts(c.Due), ts(next))
	}
	// resuming a running schedule changes nothing
	e.wantErr("resume a running schedule", r.ResumeRecurring(e.ctx, "rec.pause", "r", ontimedriver.Tick{Due: e.now(), N: 99}), nil)
	e.wantErr("ack", e.settle1("rec.pause", ackNext(c, e.now().Add(time.Hour), 7)), nil)
	e.wantRecurring("Get after the ack", e.get("rec.pause", "r"), ontimedriver.RecurringInfo{Spec: specA, Tick: 7, LastTick: 6, LastOutcome: "ack"})
	e.wantErr("pause of an absent id", r.PauseRecurring(e.ctx, "rec.pause", "nope"), ontimedriver.ErrNotFound)
	e.wantErr("resume of an absent id", r.ResumeRecurring(e.ctx, "rec.pause", "nope", ontimedriver.Tick{Due: e.now(), N: 1}), ontimedriver.ErrNotFound)
	e.put("rec.pause", dueIn("plain", time.Hour, "x"))
	e.wantErr("pause of a plain timer", r.PauseRecurring(e.ctx, "rec.pause", "plain"), ontimedriver.ErrNotFound)
}

// testRecurringPauseWhileLeased: a tick running when its schedule is
// paused finishes; the tick it arms is held until Resume.
func testRecurringPauseWhileLeased(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	e.putRecurring(r, "rec.pausel", "r", specA, e.now(), 1, "x")
	c := e.claimOne(e.d, "rec.pausel", "r", longLease)
	e.wantErr("pause", r.PauseRecurring(e.ctx, "rec.pausel", "r"), nil)
	e.wantErr("ack of the running tick", e.settle1("rec.pausel", ackNext(c, e.now(), 2)), nil)
	if res := e.claim("rec.pausel", 10, longLease); len(res.Timers) != 0 {
		e.t.Errorf("claim after the paused schedule's tick settled: %v, want nothing", claimedIDs(res))
	}
	e.wantRecurring("Get while paused", e.get("rec.pausel", "r"), ontimedriver.RecurringInfo{Spec: specA, Tick: 2, Paused: true, LastTick: 1, LastOutcome: "ack"})
	e.wantErr("resume", r.ResumeRecurring(e.ctx, "rec.pausel", "r", ontimedriver.Tick{Due: e.now(), N: 3}), nil)
	if c := e.claimOne(e.d, "rec.pausel", "r", longLease); c.Tick != 3 {
		e.t.Errorf("tick after resume: %d, want 3", c.Tick)
	}
}

// testRecurringPlainOver: a plain Schedule over a recurring id makes it a
// plain timer.
func testRecurringPlainOver(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	e.putRecurring(r, "rec.plain", "r", specA, e.now().Add(time.Hour), 1, "x")
	e.put("rec.plain", dueNow("r", "y"))
	ti := e.get("rec.plain", "r")
	if ti.Recurring != nil {
		e.t.Errorf("Get after a plain schedule over a recurring id: entry %+v", *ti.Recurring)
	}
	c := e.claimOne(e.d, "rec.plain", "r", longLease)
	if c.Schedule != "" {
		e.t.Errorf("claimed: Schedule %q, want none", c.Schedule)
	}
	e.wantErr("ack with next of a plain timer", e.settle1("rec.plain", ackNext(c, e.now(), 2)), nil)
	e.wantGone("rec.plain", "r")
}

// testRecurringList: List shows the schedule entries.
func testRecurringList(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	now := e.now()
	e.putRecurring(r, "rec.list", "a", specA, now.Add(time.Hour), 4, "x")
	e.put("rec.list", dueAt("b", now.Add(2*time.Hour), "x"))
	all := e.listAll("rec.list", ontimedriver.ListOptions{})
	e.wantIDs("List", timerIDs(all), []string{"a", "b"})
	if len(all) == 2 {
		e.wantRecurring("List a", &all[0], ontimedriver.RecurringInfo{Spec: specA, Tick: 4})
		if all[1].Recurring != nil {
			e.t.Errorf("List b: entry %+v, want none", *all[1].Recurring)
		}
	}
}

// testRecurringNextOnPlain: Next on a plain timer's ack or dead is
// ignored.
func testRecurringNextOnPlain(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	e.put("rec.np", dueNow("p", "x"))
	op := deadOp(e.claimOne(e.d, "rec.np", "p", longLease), "r", "e")
	op.Next = &ontimedriver.Tick{Due: e.now(), N: 2}
	e.wantErr("dead with next of a plain timer", e.settle1("rec.np", op), nil)
	e.wantGone("rec.np", "p")
	e.wantIDs("dead letters", deadIDs(e.listDeadAll("rec.np", ontimedriver.ListOptions{})), []string{"p"})
}

// testRecurringTickInstant: a tick due after its scheduled instant
// (jitter) keeps the instant apart from its due time, through publish,
// settle and resume.
func testRecurringTickInstant(e *env) {
	r := e.recurring()
	if r == nil {
		return
	}
	now := e.now()
	at := now.Add(-time.Second)
	res, err := r.ScheduleRecurring(e.ctx, "rec.at", ontimedriver.NewRecurring{ID: "r", Spec: specA, At: now, TickAt: at, Tick: 1, Payload: []byte("x")}, ontimedriver.Upsert)
	if err != nil || res.Err != nil {
		e.t.Fatalf("ScheduleRecurring: %v %v", err, res.Err)
	}
	c := e.claimOne(e.d, "rec.at", "r", longLease)
	if c.TickAt.Before(at) || c.TickAt.After(at.Add(time.Millisecond)) || c.Due.Before(now) {
		e.t.Errorf("claimed: TickAt %s Due %s, want %s and %s", ts(c.TickAt), ts(c.Due), ts(at), ts(now))
	}
	inst, due := now.Add(time.Hour), now.Add(time.Hour+time.Minute)
	op := ackOp(c)
	op.Next = &ontimedriver.Tick{Due: due, N: 2, At: inst}
	e.wantErr("ack", e.settle1("rec.at", op), nil)
	ti := e.get("rec.at", "r")
	e.wantRecurring("Get", ti, ontimedriver.RecurringInfo{Spec: specA, Tick: 2, TickAt: inst, LastTick: 1, LastOutcome: "ack"})
	if ti.Due.Before(due) || ti.Due.After(due.Add(time.Millisecond)) {
		e.t.Errorf("Get: Due %s, want %s", ts(ti.Due), ts(due))
	}
	e.wantErr("pause", r.PauseRecurring(e.ctx, "rec.at", "r"), nil)
	inst2 := now.Add(2 * time.Hour)
	e.wantErr("resume", r.ResumeRecurring(e.ctx, "rec.at", "r", ontimedriver.Tick{Due: inst2.Add(time.Minute), N: 3, At: inst2}), nil)
	e.wantRecurring("Get after resume", e.get("rec.at", "r"), ontimedriver.RecurringInfo{Spec: specA, Tick: 3, TickAt: inst2, LastTick: 1, LastOutcome: "ack"})
}

// testRecurringLister checks ontimedriver.RecurringLister: a topic's
// recurring timers by id, paged with a cursor, each as Get shows it (a
// paused one paused), without the plain timers, the other topics'
// schedules, or a cancelled or ended schedule.
func testRecurringLister(e *env) {
	l, ok := ontimedriver.As[ontimedriver.RecurringLister](e.d)
	if !ok {
		e.t.Skipf("%T does not implement ontimedriver.RecurringLister", e.d)
	}
	r := e.recurring()
	if r == nil {
		if _, err := l.ListRecurring(e.ctx, "rec.lister", "", 0); !errors.Is(err, ontimedriver.ErrUnsupported) {
			e.t.Errorf("ListRecurring on a driver without recurring timers: %v, want ErrUnsupported", err)
		}
		return
	}
	const topic = "rec.lister"
	listAll := func(limit int) (ids []string, pages int, all []ontimedriver.TimerInfo) {
		e.t.Helper()
		cursor := ""
		for {
			p, err := l.ListRecurring(e.ctx, topic, cursor, limit)
			if err != nil {
				e.t.Fatalf("ListRecurring(%q, %q, %d): %v", topic, cursor, limit, err)
			}
			pages++
			if len(p.Timers) > limit {
				e.t.Errorf("ListRecurring(limit %d): a page of %d", limit, len(p.Timers))
			}
			all = append(all, p.Timers...)
			if p.NextCursor == "" {
				return timerIDs(all), pages, all
			}
			if pages > 100 {
				e.t.Fatalf("ListRecurring: no last page after 100 pages (%v)", timerIDs(all))
			}
			cursor = p.NextCursor
		}
	}
	if ids, pages, _ := listAll(10); len(ids) != 0 || pages != 1 {
		e.t.Errorf("ListRecurring of an empty topic: %v in %d pages, want none in 1", ids, pages)
	}
	now := e.now()
	// plain timers due before every tick, with ids among theirs
	e.put(topic, dueAt("a0", now.Add(time.Minute), "x"), dueAt("c0", now.Add(time.Minute), "x"), dueAt("z", now.Add(time.Minute), "x"))
	for i, id := range []string{"e", "c", "a", "d", "b", "bb"} {
		e.putRecurring(r, topic, id, specA, now.Add(time.Duration(10-i)*time.Hour), int64(i+1), "p-"+id)
	}
	e.putRecurring(r, "rec.lister.other", "aa", specB, now.Add(time.Hour), 1, "x")
	e.wantErr("pause c", r.PauseRecurring(e.ctx, topic, "c"), nil)
	e.wantErr("cancel e", e.d.Cancel(e.ctx, topic, "e"), nil)
	// bb ends: a plain upsert over it makes it a plain timer
	e.put(topic, dueAt("bb", now.Add(time.Hour), "x"))

	want := []string{"a", "b", "c", "d"}
	for _, limit := range []int{1, 2, 3, 4, 100} {
		ids, pages, all := listAll(limit)
		e.wantIDs("ListRecurring by id", ids, want)
		if wantPages := (len(want) + limit - 1) / limit; pages < wantPages || pages > wantPages+1 {
			e.t.Errorf("ListRecurring(limit %d): %d pages, want %d (or one more, empty)", limit, pages, wantPages)
		}
		if limit != 2 {
			continue
		}
		for i := range all {
			got := &all[i]
			g := e.get(topic, got.ID)
			if !got.Due.Equal(g.Due) || got.State != g.State || got.Attempt != g.Attempt || !bytes.Equal(got.Payload, g.Payload) {
				e.t.Errorf("ListRecurring %q: %s %s attempt %d payload %q; Get says %s %s attempt %d payload %q",
					got.ID, ts(got.Due), got.State, got.Attempt, got.Payload, ts(g.Due), g.State, g.Attempt, g.Payload)
			}
			if g.Recurring != nil {
				e.wantRecurring("ListRecurring "+got.ID, got, *g.Recurring)
			}
		}
		if len(all) == len(want) && (all[2].Recurring == nil || !all[2].Recurring.Paused) {
			e.t.Errorf("ListRecurring: the paused schedule c is not shown paused: %+v", all[2].Recurring)
		}
	}
	// the last page: a cursor after the last id
	p, err := l.ListRecurring(e.ctx, topic, "", 4)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(p.Timers) == 4 && p.NextCursor != "" {
		if q, err := l.ListRecurring(e.ctx, topic, p.NextCursor, 4); err != nil || len(q.Timers) != 0 || q.NextCursor != "" {
			e.t.Errorf("ListRecurring after the last id: %v, %v; want an empty last page", q, err)
		}
	}
	if _, err := l.ListRecurring(e.ctx, topic, "not a cursor!", 10); !errors.Is(err, ontimedriver.ErrInvalid) {
		e.t.Errorf("ListRecurring with a bad cursor: %v, want ErrInvalid", err)
	}
	// ended by its last tick: gone
	e.putRecurring(r, topic, "end", specA, now, 1, "x")
	c := e.claimOne(e.d, topic, "end", longLease)
	e.wantErr("ack without next", e.settle1(topic, ackOp(c)), nil)
	if ids, _, _ := listAll(100); len(ids) != len(want) {
		e.t.Errorf("ListRecurring after a schedule ended: %v, want %v", ids, want)
	}
}
