package drivertest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

func scheduleCases() []testCase {
	return []testCase{
		{"DelayAndAt", testScheduleDelayAndAt},
		{"Upsert", testScheduleUpsert},
		{"IfAbsent", testScheduleIfAbsent},
		{"IfAbsentIgnoresDeadLetters", testScheduleIfAbsentDead},
		{"Batch1000", testScheduleBatch},
		{"Empty", testScheduleEmpty},
		{"OutOfRange", testScheduleOutOfRange},
	}
}

// testScheduleOutOfRange: an absolute due time outside the supported range
// (ontimedriver.MinDue..MaxDue, years 1970 to 9999) fails the whole call
// with ErrInvalid naming the value, and nothing is written; the bounds
// themselves are accepted. The longest delays (time.Duration's limit,
// about 292 years) are stored as due that far ahead, in Schedule and in
// Settle, never wrapped around to the past.
func testScheduleOutOfRange(e *env) {
	const topic = "schedule.range"
	for _, bad := range []time.Time{
		ontimedriver.MinDue.Add(-time.Millisecond),
		time.Date(1734, 1, 1, 0, 0, 0, 0, time.UTC),
		ontimedriver.MaxDue.Add(time.Millisecond),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(300_000_000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		_, err := e.d.Schedule(e.ctx, topic, []ontimedriver.NewTimer{dueNow("ok", "p"), dueAt("bad", bad, "p")}, ontimedriver.Upsert)
		if !errors.Is(err, ontimedriver.ErrInvalid) {
			e.t.Errorf("Schedule At %s: error %v, want ErrInvalid", bad.UTC().Format(time.RFC3339), err)
		} else if want := bad.UTC().Format(time.RFC3339Nano); !strings.Contains(err.Error(), want) {
			e.t.Errorf("Schedule At %s: error %q does not name the value %s", bad.UTC().Format(time.RFC3339), err, want)
		}
	}
	e.wantCounts(topic, 0, 0, 0)

	// The bounds are accepted. (A store that keeps float seconds, as the
	// faststream-compatible layout does, has about 30 µs of precision left
	// in year 9999.)
	res := e.put(topic, dueAt("min", ontimedriver.MinDue, "p"), dueAt("max", ontimedriver.MaxDue, "p"))
	if !res[0].Due.Equal(ontimedriver.MinDue) || !near(res[1].Due, ontimedriver.MaxDue, 100*time.Microsecond) {
		e.t.Errorf("the range's bounds: Due %s and %s, want %s and %s", res[0].Due.UTC(), res[1].Due.UTC(), ontimedriver.MinDue, ontimedriver.MaxDue)
	}
	const longest = time.Duration(math.MaxInt64)
	before := e.now()
	res = e.put(topic, dueIn("longest", longest, "p"))
	if d := res[0].Due; d.Before(before.Add(longest)) || d.After(e.now().Add(longest).Add(time.Second)) {
		e.t.Errorf("Delay MaxInt64: Due %s, want about %s", d.UTC(), before.Add(longest).UTC())
	}
	c := e.claimOne(e.d, topic, "min", longShortLease)
	before = e.now()
	for _, op := range []ontimedriver.Settlement{retryOp(c, longest, "e"), snoozeOp(c, longest)} {
		if op.Kind == ontimedriver.Snooze {
			c = e.claimOne(e.d, topic, "min", longShortLease)
			op.Lease = leaseOf(c)
		}
		if err := e.settle1(topic, op); err != nil {
			e.t.Fatalf("Settle %s with Delay MaxInt64: %v", op.Kind, err)
		}
		ti := e.get(topic, "min")
		if ti.Due.Before(before.Add(longest)) || ti.Due.After(e.now().Add(longest).Add(time.Second)) {
			e.t.Errorf("Settle %s with Delay MaxInt64: Due %s, want about %s", op.Kind, ti.Due.UTC(), before.Add(longest).UTC())
		}
		if op.Kind == ontimedriver.Retry {
			// Due again at once, to be claimed for the snooze.
			e.put(topic, dueAt("min", ontimedriver.MinDue, "p"))
		}
	}
	if r := e.claim(topic, 10, longLease); len(r.Timers) != 0 {
		e.t.Errorf("claimed %d timers due centuries ahead", len(r.Timers))
	}
}

// longShortLease is a lease that outlives a case's settles.
const longShortLease = 10 * time.Second

// testScheduleDelayAndAt: Delay is added to the store's clock, At is kept
// (rounded up, never down), At wins over Delay, results follow the order of
// the timers, and exactly the due timers are claimable.
func testScheduleDelayAndAt(e *env) {
	const topic = "schedule.times"
	before := e.now()
	base := before.Truncate(time.Second).Add(time.Hour)
	subMs := base.Add(123456789 * time.Nanosecond) // .123456789: not a whole µs or ms
	wholeMs := base.Add(500 * time.Millisecond)
	atWins := base.Add(2 * time.Second)
	past := before.Truncate(time.Millisecond).Add(-time.Hour)
	const delay = 250 * time.Millisecond
	timers := []ontimedriver.NewTimer{
		dueIn("delay", delay, "p-delay"),
		dueAt("sub-ms", subMs, "p-sub-ms"),
		dueAt("whole-ms", wholeMs, "p-whole-ms"),
		{ID: "at-wins", At: atWins, Delay: 10 * time.Hour, Payload: []byte("p-at-wins")},
		dueAt("past", past, "p-past"),
		dueNow("now", "p-now"),
	}
	res := e.put(topic, timers...)
	after := e.now()

	if d := res[0].Due; d.Before(before.Add(delay)) || d.After(after.Add(delay+time.Millisecond)) {
		e.t.Errorf("Delay %v: Due %s, want store now + delay, within [%s, %s]", delay, ts(d), ts(before.Add(delay)), ts(after.Add(delay+time.Millisecond)))
	}
	if d := res[1].Due; d.Before(subMs) || !d.Before(subMs.Add(time.Millisecond)) {
		e.t.Errorf("At %s (sub-millisecond): Due %s, want >= At (rounded up) and < At+1ms", ts(subMs), ts(d))
	}
	if d := res[2].Due; !d.Equal(wholeMs) {
		e.t.Errorf("At %s (whole millisecond): Due %s, want it unchanged", ts(wholeMs), ts(d))
	}
	if d := res[3].Due; !d.Equal(atWins) {
		e.t.Errorf("At %s with Delay 10h: Due %s, want At (At wins over Delay)", ts(atWins), ts(d))
	}
	if d := res[4].Due; !d.Equal(past) {
		e.t.Errorf("At %s (in the past): Due %s, want it unchanged", ts(past), ts(d))
	}
	// Due now: the store's clock at its due-time precision (a store that
	// keeps milliseconds rounds it down, so the timer is claimable at once;
	// a claim runs after the publish, so it is never early).
	if d := res[5].Due; d.Before(before.Truncate(time.Millisecond)) || d.After(after.Add(time.Millisecond)) {
		e.t.Errorf("zero At and Delay: Due %s, want store now, within [%s, %s]", ts(d), ts(before.Truncate(time.Millisecond)), ts(after.Add(time.Millisecond)))
	}

	dues := make(map[string]time.Time)
	for i, tm := range timers {
		dues[tm.ID] = res[i].Due
		ti := e.get(topic, tm.ID)
		e.wantScheduled("Get("+tm.ID+")", ti, res[i].Due, 0, tm.Payload)
		if ti.LastError != "" {
			e.t.Errorf("Get(%s): LastError %q on a new timer", tm.ID, ti.LastError)
		}
	}
	got := e.drain(e.d, topic, dues, []string{"past", "now", "delay"}, longLease)
	for _, id := range []string{"past", "now", "delay"} {
		e.wantPayload("claimed "+id, got[id].Payload, []byte("p-"+id))
		e.wantClaimAttempt(id, got[id].Attempt, 1)
	}
}

// testScheduleUpsert: re-scheduling a leased timer replaces payload and due,
// resets the attempt counter and drops the lease (the old token stops
// working).
func testScheduleUpsert(e *env) {
	const topic = "schedule.upsert"
	e.put(topic, dueNow("u", "v1"))
	old := e.claimOne(e.d, topic, "u", longLease)
	e.wantClaimAttempt("first claim", old.Attempt, 1)

	const delay = 300 * time.Millisecond
	res := e.put(topic, dueIn("u", delay, "v2"))
	if !res[0].Due.After(old.Due) {
		e.t.Errorf("upsert with Delay %v: Due %s not after the old due %s", delay, ts(res[0].Due), ts(old.Due))
	}
	ti := e.get(topic, "u")
	e.wantScheduled("Get after upsert", ti, res[0].Due, 0, []byte("v2"))
	e.wantCounts(topic, 1, 0, 0)

	e.wantErr("Settle(ack) with the token from before the upsert", e.settle1(topic, ackOp(old)), ontimedriver.ErrLeaseLost)
	e.wantErr("Extend with the token from before the upsert", e.extend(topic, longLease, leaseOf(old))[0], ontimedriver.ErrLeaseLost)
	e.wantErr("Settle(dead) with the token from before the upsert", e.settle1(topic, deadOp(old, "x", "x")), ontimedriver.ErrLeaseLost)
	e.wantScheduled("Get after the refused settles", e.get(topic, "u"), res[0].Due, 0, []byte("v2"))

	got := e.drain(e.d, topic, map[string]time.Time{"u": res[0].Due}, []string{"u"}, longLease)
	c := got["u"]
	e.wantClaimAttempt("claim after upsert", c.Attempt, 1)
	e.wantPayload("claim after upsert", c.Payload, []byte("v2"))
	if c.Token == old.Token {
		e.t.Errorf("claim after upsert: token %q reused", c.Token)
	}
	e.wantErr("ack with the new token", e.settle1(topic, ackOp(c)), nil)
	e.wantGone(topic, "u")
}

// testScheduleIfAbsent: IfAbsent leaves scheduled and leased timers untouched
// with ErrExists, and writes the new ones of the same batch.
func testScheduleIfAbsent(e *env) {
	const topic = "schedule.ifabsent"
	now := e.now()
	far := now.Truncate(time.Millisecond).Add(time.Hour)
	res := e.put(topic, dueAt("sched", far, "s1"), dueNow("leased", "l1"))
	l := e.claimOne(e.d, topic, "leased", longLease)

	newAt := far.Add(time.Minute)
	batch := []ontimedriver.NewTimer{
		dueAt("new1", newAt, "n1"),
		dueAt("sched", far.Add(time.Hour), "s2"),
		dueNow("leased", "l2"),
		dueIn("new2", time.Hour, "n2"),
	}
	got := e.schedule(topic, ontimedriver.IfAbsent, batch...)
	e.wantErr("IfAbsent new1", got[0].Err, nil)
	e.wantErr("IfAbsent over a scheduled timer", got[1].Err, ontimedriver.ErrExists)
	e.wantErr("IfAbsent over a leased timer", got[2].Err, ontimedriver.ErrExists)
	e.wantErr("IfAbsent new2", got[3].Err, nil)
	if !got[0].Due.Equal(newAt) {
		e.t.Errorf("IfAbsent new1: Due %s, want %s", ts(got[0].Due), ts(newAt))
	}
	if got[3].Due.Before(now.Add(time.Hour)) {
		e.t.Errorf("IfAbsent new2 (Delay 1h): Due %s, before store now + 1h (%s)", ts(got[3].Due), ts(now.Add(time.Hour)))
	}

	e.wantScheduled("Get(sched) after IfAbsent", e.get(topic, "sched"), res[0].Due, 0, []byte("s1"))
	e.wantLeased("Get(leased) after IfAbsent", e.get(topic, "leased"), l, res[1].Due)
	e.wantScheduled("Get(new1)", e.get(topic, "new1"), got[0].Due, 0, []byte("n1"))
	e.wantScheduled("Get(new2)", e.get(topic, "new2"), got[3].Due, 0, []byte("n2"))
	e.wantCounts(topic, 3, 1, 0)

	// The lease was not dropped: its token still acks.
	e.wantErr("ack of the leased timer after IfAbsent", e.settle1(topic, ackOp(l)), nil)
	// Once gone, the id is absent again.
	again := e.schedule(topic, ontimedriver.IfAbsent, dueAt("leased", far, "l3"))
	e.wantErr("IfAbsent after ack", again[0].Err, nil)
	e.wantScheduled("Get(leased) re-created", e.get(topic, "leased"), again[0].Due, 0, []byte("l3"))
}

// testScheduleIfAbsentDead: dead letters do not count as existing for
// IfAbsent.
func testScheduleIfAbsentDead(e *env) {
	e.needDeadLetters()
	const topic = "schedule.ifabsent-dead"
	e.put(topic, dueNow("x", "old"))
	c := e.claimOne(e.d, topic, "x", longLease)
	e.wantErr("dead", e.settle1(topic, deadOp(c, ontimedriver.ReasonRejected, "no")), nil)
	res := e.schedule(topic, ontimedriver.IfAbsent, dueNow("x", "new"))
	e.wantErr("IfAbsent over a dead letter", res[0].Err, nil)
	e.wantScheduled("Get(x)", e.get(topic, "x"), res[0].Due, 0, []byte("new"))
}

// testScheduleBatch: 1000 timers in one call, claimed and acked in one call
// each.
func testScheduleBatch(e *env) {
	const topic = "schedule.batch"
	const n = 1000
	timers := make([]ontimedriver.NewTimer, n)
	for i := range timers {
		id := fmt.Sprintf("b%04d", i)
		timers[i] = dueNow(id, "payload-"+id)
	}
	res := e.put(topic, timers...)
	for i, r := range res {
		if r.Due.IsZero() {
			e.t.Fatalf("result %d: zero Due", i)
		}
	}
	e.wantCounts(topic, n, 0, 0)

	var claimed []ontimedriver.ClaimedTimer
	WaitFor(e.t, waitTimeout, func() bool {
		claimed = append(claimed, e.claim(topic, n, longLease).Timers...)
		return len(claimed) >= n
	}, "1000 timers claimed")
	seen := make(map[string]bool, n)
	for _, c := range claimed {
		if seen[c.ID] {
			e.t.Fatalf("%q claimed twice", c.ID)
		}
		seen[c.ID] = true
		e.wantPayload(c.ID, c.Payload, []byte("payload-"+c.ID))
	}
	if len(seen) != n {
		e.t.Fatalf("claimed %d distinct timers, want %d", len(seen), n)
	}
	if res := e.claim(topic, n, longLease); len(res.Timers) != 0 {
		e.t.Errorf("claim after all were leased: got %d timers", len(res.Timers))
	}
	e.wantCounts(topic, 0, n, 0)

	ops := make([]ontimedriver.Settlement, len(claimed))
	for i, c := range claimed {
		ops[i] = ackOp(c)
	}
	for i, err := range e.settle(topic, ops...) {
		e.wantErr("ack "+claimed[i].ID, err, nil)
	}
	e.wantCounts(topic, 0, 0, 0)
	if res := e.claim(topic, n, longLease); len(res.Timers) != 0 || !res.Next.IsZero() {
		e.t.Errorf("claim after acking all: %d timers, Next %s; want none and zero Next", len(res.Timers), ts(res.Next))
	}
}

// testScheduleEmpty: empty batches are fine and change nothing.
func testScheduleEmpty(e *env) {
	const topic = "schedule.empty"
	for _, mode := range []ontimedriver.ScheduleMode{ontimedriver.Upsert, ontimedriver.IfAbsent} {
		for _, timers := range [][]ontimedriver.NewTimer{nil, {}} {
			res, err := e.d.Schedule(e.ctx, topic, timers, mode)
			if err != nil || len(res) != 0 {
				e.t.Errorf("Schedule(empty, mode %d) = %v, %v; want no results, no error", mode, res, err)
			}
		}
	}
	errs, err := e.d.Settle(e.ctx, topic, nil)
	if err != nil || len(errs) != 0 {
		e.t.Errorf("Settle(nil) = %v, %v; want no results, no error", errs, err)
	}
	errs, err = e.d.Extend(e.ctx, topic, nil, longLease)
	if err != nil || len(errs) != 0 {
		e.t.Errorf("Extend(nil) = %v, %v; want no results, no error", errs, err)
	}
	e.wantCounts(topic, 0, 0, 0)
	if got := e.topics(); len(got) != 0 {
		e.t.Errorf("Topics after empty batches: %q, want none", got)
	}
	if _, err := e.d.Get(e.ctx, topic, "x"); !errors.Is(err, ontimedriver.ErrNotFound) {
		e.t.Errorf("Get on an empty topic: %v, want ErrNotFound", err)
	}
}
