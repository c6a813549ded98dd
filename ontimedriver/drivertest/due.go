package drivertest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

func countDueCases() []testCase {
	return []testCase{
		{"Buckets", testCountDueBuckets},
		{"Rounding", testCountDueRounding},
		{"Invalid", testCountDueInvalid},
	}
}

func fireNowCases() []testCase {
	return []testCase{
		{"Future", testFireNowFuture},
		{"KeepsAttempts", testFireNowKeepsAttempts},
		{"AlreadyDue", testFireNowAlreadyDue},
		{"Leased", testFireNowLeased},
		{"Missing", testFireNowMissing},
		{"Wakes", testFireNowWakes},
	}
}

// countDue calls CountDue and checks the shape of its result.
func (e *env) countDue(topic string, bounds ...time.Time) []int64 {
	e.t.Helper()
	got, err := e.d.CountDue(e.ctx, topic, bounds)
	if err != nil {
		e.t.Fatalf("CountDue(%q, %d bounds): %v", topic, len(bounds), err)
	}
	if len(got) != len(bounds)+1 {
		e.t.Fatalf("CountDue(%q, %d bounds): %d counts, want %d", topic, len(bounds), len(got), len(bounds)+1)
	}
	return got
}

// testCountDueBounds: CountDue puts each timer in exactly one count, by the
// instant it becomes claimable (a leased timer by its lease deadline); a
// timer due exactly at a bound is counted from that bound on; dead letters
// are not counted; an empty or unknown topic counts zeros.
func testCountDueBuckets(e *env) {
	const topic = "countdue.buckets"
	base := e.now().Truncate(time.Second).Add(time.Hour)
	bounds := []time.Time{base, base.Add(time.Minute), base.Add(2 * time.Minute)}
	if got := e.countDue(topic, bounds...); !slices.Equal(got, []int64{0, 0, 0, 0}) {
		e.t.Errorf("CountDue of an empty topic: %v, want zeros", got)
	}
	e.put(topic, dueNow("leased", "x"), dueNow("dead", "x"))
	got := e.claim(topic, 10, longLease)
	if len(got.Timers) != 2 {
		e.t.Fatalf("claim: %q, want leased and dead", claimedIDs(got))
	}
	for _, c := range got.Timers {
		if c.ID == "dead" {
			e.wantErr("dead", e.settle1(topic, deadOp(c, ontimedriver.ReasonRejected, "x")), nil)
		}
	}
	e.put(topic,
		dueAt("before", base.Add(-30*time.Minute), "x"),
		dueAt("at-b0", base, "x"),
		dueAt("in-1", base.Add(time.Minute-time.Millisecond), "x"),
		dueAt("at-b1", base.Add(time.Minute), "x"),
		dueAt("at-b2", base.Add(2*time.Minute), "x"),
		dueAt("far", base.Add(10*time.Hour), "x"),
		dueNow("overdue", "x"),
	)
	want := []int64{3, 2, 1, 2} // before, leased, overdue | at-b0, in-1 | at-b1 | at-b2, far
	if got := e.countDue(topic, bounds...); !slices.Equal(got, want) {
		e.t.Errorf("CountDue: %v, want %v", got, want)
	}
	c := e.count(topic)
	if got := e.countDue(topic, base); got[0]+got[1] != c.Scheduled+c.Leased {
		e.t.Errorf("CountDue with one bound: %v, adds up to %d; Count has %d scheduled and %d leased", got, got[0]+got[1], c.Scheduled, c.Leased)
	}
	// The most bounds a call takes, 6 s apart from 45 minutes before base:
	// every timer but the far one is counted below the last bound.
	many := make([]time.Time, ontimedriver.MaxDueBounds)
	for i := range many {
		many[i] = base.Add(-45*time.Minute + time.Duration(i)*6*time.Second)
	}
	counts := e.countDue(topic, many...)
	var sum int64
	for _, n := range counts[:len(counts)-1] {
		sum += n
	}
	if last := counts[len(counts)-1]; sum != 7 || last != 1 {
		e.t.Errorf("CountDue with %d bounds: %d below the last bound and %d after, want 7 and 1", len(many), sum, last)
	}
	if got := e.countDue("countdue.nothing", bounds...); !slices.Equal(got, []int64{0, 0, 0, 0}) {
		e.t.Errorf("CountDue of an unknown topic: %v, want zeros", got)
	}
}

// testCountDueRounding: a bound between two of the store's instants counts
// like the next one (bounds round up, as due times do).
func testCountDueRounding(e *env) {
	const topic = "countdue.rounding"
	base := e.now().Truncate(time.Second).Add(time.Hour)
	e.put(topic, dueAt("a", base, "x"), dueAt("b", base.Add(time.Millisecond), "x"))
	for _, tc := range []struct {
		bound time.Time
		want  []int64
	}{
		{base, []int64{0, 2}},
		{base.Add(time.Nanosecond), []int64{1, 1}},
		{base.Add(time.Millisecond), []int64{1, 1}},
		{base.Add(time.Millisecond + time.Nanosecond), []int64{2, 0}},
	} {
		if got := e.countDue(topic, tc.bound); !slices.Equal(got, tc.want) {
			e.t.Errorf("CountDue(base+%v): %v, want %v", tc.bound.Sub(base), got, tc.want)
		}
	}
}

// testCountDueInvalid: no bounds, too many, or bounds out of order are
// refused with ErrInvalid.
func testCountDueInvalid(e *env) {
	const topic = "countdue.invalid"
	now := e.now()
	tooMany := make([]time.Time, ontimedriver.MaxDueBounds+1)
	for i := range tooMany {
		tooMany[i] = now.Add(time.Duration(i) * time.Second)
	}
	for name, bounds := range map[string][]time.Time{
		"none":     nil,
		"too many": tooMany,
		"equal":    {now, now},
		"backward": {now, now.Add(-time.Second)},
		"too late": {ontimedriver.MaxDue.Add(time.Hour)},
	} {
		if _, err := e.d.CountDue(e.ctx, topic, bounds); !errors.Is(err, ontimedriver.ErrInvalid) {
			e.t.Errorf("CountDue with bounds %s: error %v, want ErrInvalid", name, err)
		}
	}
}

// fireNow calls FireNow and fails the test on an error.
func (e *env) fireNow(topic, id string) time.Time {
	e.t.Helper()
	due, err := e.d.FireNow(e.ctx, topic, id)
	if err != nil {
		e.t.Fatalf("FireNow(%q, %q): %v", topic, id, err)
	}
	return due
}

// testFireNowFuture: FireNow makes a future timer due at the store's now,
// with its payload; Get shows the new due time and the next claim takes it.
func testFireNowFuture(e *env) {
	const topic = "firenow.future"
	e.put(topic, dueIn("f", time.Hour, "payload"), dueIn("other", time.Hour, "x"))
	before := e.now()
	due := e.fireNow(topic, "f")
	after := e.now()
	if due.Before(before.Add(-time.Millisecond)) || due.After(after.Add(time.Millisecond)) {
		e.t.Errorf("FireNow: due %s, want the store's now (between %s and %s)", ts(due), ts(before), ts(after))
	}
	e.wantScheduled("Get after FireNow", e.get(topic, "f"), due, 0, []byte("payload"))
	e.waitStorePast(due)
	got := e.claim(topic, 10, longLease)
	if ids := claimedIDs(got); !slices.Equal(ids, []string{"f"}) {
		e.t.Fatalf("claim after FireNow: %q, want [f]", ids)
	}
	e.wantPayload("claimed", got.Timers[0].Payload, []byte("payload"))
	if !e.lacks.NoOriginalDue && !got.Timers[0].Due.Equal(due) {
		e.t.Errorf("claimed with Due %s, want FireNow's %s", ts(got.Timers[0].Due), ts(due))
	}
}

// testFireNowKeepsAttempts: a timer waiting to be retried keeps its attempt
// count and last error when fired now.
func testFireNowKeepsAttempts(e *env) {
	const topic = "firenow.attempts"
	e.put(topic, dueNow("r", "x"))
	c := e.claimOne(e.d, topic, "r", longLease)
	e.wantErr("retry", e.settle1(topic, retryOp(c, time.Hour, "boom")), nil)
	due := e.fireNow(topic, "r")
	ti := e.get(topic, "r")
	e.wantScheduled("Get after FireNow", ti, due, 1, []byte("x"))
	if !e.lacks.NoLastError && ti.LastError != "boom" {
		e.t.Errorf("LastError after FireNow: %q, want %q", ti.LastError, "boom")
	}
	e.waitStorePast(due)
	c2 := e.claimOne(e.d, topic, "r", longLease)
	e.wantClaimAttempt("claim after FireNow", c2.Attempt, 2)
}

// testFireNowAlreadyDue: a timer already due keeps its due time (and so
// its place before timers that became due later).
func testFireNowAlreadyDue(e *env) {
	const topic = "firenow.due"
	now := e.now().Truncate(time.Millisecond)
	res := e.put(topic, dueAt("old", now.Add(-time.Minute), "x"), dueAt("newer", now.Add(-time.Second), "x"))
	if due := e.fireNow(topic, "old"); !due.Equal(res[0].Due) {
		e.t.Errorf("FireNow of a due timer: due %s, want it unchanged %s", ts(due), ts(res[0].Due))
	}
	e.wantIDs("List", timerIDs(e.listAll(topic, ontimedriver.ListOptions{})), []string{"old", "newer"})
}

// testFireNowLeased: a timer under a live lease is not touched (ErrLeased),
// unless the store cannot tell it is leased; after the lease expired it is
// due already.
func testFireNowLeased(e *env) {
	const topic = "firenow.leased"
	e.put(topic, dueNow("l", "x"))
	c := e.claimOne(e.d, topic, "l", longLease)
	_, err := e.d.FireNow(e.ctx, topic, "l")
	if e.lacks.NoLeasedState {
		e.wantErr("FireNow of a leased timer (the store cannot tell)", err, nil)
		return
	}
	e.wantErr("FireNow of a leased timer", err, ontimedriver.ErrLeased)
	e.wantLeased("Get after FireNow", e.get(topic, "l"), c, c.Due)
	e.wantErr("ack", e.settle1(topic, ackOp(c)), nil)

	e.put(topic, dueNow("s", "x"))
	s := e.claimOne(e.d, topic, "s", shortLease)
	e.waitStorePast(s.LeaseUntil)
	if _, err := e.d.FireNow(e.ctx, topic, "s"); err != nil {
		e.t.Errorf("FireNow after the lease expired: %v", err)
	}
}

// testFireNowMissing: FireNow of an unknown id, topic or a dead letter is
// ErrNotFound.
func testFireNowMissing(e *env) {
	const topic = "firenow.missing"
	_, err := e.d.FireNow(e.ctx, "firenow.nothing", "x")
	e.wantErr("FireNow on an unknown topic", err, ontimedriver.ErrNotFound)
	e.put(topic, dueNow("d", "x"), dueIn("keep", time.Hour, "x"))
	_, err = e.d.FireNow(e.ctx, topic, "nope")
	e.wantErr("FireNow of an unknown id", err, ontimedriver.ErrNotFound)
	c := e.claimOne(e.d, topic, "d", longLease)
	e.wantErr("dead", e.settle1(topic, deadOp(c, ontimedriver.ReasonRejected, "x")), nil)
	_, err = e.d.FireNow(e.ctx, topic, "d")
	e.wantErr("FireNow of a dead letter", err, ontimedriver.ErrNotFound)
}

// testFireNowWakes: a fired timer that becomes the head of its topic wakes
// a subscriber.
func testFireNowWakes(e *env) {
	const topic = "firenow.wakes"
	res := e.put(topic, dueIn("a", time.Hour, "x"), dueIn("b", 2*time.Hour, "x"))
	ch, _ := e.subscribe(e.peer(), topic)
	due := e.fireNow(topic, "b")
	e.waitNote(ch, due, []time.Time{res[0].Due, res[1].Due}, fmt.Sprintf("FireNow(%q)", "b"))
}
