package drivertest

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/schedule"
)

// Recurring timers through the library (ontime.Client.PublishRecurring):
// one delivery per tick across workers, never early, upsert and cancel
// while a tick runs, pause and resume, and the missed-ticks policies after
// every worker was gone for 2 s. A driver that keeps no recurring timers
// must refuse them with ErrUnsupported (each case checks that instead).

// recurringOK reports whether the driver keeps recurring timers; when it
// does not, it checks that PublishRecurring refuses them clearly.
func (l *lib) recurringOK(c *ontime.Client) bool {
	l.t.Helper()
	if _, ok := ontimedriver.RecurringOf(l.d); ok {
		return true
	}
	_, err := c.PublishRecurring(l.ctx, "rec.unsupported", "r", schedule.Every(time.Second), "x")
	if !errors.Is(err, ontime.ErrUnsupported) {
		l.t.Errorf("PublishRecurring on a store without recurring timers: %v, want ErrUnsupported", err)
	}
	return false
}

// publishRecurring publishes a recurring timer and fails the test on an
// error.
func (l *lib) publishRecurring(c *ontime.Client, topic, id string, s schedule.Schedule, body any, opts ...ontime.PublishOption) time.Time {
	l.t.Helper()
	first, err := c.PublishRecurring(l.ctx, topic, id, s, body, opts...)
	if err != nil {
		l.t.Fatalf("PublishRecurring(%q, %q, %s): %v", topic, id, s, err)
	}
	return first
}

// checkTicks checks ticks of one schedule as delivered: never early (the
// store's clock in the handler at or after the tick's instant), no tick
// number or instant twice, numbers 1, 2, 3, ... in the order of their
// instants. It returns the deliveries sorted by tick number.
func checkTicks[T any](l *lib, what string, got []seen[T]) []seen[T] {
	l.t.Helper()
	s := slices.Clone(got)
	slices.SortFunc(s, func(a, b seen[T]) int { return int(a.Msg.Tick.N - b.Msg.Tick.N) })
	for i, d := range s {
		tk := d.Msg.Tick
		if tk.N == 0 || tk.At.IsZero() {
			l.t.Errorf("%s: delivery %d has no tick: %+v", what, i, tk)
			continue
		}
		if d.StoreNow.Before(tk.At) {
			l.t.Errorf("%s: tick %d fired early: store clock %s before its instant %s", what, tk.N, ts(d.StoreNow), ts(tk.At))
		}
		if d.Msg.Due.Before(tk.At) {
			l.t.Errorf("%s: tick %d due %s before its instant %s", what, tk.N, ts(d.Msg.Due), ts(tk.At))
		}
		if i > 0 {
			prev := s[i-1].Msg.Tick
			if prev.N == tk.N {
				l.t.Errorf("%s: tick %d delivered twice (at %s and %s)", what, tk.N, ts(prev.At), ts(tk.At))
			} else if !tk.At.After(prev.At) {
				l.t.Errorf("%s: tick %d at %s not after tick %d at %s", what, tk.N, ts(tk.At), prev.N, ts(prev.At))
			}
		}
	}
	return s
}

// libRecurringThreeWorkers: three workers (three clients, each its own
// driver where the harness makes peers) on one schedule every 200 ms for
// 10 s: every tick instant from the first to the last delivered exactly
// once (FireEach with a large bound: a tick made late by a busy machine
// still fires), never early.
func libRecurringThreeWorkers(l *lib) {
	c := l.client(nil)
	if !l.recurringOK(c) {
		return
	}
	const (
		interval = 200 * time.Millisecond
		run      = 10 * time.Second
	)
	col := collect[string](l, nil)
	clients := []*ontime.Client{c}
	for range 2 {
		d := l.d
		if l.h.NewPeer != nil {
			d = l.h.NewPeer(l.t, l.d)
		}
		clients = append(clients, l.clientOn(d, nil))
	}
	for _, wc := range clients {
		l.start(wc, nil, func(w *ontime.Worker) error {
			return ontime.Handle(w, "rec3", col.handle, nil)
		})
	}
	start := l.publishRecurring(c, "rec3", "every200", schedule.Every(interval), "tick", ontime.OnMissed(ontime.FireEach(1000)))
	end := start.Add(run)
	WaitFor(l.t, run+30*time.Second, func() bool {
		for _, s := range col.all() {
			if !s.Msg.Tick.At.Before(end) {
				return true
			}
		}
		return false
	}, "a tick 10 s after the first")
	if err := c.Cancel(l.ctx, "rec3", "every200"); err != nil {
		l.t.Fatalf("Cancel: %v", err)
	}
	got := checkTicks(l, "three workers", col.all())
	if len(got) == 0 {
		return
	}
	if !got[0].Msg.Tick.At.Equal(start) || got[0].Msg.Tick.N != 1 {
		l.t.Errorf("first tick %d at %s, want 1 at %s (the first instant PublishRecurring reported)", got[0].Msg.Tick.N, ts(got[0].Msg.Tick.At), ts(start))
	}
	// every instant start + k*interval up to the last delivered, once
	missing := 0
	for i := 1; i < len(got); i++ {
		gap := got[i].Msg.Tick.At.Sub(got[i-1].Msg.Tick.At)
		if gap != interval {
			missing += int(gap/interval) - 1
			l.t.Errorf("ticks %d and %d are %v apart, want %v (ticks lost)", got[i-1].Msg.Tick.N, got[i].Msg.Tick.N, gap, interval)
		}
		if got[i].Msg.Tick.N != got[i-1].Msg.Tick.N+1 {
			l.t.Errorf("tick %d follows tick %d", got[i].Msg.Tick.N, got[i-1].Msg.Tick.N)
		}
	}
	late := time.Duration(0)
	for _, s := range got {
		late = max(late, s.StoreNow.Sub(s.Msg.Tick.At))
	}
	l.t.Logf("%d ticks over %v from 3 workers, %d lost, latest %v late", len(got), got[len(got)-1].Msg.Tick.At.Sub(start), missing, late)
	if want := int(run/interval) + 1; len(got) < want {
		l.t.Errorf("%d ticks delivered, want at least %d", len(got), want)
	}
}

// blockFirst returns a collector whose handler blocks its first delivery
// until release is closed, and a channel closed when that delivery began.
func blockFirst(l *lib) (col *collector[string], began, release chan struct{}) {
	began, release = make(chan struct{}), make(chan struct{})
	col = collect(l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if m.Tick.N == 1 && m.Body == "old" {
			close(began)
			<-release
		}
		return nil
	})
	return col, began, release
}

// libRecurringUpsertWhileRunning: replacing a schedule while its tick runs
// keeps the new schedule: the running tick's ack is refused (its lease
// went with the upsert) and arms nothing.
func libRecurringUpsertWhileRunning(l *lib) {
	c := l.client(nil)
	if !l.recurringOK(c) {
		return
	}
	col, began, release := blockFirst(l)
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "recup", col.handle, &ontime.TopicOptions{Lease: 30 * time.Second})
	})
	l.publishRecurring(c, "recup", "r", schedule.Every(200*time.Millisecond), "old")
	<-began
	hourly := schedule.Every(time.Hour)
	next := l.publishRecurring(c, "recup", "r", hourly, "new")
	close(release)
	controlPassed(l, c, col, "recup", "control", 0)
	ti, err := c.Get(l.ctx, "recup", "r")
	if err != nil {
		l.t.Fatalf("Get after the upsert: %v", err)
	}
	if ti.Recurring == nil || ti.Recurring.Schedule != hourly.String() || ti.Recurring.Tick.N != 1 || ti.Recurring.LastTick != 0 || !ti.Due.Equal(next) {
		l.t.Errorf("Get after the upsert: due %s, %+v; want %q, tick 1 due %s, no tick settled", ts(ti.Due), ti.Recurring, hourly, ts(next))
	}
	if string(ti.Body) != "new" {
		l.t.Errorf("body after the upsert %q, want new", ti.Body)
	}
	if n := col.countOf("r"); n != 1 {
		l.t.Errorf("%d deliveries of the schedule, want 1 (the old schedule's tick that was running)", n)
	}
}

// libRecurringCancelWhileRunning: cancelling a schedule while its tick
// runs ends it: the running tick's ack is refused and arms nothing.
func libRecurringCancelWhileRunning(l *lib) {
	c := l.client(nil)
	if !l.recurringOK(c) {
		return
	}
	col, began, release := blockFirst(l)
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "reccancel", col.handle, &ontime.TopicOptions{Lease: 30 * time.Second})
	})
	l.publishRecurring(c, "reccancel", "r", schedule.Every(200*time.Millisecond), "old")
	<-began
	if err := c.Cancel(l.ctx, "reccancel", "r"); err != nil {
		l.t.Fatalf("Cancel while the tick runs: %v", err)
	}
	close(release)
	// a control due after two more intervals: the schedule, had it been
	// re-armed, would have fired by then
	controlPassed(l, c, col, "reccancel", "control", 500*time.Millisecond)
	l.wantAbsent(c, "reccancel", "r")
	if n := col.countOf("r"); n != 1 {
		l.t.Errorf("%d deliveries of the cancelled schedule, want 1", n)
	}
}

// libRecurringPauseResume: a paused schedule fires nothing; Resume fires
// its next tick after now, never a tick from the pause.
func libRecurringPauseResume(l *lib) {
	c := l.client(nil)
	if !l.recurringOK(c) {
		return
	}
	col := collect[string](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "recpause", col.handle, nil)
	})
	l.publishRecurring(c, "recpause", "r", schedule.Every(200*time.Millisecond), "x")
	col.waitOf("r", 2, waitTimeout, "two ticks")
	if err := c.Pause(l.ctx, "recpause", "r"); err != nil {
		l.t.Fatalf("Pause: %v", err)
	}
	atPause := col.countOf("r")
	// a control due a second later: five ticks would have fired
	controlPassed(l, c, col, "recpause", "control", time.Second)
	if n := col.countOf("r"); n > atPause+1 {
		l.t.Errorf("%d ticks fired while paused, want at most the one running at Pause", n-atPause)
	}
	ti, err := c.Get(l.ctx, "recpause", "r")
	if err != nil || ti.Recurring == nil || !ti.Recurring.Paused {
		l.t.Fatalf("Get while paused: %+v, %v; want Paused", ti, err)
	}
	before := col.countOf("r")
	resumed, err := l.storeNow()
	if err != nil {
		l.t.Fatal(err)
	}
	if err := c.Resume(l.ctx, "recpause", "r"); err != nil {
		l.t.Fatalf("Resume: %v", err)
	}
	col.waitOf("r", before+2, waitTimeout, "two ticks after Resume")
	got := checkTicks(l, "pause and resume", col.of("r"))
	for _, s := range got[before:] {
		if s.Msg.Tick.At.Before(resumed.Add(-time.Millisecond)) {
			l.t.Errorf("tick %d at %s fired after Resume at %s: a tick from the pause", s.Msg.Tick.N, ts(s.Msg.Tick.At), ts(resumed))
		}
	}
	if err := c.Pause(l.ctx, "recpause", "absent"); !isNotFound(err) {
		l.t.Errorf("Pause of an absent id: %v, want ErrNotFound", err)
	}
}

// libRecurringMissedOnce and libRecurringMissedEach: every worker gone for
// 2 s (10 ticks of 200 ms): with FireOnce one tick fires for them all (the
// one that was armed, late), with FireEach(4) at most 4, then the schedule
// goes on.
//
// Which ticks FireEach picks depends on when the late tick settles, so
// the checks are the ones that hold however slow the machine is: the late
// tick that was armed fires first; with FireOnce the tick after it is
// after that delivery began (the first tick after the settlement), with
// FireEach(4) it is one of the last 3 missed ticks before the settlement,
// so at least two intervals late.
func libRecurringMissedOnce(l *lib) { recurringMissed(l, ontime.FireOnce(), 1) }
func libRecurringMissedEach(l *lib) { recurringMissed(l, ontime.FireEach(4), 4) }

func recurringMissed(l *lib, p ontime.MissedPolicy, maxLate int) {
	c := l.client(nil)
	if !l.recurringOK(c) {
		return
	}
	const interval = 200 * time.Millisecond
	topic := "recmissed"
	col := collect[string](l, nil)
	w := l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, topic, col.handle, nil)
	})
	l.publishRecurring(c, topic, "r", schedule.Every(interval), "x", ontime.OnMissed(p))
	col.waitOf("r", 2, waitTimeout, "two ticks")
	if err := w.stop(10 * time.Second); err != nil {
		l.t.Fatalf("stopping the worker: %v", err)
	}
	before := col.countOf("r")
	stopped, err := l.storeNow()
	if err != nil {
		l.t.Fatal(err)
	}
	l.waitStorePast(stopped.Add(2 * time.Second))
	restart, err := l.storeNow()
	if err != nil {
		l.t.Fatal(err)
	}
	l.start(l.client(nil), nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, topic, col.handle, nil)
	})
	WaitFor(l.t, 30*time.Second, func() bool {
		for _, s := range col.all() {
			if s.Msg.Tick.At.After(restart.Add(3 * interval)) {
				return true
			}
		}
		return false
	}, "the schedule to go on after the outage")
	got := checkTicks(l, "missed "+p.String(), col.of("r"))
	late := 0
	for _, s := range got[before:] {
		if !s.Msg.Tick.At.After(restart) {
			late++
		}
	}
	if late < 1 || late > maxLate {
		l.t.Errorf("%s: %d ticks from the outage fired after it, want 1 to %d", p, late, maxLate)
	}
	if len(got) >= before+2 {
		first, second := got[before], got[before+1]
		if first.Msg.Tick.At.After(stopped.Add(interval)) {
			l.t.Errorf("%s: the first tick after the outage is at %s, more than an interval after the stop at %s: not the tick that was armed", p, ts(first.Msg.Tick.At), ts(stopped))
		}
		caughtUp := second.StoreNow.Sub(second.Msg.Tick.At) >= 2*interval
		if p == ontime.FireOnce() && !second.Msg.Tick.At.After(first.StoreNow) {
			l.t.Errorf("%s: the tick after the late one is at %s, not after its delivery at %s: a missed tick fired", p, ts(second.Msg.Tick.At), ts(first.StoreNow))
		}
		if p != ontime.FireOnce() && !caughtUp {
			l.t.Errorf("%s: the tick after the late one (%s) fired at %s: not a missed tick", p, ts(second.Msg.Tick.At), ts(second.StoreNow))
		}
	}
	ti, err := c.Get(l.ctx, topic, "r")
	if err != nil || ti.Recurring == nil || ti.Recurring.Missed != p {
		l.t.Errorf("Get: %+v, %v; want the policy %s", ti, err, p)
	}
	l.t.Logf("%s: %d ticks of the 2 s outage fired after it", p, late)
}

// libRecurringJitter: with a jitter window every tick is due at its
// instant plus schedule.JitterFor (never before the instant, within the
// window); the handler sees the instant.
func libRecurringJitter(l *lib) {
	c := l.client(nil)
	if !l.recurringOK(c) {
		return
	}
	const window = 150 * time.Millisecond
	col := collect[string](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "recjitter", col.handle, nil)
	})
	l.publishRecurring(c, "recjitter", "tenant-1", schedule.Every(200*time.Millisecond), "x", ontime.Jitter(window), ontime.OnMissed(ontime.FireEach(100)))
	col.waitOf("tenant-1", 5, 30*time.Second, "five ticks")
	for _, s := range checkTicks(l, "jitter", col.of("tenant-1")) {
		tk := s.Msg.Tick
		want := tk.At.Add(schedule.JitterFor("tenant-1", tk.At, window))
		// the store keeps due times rounded up to its precision
		if s.Msg.Due.Before(want) || s.Msg.Due.After(want.Add(time.Millisecond)) {
			l.t.Errorf("tick %d at %s: due %s, want %s (instant + JitterFor)", tk.N, ts(tk.At), ts(s.Msg.Due), ts(want))
		}
		if s.StoreNow.Before(s.Msg.Due) {
			l.t.Errorf("tick %d fired at %s, before its jittered due time %s", tk.N, ts(s.StoreNow), ts(s.Msg.Due))
		}
	}
	ti, err := c.Get(l.ctx, "recjitter", "tenant-1")
	if err != nil || ti.Recurring == nil || ti.Recurring.Jitter != window {
		l.t.Errorf("Get: %+v, %v; want Jitter %v", ti, err, window)
	}
}

// libRecurringNoOverlap: a tick that runs past the next tick's instant
// does not start a second, concurrent run of the schedule, on any of three
// workers: the next tick is armed when it settles, and with FireOnce the
// ticks that fell due during the run are skipped (the next tick is after
// the run).
func libRecurringNoOverlap(l *lib) {
	c := l.client(nil)
	if !l.recurringOK(c) {
		return
	}
	const interval = 200 * time.Millisecond
	var running, most atomic.Int32
	col := collect(l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			old := most.Load()
			if n <= old || most.CompareAndSwap(old, n) {
				break
			}
		}
		if m.Tick.N <= 2 {
			// runs past two ticks' instants (work, not a wait of the test)
			time.Sleep(2*interval + interval/2)
		}
		return nil
	})
	col.readEnd = true
	clients := []*ontime.Client{c}
	for range 2 {
		d := l.d
		if l.h.NewPeer != nil {
			d = l.h.NewPeer(l.t, l.d)
		}
		clients = append(clients, l.clientOn(d, nil))
	}
	for _, wc := range clients {
		l.start(wc, nil, func(w *ontime.Worker) error {
			return ontime.Handle(w, "recoverlap", col.handle, nil)
		})
	}
	l.publishRecurring(c, "recoverlap", "r", schedule.Every(interval), "x")
	col.waitOf("r", 4, 30*time.Second, "four ticks")
	if err := c.Cancel(l.ctx, "recoverlap", "r"); err != nil {
		l.t.Fatalf("Cancel: %v", err)
	}
	if m := most.Load(); m != 1 {
		l.t.Errorf("%d ticks of one schedule ran at once, want 1", m)
	}
	got := checkTicks(l, "no overlap", col.of("r"))
	for i := 1; i < len(got) && i <= 2; i++ {
		prev, cur := got[i-1], got[i]
		if cur.Msg.Tick.At.Before(prev.End.Add(-time.Millisecond)) {
			l.t.Errorf("tick %d at %s: before the slow tick %d ended at %s (FireOnce skips the ticks of a long run)", cur.Msg.Tick.N, ts(cur.Msg.Tick.At), prev.Msg.Tick.N, ts(prev.End))
		}
		if cur.StoreNow.Before(prev.End) {
			l.t.Errorf("tick %d began at %s, before tick %d ended at %s", cur.Msg.Tick.N, ts(cur.StoreNow), prev.Msg.Tick.N, ts(prev.End))
		}
	}
}
