// Package drivertest is the conformance suite every ontime store driver must
// pass: one set of tests, run against each store, that checks the contract
// written in the documentation of package ontimedriver.
//
// A driver package runs it from a test:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, drivertest.Harness{
//			New: func(t testing.TB) ontimedriver.Driver {
//				d := open(t) // a fresh, empty namespace
//				t.Cleanup(func() { d.Close() })
//				return d
//			},
//		})
//	}
//
// Drivers that implement [ontimedriver.TopicIndex] are checked by the
// "TopicIndex" group of Run (skipped, with a message, when TopicIndexed
// reports false); [RunTopicIndex] runs that group alone. Drivers that
// implement [ontimedriver.TopicCounter] are checked by the "TopicCounter"
// group (skipped, with a message, for the others).
//
// [RunLibrary] is the second suite, run with the same [Harness]: it drives
// the store through the public API of package ontime (Client and Workers)
// and checks what users are promised end to end. A driver package runs
// both:
//
//	func TestLibrary(t *testing.T) { drivertest.RunLibrary(t, harness) }
//
// # Time
//
// The suite runs on real stores with real time. It reads the store's clock
// through [ontimedriver.ClaimResult.Now] (a claim on an empty topic), never the
// test process's, so it also holds against a store on another host. It uses
// short leases and delays (a few hundred milliseconds) and polls for
// conditions with [WaitFor] instead of sleeping a fixed time. Bounds that
// guard "never early" are strict; bounds on lateness are generous, so the
// suite stays reliable on a loaded machine.
//
// # Cases
//
// Every case calls t.Parallel and uses its own driver from [Harness.New], so
// a driver's namespace must isolate tests from each other (a fresh key prefix,
// a fresh file). Cases a driver cannot pass by design are declared in
// [Harness.Lacks] and relaxed or skipped, never silently.
package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
)

// Harness tells the suite how to make drivers.
type Harness struct {
	// New returns a fresh driver with an empty namespace (a fresh key prefix
	// or file) for one test. It registers its own cleanup with t.Cleanup.
	New func(t testing.TB) ontimedriver.Driver

	// NewPeer returns a second driver that shares the store and namespace of
	// d, as a second worker process would (for Redis: a second client with
	// the same prefix; for an embedded store: d itself). It registers its own
	// cleanup. Nil means d itself.
	NewPeer func(t testing.TB, d ontimedriver.Driver) ontimedriver.Driver

	// Lacks lists what the driver cannot do by design (for example the
	// faststream-compatible Redis layout). The suite relaxes or skips the
	// checks that need it.
	Lacks Features
}

// Features a driver may lack. The zero value lacks nothing.
type Features struct {
	// NoAttempts: the store keeps no attempt counter; claims report
	// Attempt 1 and Get reports 0.
	NoAttempts bool
	// NoLeasedState: Get, List and Count cannot tell a leased timer from a
	// scheduled one.
	NoLeasedState bool
	// NoOriginalDue: while leased, and on a claim after an expired lease, Due
	// is the instant the timer became claimable (the lease deadline), not the
	// time it was scheduled for.
	NoOriginalDue bool
	// NoDeadLetters: Settle with Dead deletes the timer; there is no
	// dead-letter set.
	NoDeadLetters bool
	// NoLastError: Retry does not keep the error text.
	NoLastError bool
}

// Timing used by the cases. Leases and delays are short so that the suite is
// fast; waits are long so that it is reliable on a loaded machine.
const (
	// shortLease expires within a case.
	shortLease = 250 * time.Millisecond
	// longLease never expires within a case.
	longLease = 30 * time.Second
	// waitTimeout bounds every wait for something that should happen soon:
	// a bound, not a pause (the waits end at the event), long enough for
	// a machine whose cores are busy several times over (3 s was not, at a
	// load average of 15 on 2 cores). A case that shows a wake-up, not a
	// poll, delivered something sets a poll interval well above it.
	waitTimeout = 10 * time.Second
	// pollInterval is the pause between two polls of the store.
	pollInterval = 5 * time.Millisecond
	// clockTopic is claimed (it is always empty) to read the store's clock.
	clockTopic = "drivertest.clock"
)

// WaitFor calls cond every few milliseconds until it returns true. If it has
// not within timeout, WaitFor fails the test with msg. Call it from the test's
// goroutine. (It is the tree's one wait helper, internal/wait, for driver
// authors, who cannot import that.)
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	wait.For(t, timeout, cond, "%s", msg)
}

// testCase is one case of the suite.
type testCase struct {
	name string
	fn   func(e *env)
}

// group is a named set of cases.
type group struct {
	name  string
	cases []testCase
}

// groups lists every case of the suite.
func groups() []group {
	return []group{
		{"Schedule", scheduleCases()},
		{"Claim", claimCases()},
		{"Settle", settleCases()},
		{"Extend", extendCases()},
		{"Cancel", cancelCases()},
		{"Get", getCases()},
		{"List", listCases()},
		{"Count", countCases()},
		{"Topics", topicsCases()},
		{"CountDue", countDueCases()},
		{"FireNow", fireNowCases()},
		{"Dead", deadCases()},
		{"Subscribe", subscribeCases()},
		{"TopicIndex", topicIndexCases()},
		{"TopicCounter", topicCounterCases()},
		{"Recurring", recurringCases()},
		{"Misc", miscCases()},
	}
}

// Run runs the conformance suite against the drivers h makes. Each case is a
// parallel subtest with its own driver.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("drivertest: Harness.New is nil")
	}
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.fn(newEnv(t, h))
				})
			}
		})
	}
}

// env is what a case works with: its test, its driver and helpers that fail
// the test on an unexpected error.
type env struct {
	t     *testing.T
	ctx   context.Context
	h     Harness
	lacks Features
	d     ontimedriver.Driver
	peerD ontimedriver.Driver
}

func newEnv(t *testing.T, h Harness) *env {
	d := h.New(t)
	if d == nil {
		t.Fatal("drivertest: Harness.New returned nil")
	}
	return &env{t: t, ctx: t.Context(), h: h, lacks: h.Lacks, d: d}
}

// peer returns the second driver on the same namespace, made on first use.
func (e *env) peer() ontimedriver.Driver {
	e.t.Helper()
	if e.peerD == nil {
		if e.h.NewPeer == nil {
			e.peerD = e.d
		} else {
			e.peerD = e.h.NewPeer(e.t, e.d)
			if e.peerD == nil {
				e.t.Fatal("drivertest: Harness.NewPeer returned nil")
			}
		}
	}
	return e.peerD
}

// ---- timers and settlements ----

// dueNow is a timer due at once.
func dueNow(id, payload string) ontimedriver.NewTimer {
	return ontimedriver.NewTimer{ID: id, Payload: []byte(payload)}
}

// dueAt is a timer due at an instant.
func dueAt(id string, at time.Time, payload string) ontimedriver.NewTimer {
	return ontimedriver.NewTimer{ID: id, At: at, Payload: []byte(payload)}
}

// dueIn is a timer due after a delay on the store's clock.
func dueIn(id string, d time.Duration, payload string) ontimedriver.NewTimer {
	return ontimedriver.NewTimer{ID: id, Delay: d, Payload: []byte(payload)}
}

func leaseOf(c ontimedriver.ClaimedTimer) ontimedriver.Lease {
	return ontimedriver.Lease{ID: c.ID, Token: c.Token}
}

func ackOp(c ontimedriver.ClaimedTimer) ontimedriver.Settlement {
	return ontimedriver.Settlement{Lease: leaseOf(c), Kind: ontimedriver.Ack}
}

func retryOp(c ontimedriver.ClaimedTimer, d time.Duration, errText string) ontimedriver.Settlement {
	return ontimedriver.Settlement{Lease: leaseOf(c), Kind: ontimedriver.Retry, Delay: d, Error: errText}
}

func snoozeOp(c ontimedriver.ClaimedTimer, d time.Duration) ontimedriver.Settlement {
	return ontimedriver.Settlement{Lease: leaseOf(c), Kind: ontimedriver.Snooze, Delay: d}
}

func deadOp(c ontimedriver.ClaimedTimer, reason, errText string) ontimedriver.Settlement {
	return ontimedriver.Settlement{Lease: leaseOf(c), Kind: ontimedriver.Dead, Reason: reason, Error: errText}
}

// withToken returns op with another token.
func withToken(op ontimedriver.Settlement, token string) ontimedriver.Settlement {
	op.Token = token
	return op
}

// ---- checks ----

// ts formats an instant for failure messages.
func ts(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return t.UTC().Format("15:04:05.000000")
}

// near reports whether a and b are at most tol apart.
func near(a, b time.Time, tol time.Duration) bool {
	d := a.Sub(b)
	return d <= tol && d >= -tol
}

// wantErr checks that got is want (nil, or a match by errors.Is).
func (e *env) wantErr(what string, got, want error) bool {
	e.t.Helper()
	if want == nil {
		if got != nil {
			e.t.Errorf("%s: unexpected error %v", what, got)
			return false
		}
		return true
	}
	if !errors.Is(got, want) {
		e.t.Errorf("%s: error %v, want %v", what, got, want)
		return false
	}
	return true
}

// wantPayload checks payload bytes (nil and empty are the same).
func (e *env) wantPayload(what string, got, want []byte) {
	e.t.Helper()
	if !bytes.Equal(got, want) {
		e.t.Errorf("%s: payload %s, want %s", what, short(got), short(want))
	}
}

// short quotes a payload, cut if it is long.
func short(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("%q...(%d bytes)", b[:40], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// wantAttempt checks an attempt count reported by Get (stored attempts).
func (e *env) wantStoredAttempt(what string, got, want int) {
	e.t.Helper()
	if e.lacks.NoAttempts {
		want = 0
	}
	if got != want {
		e.t.Errorf("%s: Attempt %d, want %d", what, got, want)
	}
}

// wantClaimAttempt checks an attempt count reported by Claim.
func (e *env) wantClaimAttempt(what string, got, want int) {
	e.t.Helper()
	if e.lacks.NoAttempts {
		want = 1
	}
	if got != want {
		e.t.Errorf("%s: claimed with Attempt %d, want %d", what, got, want)
	}
}

// wantScheduled checks a timer that is not leased.
func (e *env) wantScheduled(what string, ti *ontimedriver.TimerInfo, due time.Time, attempt int, payload []byte) {
	e.t.Helper()
	if ti.State != ontimedriver.StateScheduled {
		e.t.Errorf("%s: State %q, want %q", what, ti.State, ontimedriver.StateScheduled)
	}
	if !ti.LeaseUntil.IsZero() {
		e.t.Errorf("%s: LeaseUntil %s on a scheduled timer, want zero", what, ts(ti.LeaseUntil))
	}
	if !due.IsZero() && !ti.Due.Equal(due) {
		e.t.Errorf("%s: Due %s, want %s as stored", what, ts(ti.Due), ts(due))
	}
	e.wantStoredAttempt(what, ti.Attempt, attempt)
	if payload != nil {
		e.wantPayload(what, ti.Payload, payload)
	}
}

// wantLeased checks a timer held by claim c; due is when it was scheduled for.
func (e *env) wantLeased(what string, ti *ontimedriver.TimerInfo, c ontimedriver.ClaimedTimer, due time.Time) {
	e.t.Helper()
	if ti.ID != c.ID {
		e.t.Errorf("%s: ID %q, want %q", what, ti.ID, c.ID)
	}
	if !e.lacks.NoLeasedState {
		if ti.State != ontimedriver.StateLeased {
			e.t.Errorf("%s: State %q, want %q", what, ti.State, ontimedriver.StateLeased)
		}
		if !near(ti.LeaseUntil, c.LeaseUntil, time.Millisecond) {
			e.t.Errorf("%s: LeaseUntil %s, want the claim's %s", what, ts(ti.LeaseUntil), ts(c.LeaseUntil))
		}
	}
	if e.lacks.NoOriginalDue {
		if !near(ti.Due, c.LeaseUntil, time.Millisecond) {
			e.t.Errorf("%s: Due %s, want the lease deadline %s", what, ts(ti.Due), ts(c.LeaseUntil))
		}
	} else if !ti.Due.Equal(due) {
		e.t.Errorf("%s: Due %s while leased, want the scheduled due %s", what, ts(ti.Due), ts(due))
	}
	if e.lacks.NoAttempts {
		if ti.Attempt != 0 {
			e.t.Errorf("%s: Attempt %d, want 0 (driver lacks attempts)", what, ti.Attempt)
		}
	} else if ti.Attempt != c.Attempt {
		e.t.Errorf("%s: Attempt %d, want the claim's %d", what, ti.Attempt, c.Attempt)
	}
	e.wantPayload(what, ti.Payload, c.Payload)
}

// wantLeasedWhileLive gets a timer held by claim c with a short lease and
// checks it with wantLeased, unless the lease ran out before Get answered (a
// slow machine), when the state may be scheduled again.
func (e *env) wantLeasedWhileLive(what, topic string, c ontimedriver.ClaimedTimer, due time.Time) {
	e.t.Helper()
	ti := e.get(topic, c.ID)
	if now := e.now(); !now.Before(c.LeaseUntil) {
		e.t.Logf("%s: not checked, the lease (until %s) expired before Get answered (store now %s)", what, ts(c.LeaseUntil), ts(now))
		return
	}
	e.wantLeased(what, ti, c, due)
}

// ---- driver calls that fail the test on a call error ----

// schedule calls Schedule and checks the shape of the result.
func (e *env) schedule(topic string, mode ontimedriver.ScheduleMode, timers ...ontimedriver.NewTimer) []ontimedriver.ScheduleResult {
	e.t.Helper()
	return e.scheduleWith(e.d, topic, mode, timers...)
}

func (e *env) scheduleWith(d ontimedriver.Driver, topic string, mode ontimedriver.ScheduleMode, timers ...ontimedriver.NewTimer) []ontimedriver.ScheduleResult {
	e.t.Helper()
	res, err := d.Schedule(e.ctx, topic, timers, mode)
	if err != nil {
		e.t.Fatalf("Schedule(%q, %d timers): %v", topic, len(timers), err)
	}
	if len(res) != len(timers) {
		e.t.Fatalf("Schedule(%q): %d results for %d timers", topic, len(res), len(timers))
	}
	return res
}

// put upserts timers and requires every one to be written.
func (e *env) put(topic string, timers ...ontimedriver.NewTimer) []ontimedriver.ScheduleResult {
	e.t.Helper()
	res := e.schedule(topic, ontimedriver.Upsert, timers...)
	for i, r := range res {
		if r.Err != nil {
			e.t.Fatalf("Schedule(%q) upsert of %q: %v", topic, timers[i].ID, r.Err)
		}
		if r.Due.IsZero() {
			e.t.Fatalf("Schedule(%q) upsert of %q: zero Due in the result", topic, timers[i].ID)
		}
	}
	return res
}

// claim claims with e.d.
func (e *env) claim(topic string, max int, lease time.Duration) *ontimedriver.ClaimResult {
	e.t.Helper()
	return e.claimWith(e.d, topic, max, lease)
}

// claimWith claims and checks what must hold for every claim.
func (e *env) claimWith(d ontimedriver.Driver, topic string, max int, lease time.Duration) *ontimedriver.ClaimResult {
	e.t.Helper()
	res, err := d.Claim(e.ctx, topic, max, lease)
	if err != nil {
		e.t.Fatalf("Claim(%q, %d, %v): %v", topic, max, lease, err)
	}
	if res == nil {
		e.t.Fatalf("Claim(%q): nil result", topic)
	}
	e.checkClaim(topic, res, max, lease)
	return res
}

// checkClaim checks the invariants of one claim result.
func (e *env) checkClaim(topic string, res *ontimedriver.ClaimResult, max int, lease time.Duration) {
	e.t.Helper()
	if res.Now.IsZero() {
		e.t.Errorf("Claim(%q): zero Now", topic)
	}
	if len(res.Timers) > max {
		e.t.Errorf("Claim(%q, max %d): %d timers", topic, max, len(res.Timers))
	}
	seen := make(map[string]bool, len(res.Timers))
	var minLease time.Time
	for _, c := range res.Timers {
		if seen[c.ID] {
			e.t.Errorf("Claim(%q): id %q twice in one result", topic, c.ID)
		}
		seen[c.ID] = true
		if c.Token == "" {
			e.t.Errorf("Claim(%q): empty token for %q", topic, c.ID)
		}
		if c.Due.IsZero() || c.Due.After(res.Now) {
			e.t.Errorf("Claim(%q): %q claimed early: Due %s after store Now %s", topic, c.ID, ts(c.Due), ts(res.Now))
		}
		if c.Attempt < 1 || (e.lacks.NoAttempts && c.Attempt != 1) {
			e.t.Errorf("Claim(%q): %q has Attempt %d", topic, c.ID, c.Attempt)
		}
		if want := res.Now.Add(lease); !near(c.LeaseUntil, want, time.Millisecond) {
			e.t.Errorf("Claim(%q): %q LeaseUntil %s, want Now+lease = %s", topic, c.ID, ts(c.LeaseUntil), ts(want))
		}
		if minLease.IsZero() || c.LeaseUntil.Before(minLease) {
			minLease = c.LeaseUntil
		}
	}
	if len(res.Timers) > 0 {
		// The timers just leased are the topic's, so Next is at the latest
		// their lease deadline.
		if res.Next.IsZero() {
			e.t.Errorf("Claim(%q): zero Next after claiming %d timers (they are leased, the topic is not empty)", topic, len(res.Timers))
		} else if res.Next.After(minLease.Add(time.Millisecond)) {
			e.t.Errorf("Claim(%q): Next %s after the earliest lease deadline %s", topic, ts(res.Next), ts(minLease))
		}
	}
}

// claimWait claims from topic until it gets at least one timer.
func (e *env) claimWait(d ontimedriver.Driver, topic string, max int, lease time.Duration) *ontimedriver.ClaimResult {
	e.t.Helper()
	var res *ontimedriver.ClaimResult
	WaitFor(e.t, waitTimeout, func() bool {
		res = e.claimWith(d, topic, max, lease)
		return len(res.Timers) > 0
	}, fmt.Sprintf("a claimable timer in %q", topic))
	return res
}

// claimOne claims from topic until it gets exactly the timer id.
func (e *env) claimOne(d ontimedriver.Driver, topic, id string, lease time.Duration) ontimedriver.ClaimedTimer {
	e.t.Helper()
	res := e.claimWait(d, topic, 10, lease)
	if len(res.Timers) != 1 || res.Timers[0].ID != id {
		e.t.Fatalf("Claim(%q): got %v, want just %q", topic, claimedIDs(res), id)
	}
	return res.Timers[0]
}

// claimedIDs lists the ids of a claim result in order.
func claimedIDs(res *ontimedriver.ClaimResult) []string {
	ids := make([]string, len(res.Timers))
	for i, c := range res.Timers {
		ids[i] = c.ID
	}
	return ids
}

// drain claims from topic (with max above its size, so every due timer comes
// back) until every id in want has been claimed. dues holds every timer of the
// topic and its scheduled due. On every round it checks that exactly the due
// timers come back and that Next is the earliest remaining instant.
func (e *env) drain(d ontimedriver.Driver, topic string, dues map[string]time.Time, want []string, lease time.Duration) map[string]ontimedriver.ClaimedTimer {
	e.t.Helper()
	got := make(map[string]ontimedriver.ClaimedTimer)
	deadline := time.Now().Add(waitTimeout)
	for {
		res := e.claimWith(d, topic, len(dues)+1, lease)
		for _, c := range res.Timers {
			due, ok := dues[c.ID]
			if !ok {
				e.t.Fatalf("Claim(%q): unknown id %q", topic, c.ID)
			}
			if _, dup := got[c.ID]; dup {
				e.t.Fatalf("Claim(%q): %q claimed again while its lease is live", topic, c.ID)
			}
			if !c.Due.Equal(due) {
				e.t.Errorf("Claim(%q): %q Due %s, want the stored due %s", topic, c.ID, ts(c.Due), ts(due))
			}
			got[c.ID] = c
		}
		var next time.Time
		for id, due := range dues {
			c, claimed := got[id]
			if claimed {
				due = c.LeaseUntil
			} else if !due.After(res.Now.Add(-time.Millisecond)) {
				e.t.Fatalf("Claim(%q): %q due %s not claimed at store Now %s", topic, id, ts(due), ts(res.Now))
			}
			if next.IsZero() || due.Before(next) {
				next = due
			}
		}
		if !near(res.Next, next, time.Millisecond) {
			e.t.Errorf("Claim(%q): Next %s, want the earliest claimable instant %s", topic, ts(res.Next), ts(next))
		}
		done := true
		for _, id := range want {
			if _, ok := got[id]; !ok {
				done = false
			}
		}
		if done {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("Claim(%q): timers %v not claimed after %v", topic, want, waitTimeout)
		}
		time.Sleep(pollInterval)
	}
}

// now reads the store's clock.
func (e *env) now() time.Time {
	e.t.Helper()
	return e.claimWith(e.d, clockTopic, 1, time.Second).Now
}

// waitStorePast waits until the store's clock is after t.
func (e *env) waitStorePast(t time.Time) {
	e.t.Helper()
	WaitFor(e.t, waitTimeout, func() bool { return e.now().After(t) }, "the store clock to pass "+ts(t))
}

// settle calls Settle with e.d.
func (e *env) settle(topic string, ops ...ontimedriver.Settlement) []error {
	e.t.Helper()
	return e.settleWith(e.d, topic, ops...)
}

func (e *env) settleWith(d ontimedriver.Driver, topic string, ops ...ontimedriver.Settlement) []error {
	e.t.Helper()
	errs, err := d.Settle(e.ctx, topic, ops)
	if err != nil {
		e.t.Fatalf("Settle(%q, %d ops): %v", topic, len(ops), err)
	}
	if len(errs) != len(ops) {
		e.t.Fatalf("Settle(%q): %d results for %d ops", topic, len(errs), len(ops))
	}
	return errs
}

// settle1 settles one timer and returns its slot's error.
func (e *env) settle1(topic string, op ontimedriver.Settlement) error {
	e.t.Helper()
	return e.settleWith(e.d, topic, op)[0]
}

// extend calls Extend with e.d.
func (e *env) extend(topic string, lease time.Duration, leases ...ontimedriver.Lease) []error {
	e.t.Helper()
	errs, err := e.d.Extend(e.ctx, topic, leases, lease)
	if err != nil {
		e.t.Fatalf("Extend(%q, %d leases): %v", topic, len(leases), err)
	}
	if len(errs) != len(leases) {
		e.t.Fatalf("Extend(%q): %d results for %d leases", topic, len(errs), len(leases))
	}
	return errs
}

// get returns a timer that must exist.
func (e *env) get(topic, id string) *ontimedriver.TimerInfo {
	e.t.Helper()
	ti, err := e.d.Get(e.ctx, topic, id)
	if err != nil {
		e.t.Fatalf("Get(%q, %q): %v", topic, id, err)
	}
	if ti == nil {
		e.t.Fatalf("Get(%q, %q): nil timer and no error", topic, id)
	}
	if ti.ID != id {
		e.t.Errorf("Get(%q, %q): ID %q", topic, id, ti.ID)
	}
	return ti
}

// wantGone checks that Get reports ErrNotFound.
func (e *env) wantGone(topic, id string) {
	e.t.Helper()
	ti, err := e.d.Get(e.ctx, topic, id)
	if !errors.Is(err, ontimedriver.ErrNotFound) {
		e.t.Errorf("Get(%q, %q) = %+v, %v; want ErrNotFound", topic, id, ti, err)
	}
}

// count returns a topic's counts.
func (e *env) count(topic string) ontimedriver.Counts {
	e.t.Helper()
	c, err := e.d.Count(e.ctx, topic)
	if err != nil {
		e.t.Fatalf("Count(%q): %v", topic, err)
	}
	return c
}

// wantCounts checks a topic's counts, relaxed by what the driver lacks.
func (e *env) wantCounts(topic string, scheduled, leased, dead int64) {
	e.t.Helper()
	e.checkCounts(topic, e.count(topic), scheduled, leased, dead)
}

// checkCounts checks counts of a topic, relaxed by what the driver lacks.
func (e *env) checkCounts(topic string, got ontimedriver.Counts, scheduled, leased, dead int64) {
	e.t.Helper()
	want := ontimedriver.Counts{Scheduled: scheduled, Leased: leased, Dead: dead}
	if e.lacks.NoDeadLetters {
		want.Dead = 0
	}
	if e.lacks.NoLeasedState {
		if got.Scheduled+got.Leased != scheduled+leased || got.Dead != want.Dead {
			e.t.Errorf("Count(%q) = %+v, want %d live (scheduled+leased) and %d dead", topic, got, scheduled+leased, want.Dead)
		}
		return
	}
	if got != want {
		e.t.Errorf("Count(%q) = %+v, want %+v", topic, got, want)
	}
}

// list returns every timer of a topic through paging.
func (e *env) listAll(topic string, opts ontimedriver.ListOptions) []ontimedriver.TimerInfo {
	e.t.Helper()
	var all []ontimedriver.TimerInfo
	limit := opts.Limit
	if limit == 0 {
		limit = 100
	}
	for page := 0; ; page++ {
		if page > 10000 {
			e.t.Fatalf("List(%q): more than 10000 pages", topic)
		}
		p, err := e.d.List(e.ctx, topic, opts)
		if err != nil {
			e.t.Fatalf("List(%q, %+v): %v", topic, opts, err)
		}
		if len(p.Timers) > limit {
			e.t.Fatalf("List(%q, limit %d): page of %d", topic, limit, len(p.Timers))
		}
		all = append(all, p.Timers...)
		if p.NextCursor == "" {
			return all
		}
		if len(p.Timers) != limit {
			e.t.Errorf("List(%q, limit %d): page %d has %d timers and a NextCursor; only the last page may be short", topic, limit, page, len(p.Timers))
		}
		if p.NextCursor == opts.Cursor {
			e.t.Fatalf("List(%q): NextCursor %q repeats the cursor", topic, p.NextCursor)
		}
		opts.Cursor = p.NextCursor
	}
}

// listDeadAll returns every dead letter of a topic through paging.
func (e *env) listDeadAll(topic string, opts ontimedriver.ListOptions) []ontimedriver.DeadLetter {
	e.t.Helper()
	var all []ontimedriver.DeadLetter
	limit := opts.Limit
	if limit == 0 {
		limit = 100
	}
	for page := 0; ; page++ {
		if page > 10000 {
			e.t.Fatalf("ListDead(%q): more than 10000 pages", topic)
		}
		p, err := e.d.ListDead(e.ctx, topic, opts)
		if err != nil {
			e.t.Fatalf("ListDead(%q, %+v): %v", topic, opts, err)
		}
		if len(p.Dead) > limit {
			e.t.Fatalf("ListDead(%q, limit %d): page of %d", topic, limit, len(p.Dead))
		}
		all = append(all, p.Dead...)
		if p.NextCursor == "" {
			return all
		}
		if len(p.Dead) != limit {
			e.t.Errorf("ListDead(%q, limit %d): page %d has %d dead letters and a NextCursor; only the last page may be short", topic, limit, page, len(p.Dead))
		}
		if p.NextCursor == opts.Cursor {
			e.t.Fatalf("ListDead(%q): NextCursor %q repeats the cursor", topic, p.NextCursor)
		}
		opts.Cursor = p.NextCursor
	}
}

// timerIDs lists the ids of timers in order.
func timerIDs(ts []ontimedriver.TimerInfo) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// deadIDs lists the ids of dead letters in order.
func deadIDs(ds []ontimedriver.DeadLetter) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}

// topics returns the driver's topics.
func (e *env) topics() []string {
	e.t.Helper()
	got, err := e.d.Topics(e.ctx)
	if err != nil {
		e.t.Fatalf("Topics: %v", err)
	}
	return got
}

// wantIDs compares id lists.
func (e *env) wantIDs(what string, got, want []string) {
	e.t.Helper()
	if !slices.Equal(got, want) {
		e.t.Errorf("%s: ids %q, want %q", what, got, want)
	}
}

// needDeadLetters skips a case about dead letters when the driver has none.
func (e *env) needDeadLetters() {
	e.t.Helper()
	if e.lacks.NoDeadLetters {
		e.t.Skip("the driver lacks dead letters (Features.NoDeadLetters)")
	}
}
