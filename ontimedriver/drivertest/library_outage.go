package drivertest

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/ontime-go/ontime"
)

// The cases in this file play partial store outages through a gateDriver:
// the store itself stays up (so the case can look at it), but the worker's
// Settle or Subscribe calls fail as if it were unreachable.

// libStopDuringOutage: Stop(ctx) returns soon after ctx ends even while the
// store refuses the ack of a finished handler. It does not wait for the
// lease to run out; the ack is given up (logged once), and the timer, still
// leased in the store, is delivered again after its lease.
func libStopDuringOutage(l *lib) {
	// The lease is long against the bound on Stop below, so that a Stop
	// that retried the ack until the lease deadline (about lease - 0.2 s
	// after it began) cannot pass.
	const (
		lease     = 4 * time.Second
		stopAfter = 300 * time.Millisecond
		// Stop's context, then one last Settle try, which the gate refuses
		// at once; the rest is slack for a loaded machine.
		stopBound = stopAfter + 1200*time.Millisecond
	)
	gate := newGate(l.d)
	c := l.clientOn(gate, nil)
	logger, logs := l.recordLogs()
	col := collect[string](l, nil)
	w := l.start(c, &ontime.WorkerConfig{Logger: logger}, func(w *ontime.Worker) error {
		return ontime.Handle(w, "stopout", col.handle, &ontime.TopicOptions{Lease: lease})
	})
	gate.settleDown.Store(true)
	l.publish(c, "stopout", "x", ontime.WithID("s"))
	col.waitOf("s", 1, waitTimeout, "the delivery")
	WaitFor(l.t, waitTimeout, func() bool { return gate.settleRefused.Load() >= 2 }, "the worker to retry the refused ack")

	start := time.Now()
	err := w.stop(stopAfter)
	took := time.Since(start)
	if took > stopBound {
		l.t.Errorf("Stop(ctx with %v) took %v during a Settle outage, want under %v (it must not wait for the %v lease)", stopAfter, took, stopBound, lease)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		l.t.Errorf("Stop gave up an ack and returned %v, want context.DeadlineExceeded", err)
	}
	if recs := logs.matching("gave up settling"); len(recs) != 1 || recs[0].Attrs["count"] != "1" || recs[0].Attrs["ids"] != "[s]" {
		l.t.Errorf("log records about the given-up ack: %+v; want one, count=1 ids=[s]", recs)
	}
	if gate.settleRefused.Load() < 3 {
		l.t.Errorf("the gate refused %d Settle calls; want the retries plus the last try at Stop", gate.settleRefused.Load())
	}

	// Not acked, not lost: the timer is still in the store, and after its
	// lease another worker gets it.
	ti, err := c.Get(l.ctx, "stopout", "s")
	if err != nil {
		l.t.Fatalf("after Stop gave up the ack: %v (the timer is lost)", err)
	}
	if !l.lacks.NoLeasedState && ti.State != ontime.StateLeased {
		l.t.Errorf("after Stop gave up the ack: state %s, want still leased", ti.State)
	}
	gate.settleDown.Store(false)
	col2 := collect[string](l, nil)
	l.start(l.peerClient(), nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "stopout", col2.handle, &ontime.TopicOptions{Lease: lease})
	})
	col2.waitOf("s", 1, lease+waitTimeout, "the redelivery after the lease")
	l.waitAbsent(c, "stopout", "s")
	first, again := col.of("s")[0], col2.of("s")[0]
	if again.StoreNow.Before(first.Msg.LeaseUntil) {
		l.t.Errorf("redelivered at %s, before the first lease expired at %s", ts(again.StoreNow), ts(first.Msg.LeaseUntil))
	}
	want := first.Msg.Attempt + 1
	if l.lacks.NoAttempts {
		want = 1
	}
	if again.Msg.Attempt != want {
		l.t.Errorf("redelivered with Attempt %d, want %d", again.Msg.Attempt, want)
	}
}

// libAckAfterShortOutage: the store refuses the ack for less than the
// lease; the worker keeps retrying it, and when the store is back the timer
// is acked. One delivery, nothing dropped.
func libAckAfterShortOutage(l *lib) {
	// The ack is retried with a back-off that is still well under a second
	// when the gate opens; the lease leaves room for that on a slow machine.
	const lease = 3 * time.Second
	gate := newGate(l.d)
	c := l.clientOn(gate, nil)
	logger, logs := l.recordLogs()
	col := collect[string](l, nil)
	l.start(c, &ontime.WorkerConfig{Logger: logger}, func(w *ontime.Worker) error {
		return ontime.Handle(w, "shortout", col.handle, &ontime.TopicOptions{Lease: lease})
	})
	gate.settleDown.Store(true)
	l.publish(c, "shortout", "x", ontime.WithID("a"))
	col.waitOf("a", 1, waitTimeout, "the delivery")
	WaitFor(l.t, waitTimeout, func() bool { return gate.settleRefused.Load() >= 3 }, "the worker to retry the refused ack")
	if _, err := c.Get(l.ctx, "shortout", "a"); err != nil {
		l.t.Fatalf("while the ack is refused: %v", err)
	}
	gate.settleDown.Store(false)
	l.waitAbsent(c, "shortout", "a")
	if n := col.countOf("a"); n != 1 {
		l.t.Errorf("delivered %d times, want once (the ack was retried within the lease)", n)
	}
	if recs := logs.matching("could not settle"); len(recs) != 0 {
		l.t.Errorf("the worker dropped an ack during a short outage: %+v", recs)
	}
	// A second timer goes through normally: nothing is stuck.
	controlPassed(l, c, col, "shortout", "control", 0)
}

// libAckAfterLongOutage: the store refuses the ack until the lease has run
// out; the worker drops the ack (one summary log line) and the timer is
// delivered again, with one attempt more. Nothing is lost.
func libAckAfterLongOutage(l *lib) {
	const lease = time.Second
	gate := newGate(l.d)
	c := l.clientOn(gate, nil)
	logger, logs := l.recordLogs()
	reopened := make(chan struct{})
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if nth == 0 {
			return nil // its ack meets the outage
		}
		// The redelivery returns once the store takes acks again, so that
		// its own ack is not caught in the outage too.
		select {
		case <-reopened:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	l.start(c, &ontime.WorkerConfig{Logger: logger}, func(w *ontime.Worker) error {
		return ontime.Handle(w, "longout", col.handle, &ontime.TopicOptions{Lease: lease})
	})
	gate.settleDown.Store(true)
	l.publish(c, "longout", "x", ontime.WithID("b"))
	col.waitOf("b", 1, waitTimeout, "the delivery")
	WaitFor(l.t, lease+waitTimeout, func() bool { return len(logs.matching("could not settle")) > 0 }, "the worker to drop the ack after the lease")
	col.waitOf("b", 2, lease+waitTimeout, "the redelivery after the lease")
	gate.settleDown.Store(false)
	close(reopened)
	l.waitAbsent(c, "longout", "b")

	recs := logs.matching("could not settle")
	if len(recs) != 1 || recs[0].Attrs["count"] != "1" || recs[0].Attrs["ids"] != "[b]" || !strings.Contains(recs[0].Attrs["err"], errGateDown.Error()) {
		l.t.Errorf("log records about the dropped ack: %+v; want one, count=1 ids=[b] with the store's error", recs)
	}
	ss := col.of("b")
	if len(ss) != 2 {
		l.t.Fatalf("delivered %d times, want twice (the dropped ack, then the redelivery)", len(ss))
	}
	if ss[1].StoreNow.Before(ss[0].Msg.LeaseUntil) {
		l.t.Errorf("redelivered at %s, before the first lease expired at %s", ts(ss[1].StoreNow), ts(ss[0].Msg.LeaseUntil))
	}
	want := ss[0].Msg.Attempt + 1
	if l.lacks.NoAttempts {
		want = 1
	}
	if ss[1].Msg.Attempt != want {
		l.t.Errorf("redelivered with Attempt %d after attempt %d, want %d", ss[1].Msg.Attempt, ss[0].Msg.Attempt, want)
	}
}

// libSubscribeOutage: a worker that cannot subscribe to wake-ups still
// delivers (by polling), stays Healthy, reports Degraded, and logs the
// condition once when it begins and once when it ends, however many
// subscribe attempts fail and claims succeed in between.
func libSubscribeOutage(l *lib) {
	gate := newGate(l.d)
	gate.subscribeDown.Store(true)
	c := l.clientOn(gate, nil)
	logger, logs := l.recordLogs()
	col := collect[string](l, nil)
	r := l.start(c, &ontime.WorkerConfig{Logger: logger}, func(w *ontime.Worker) error {
		return ontime.Handle(w, "subout", col.handle, &ontime.TopicOptions{PollInterval: 50 * time.Millisecond})
	})
	l.publish(c, "subout", "x", ontime.WithID("p"))
	col.waitOf("p", 1, waitTimeout, "a delivery without wake-ups (polling)")
	// The subscription is retried every second; claims succeed every 50ms.
	WaitFor(l.t, 3*waitTimeout, func() bool { return gate.subscribeRefused.Load() >= 3 }, "three refused subscriptions")
	h := r.w.Health()
	if !h.Healthy || !h.Degraded || !strings.Contains(h.DegradedError, errGateDown.Error()) {
		l.t.Errorf("while Subscribe fails: Health %+v; want Healthy, Degraded with the error", h)
	}
	gate.subscribeDown.Store(false)
	WaitFor(l.t, waitTimeout, func() bool { return !r.w.Health().Degraded }, "the worker to subscribe again")
	if h := r.w.Health(); !h.Healthy || h.DegradedError != "" {
		l.t.Errorf("after subscribing again: Health %+v", h)
	}
	if n := len(logs.matching("cannot subscribe")); n != 1 {
		l.t.Errorf("%d subscribe failures logged %d times, want once", gate.subscribeRefused.Load(), n)
	}
	if n := len(logs.matching("wake-up notifications restored")); n != 1 {
		l.t.Errorf("the subscription's recovery logged %d times, want once", n)
	}
	if recs := logs.matching("store unreachable"); len(recs) != 0 {
		l.t.Errorf("subscribe failures made the store look unreachable: %+v", recs)
	}
}
