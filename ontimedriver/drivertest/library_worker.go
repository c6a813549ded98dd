package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
)

func libManual(l *lib) {
	c := l.client(nil)
	type result struct {
		id            string
		first, second error
	}
	results := make(chan result, 16)
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		r := result{id: m.ID}
		switch m.Body {
		case "ack":
			r.first = m.Ack(ctx)
			r.second = m.Ack(ctx)
			results <- r
			return errors.New("ignored: the message was acked by hand")
		case "nack":
			if nth == 0 {
				r.first = m.Nack(ctx, errors.New("by hand"))
				results <- r
			}
			return nil // ignored on the first delivery
		case "reject":
			r.first = m.Drop(ctx, errors.New("by hand"))
			results <- r
			return errors.New("ignored")
		case "snooze":
			if nth == 0 {
				r.first = m.Snooze(ctx, 150*time.Millisecond)
				results <- r
				return errors.New("ignored")
			}
			return nil
		case "dead":
			r.first = m.DeadLetter(ctx, errors.New("by hand"))
			results <- r
			return nil
		case "fenced":
			// Re-arm the id, then ack the old delivery: the store refuses,
			// the new timer stays.
			if nth == 0 {
				if _, err := c.Publish(ctx, "manual", "fenced", ontime.WithID(m.ID), ontime.In(time.Hour)); err != nil {
					r.first = err
				} else {
					r.first = m.Ack(ctx)
				}
				results <- r
			}
			return nil
		}
		return nil
	})
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "manual", col.handle, &ontime.TopicOptions{
			Retry: ontime.RetryPolicy{MinDelay: 100 * time.Millisecond, Jitter: -1, MaxAttempts: 5},
		})
	})
	for _, b := range []string{"ack", "nack", "reject", "snooze", "dead", "fenced"} {
		l.publish(c, "manual", b, ontime.WithID(b))
	}
	got := map[string]result{}
	for range 6 {
		select {
		case r := <-results:
			got[r.id] = r
		case <-time.After(waitTimeout):
			l.t.Fatal("timed out waiting for the handlers")
		}
	}
	for id, want := range map[string][2]error{
		"ack":    {nil, ontime.ErrAlreadySettled},
		"nack":   {nil, nil},
		"reject": {nil, nil},
		"snooze": {nil, nil},
		"dead":   {nil, nil},
		"fenced": {ontime.ErrLeaseLost, nil},
	} {
		r := got[id]
		if !errors.Is(r.first, want[0]) || (want[0] == nil && r.first != nil) {
			l.t.Errorf("%s by hand: %v, want %v", id, r.first, want[0])
		}
		if !errors.Is(r.second, want[1]) || (want[1] == nil && r.second != nil) {
			l.t.Errorf("%s by hand, second call: %v, want %v", id, r.second, want[1])
		}
	}
	col.waitOf("nack", 2, waitTimeout, "the retry after Nack")
	col.waitOf("snooze", 2, waitTimeout, "the delivery after Snooze")
	for _, id := range []string{"ack", "nack", "reject", "snooze", "dead"} {
		l.waitAbsent(c, "manual", id)
	}
	controlPassed(l, c, col, "manual", "control", 300*time.Millisecond)

	by := func(id string) []seen[string] { return col.of(id) }
	if n := len(by("ack")); n != 1 {
		l.t.Errorf("acked by hand, then the handler returned an error: delivered %d times, want once", n)
	}
	if n := len(by("reject")); n != 1 {
		l.t.Errorf("dropped by hand: delivered %d times, want once", n)
	}
	if n := len(by("nack")); n != 2 {
		l.t.Errorf("nacked by hand: delivered %d times, want twice", n)
	} else {
		want := 2
		if l.lacks.NoAttempts {
			want = 1
		}
		if a := by("nack")[1].Msg.Attempt; a != want {
			l.t.Errorf("after Nack: Attempt %d, want %d", a, want)
		}
		// Measured from the start of the first handler: the manual settle
		// happened between its start and its end.
		if gap := by("nack")[1].StoreNow.Sub(by("nack")[0].StoreNow); gap < 100*time.Millisecond {
			l.t.Errorf("after Nack: retried after %v, want the policy's 100ms", gap)
		}
	}
	if ss := by("snooze"); len(ss) != 2 {
		l.t.Errorf("snoozed by hand: delivered %d times, want twice", len(ss))
	} else {
		if ss[1].Msg.Attempt != 1 {
			l.t.Errorf("after a manual Snooze: Attempt %d, want 1", ss[1].Msg.Attempt)
		}
		if gap := ss[1].StoreNow.Sub(ss[0].StoreNow); gap < 150*time.Millisecond {
			l.t.Errorf("after Snooze(150ms): delivered again after %v", gap)
		}
	}
	dl, err := c.DeadLetters(l.ctx, "manual", ontime.ListOptions{})
	if err != nil {
		l.t.Fatalf("DeadLetters: %v", err)
	}
	if l.lacks.NoDeadLetters {
		if len(dl.Dead) != 0 {
			l.t.Errorf("driver lacks dead letters but lists %d", len(dl.Dead))
		}
	} else if len(dl.Dead) != 1 || dl.Dead[0].ID != "dead" || dl.Dead[0].Reason != ontimedriver.ReasonRejected {
		l.t.Errorf("dead letters %+v; want just the one dead-lettered by hand", dl.Dead)
	}
	ti, err := c.Get(l.ctx, "manual", "fenced")
	if err != nil {
		l.t.Errorf("the re-armed timer is gone after a stale Ack: %v", err)
	} else if ti.Due.Before(l.now().Add(50 * time.Minute)) {
		l.t.Errorf("the re-armed timer was changed by a stale Ack: due %s", ts(ti.Due))
	}
	if n := len(by("fenced")); n != 1 {
		l.t.Errorf("fenced: %d deliveries, want 1", n)
	}
}

func libWake(l *lib) {
	c := l.client(nil)
	col := collect[string](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "wake", col.handle, &ontime.TopicOptions{PollInterval: 30 * time.Second})
	})
	// Let the worker claim once on the empty topic and go to sleep for its
	// 30s poll interval.
	time.Sleep(300 * time.Millisecond)
	now := l.now()
	id := l.publish(c, "wake", "now")
	col.waitOf(id, 1, waitTimeout, "a due-now timer on an idle worker")
	s := col.of(id)[0]
	if lat := s.StoreNow.Sub(now); lat > time.Second {
		l.t.Errorf("idle worker delivered a due-now timer %v after it was published, want well under its 30s poll interval (wake-up)", lat)
	}
	// A timer due a little later, published while the worker sleeps: woken,
	// then sleeps until the due time, not the poll interval.
	_, due := l.publishDue(c, "wake", ontime.Timer{ID: "soon", Body: "soon", Delay: 300 * time.Millisecond})
	col.waitOf("soon", 1, waitTimeout, "a timer due in 300ms on an idle worker")
	ss := col.of("soon")[0]
	wantOnTime(l, "soon", ss, due)
	if late := ss.StoreNow.Sub(due); late > time.Second {
		l.t.Errorf("timer due in 300ms delivered %v late on an idle worker", late)
	}
}

func libHeartbeat(l *lib) {
	c := l.client(nil)
	var running atomic.Int32
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], _ int) error {
		running.Add(1)
		defer running.Add(-1)
		select {
		case <-time.After(3 * time.Second):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	// A lease of 1s (not less): every extension must reach the store within
	// the lease, and an embedded store that syncs to disk under a loaded
	// race-detector run can take a few hundred milliseconds.
	opts := &ontime.TopicOptions{Lease: time.Second, MaxConcurrency: 2}
	l.start(c, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "hb", col.handle, opts) })
	l.start(l.peerClient(), nil, func(w *ontime.Worker) error { return ontime.Handle(w, "hb", col.handle, opts) })
	id := l.publish(c, "hb", "long")
	col.waitOf(id, 1, waitTimeout, "the long handler to start")
	// While it runs, the store shows it leased with a live lease.
	if !l.lacks.NoLeasedState {
		time.Sleep(1500 * time.Millisecond) // past the first lease
		ti, err := c.Get(l.ctx, "hb", id)
		if err != nil {
			l.t.Fatalf("Get while the handler runs: %v", err)
		}
		if ti.State != ontime.StateLeased || !ti.LeaseUntil.After(l.now()) {
			l.t.Errorf("while the handler runs past its first lease: state %s, lease until %s; want leased, extended", ti.State, ts(ti.LeaseUntil))
		}
	}
	WaitFor(l.t, 10*time.Second, func() bool {
		_, err := c.Get(l.ctx, "hb", id)
		return isNotFound(err)
	}, "the long handler's ack")
	if n := col.countOf(id); n != 1 {
		l.t.Errorf("a 3s handler with a 1s lease and the heartbeat on was delivered %d times, want once", n)
	}
}

func libNoHeartbeat(l *lib) {
	c := l.client(nil)
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if nth == 0 {
			time.Sleep(1500 * time.Millisecond)
		}
		return nil
	})
	opts := &ontime.TopicOptions{Lease: 300 * time.Millisecond, DisableHeartbeat: true, MaxConcurrency: 2}
	l.start(c, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "nohb", col.handle, opts) })
	id := l.publish(c, "nohb", "long")
	col.waitOf(id, 2, waitTimeout, "the redelivery after the lease expired")
	l.waitAbsent(c, "nohb", id)
	// Wait for the slow first handler to return: its ack must not be the
	// one that deletes (the store refuses its stale token), and nothing is
	// lost either way.
	time.Sleep(1500 * time.Millisecond)
	ss := col.of(id)
	if ss[1].StoreNow.Before(ss[0].Msg.LeaseUntil) {
		l.t.Errorf("redelivered at %s, before the first lease expired at %s", ts(ss[1].StoreNow), ts(ss[0].Msg.LeaseUntil))
	}
	l.t.Logf("delivered %d times with the heartbeat off", len(ss))
}

func libLeaseLostCancels(l *lib) {
	c := l.client(nil)
	cancelled := make(chan bool, 1)
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if nth > 0 {
			return nil
		}
		// Re-publishing the id takes the timer away from this delivery; the
		// heartbeat finds the lease lost and cancels the context.
		if _, err := c.Publish(context.Background(), "lost", "new", ontime.WithID(m.ID), ontime.In(time.Hour)); err != nil {
			cancelled <- false
			return err
		}
		select {
		case <-ctx.Done():
			cancelled <- true
			return ctx.Err()
		case <-time.After(3 * time.Second):
			cancelled <- false
			return nil
		}
	})
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "lost", col.handle, &ontime.TopicOptions{Lease: 300 * time.Millisecond})
	})
	l.publish(c, "lost", "old", ontime.WithID("x"))
	if !<-cancelled {
		l.t.Fatal("the handler's context was not cancelled after its lease was lost")
	}
	time.Sleep(100 * time.Millisecond) // let the worker settle (or not)
	ti, err := c.Get(l.ctx, "lost", "x")
	if err != nil {
		l.t.Fatalf("the re-published timer is gone: %v", err)
	}
	if string(ti.Body) != "new" || ti.Due.Before(l.now().Add(50*time.Minute)) || ti.Attempt != 0 {
		l.t.Errorf("the re-published timer was touched by the lost delivery: %+v", ti)
	}
	if n := col.countOf("x"); n != 1 {
		l.t.Errorf("delivered %d times, want once", n)
	}
}

func libGracefulStop(l *lib) {
	gate := newGate(l.d)
	l.t.Cleanup(gate.open)
	c1 := l.clientOn(gate, nil)
	var w1Ran []string
	var w1mu = make(chan struct{}, 1)
	longStarted := make(chan struct{})
	var longDone atomic.Bool
	w1 := l.start(c1, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "stop", func(ctx context.Context, m *ontime.Message[string]) error {
			w1mu <- struct{}{}
			w1Ran = append(w1Ran, m.ID)
			<-w1mu
			if m.ID == "long" {
				close(longStarted)
				time.Sleep(400 * time.Millisecond)
				longDone.Store(true)
			}
			return nil
		}, &ontime.TopicOptions{MaxConcurrency: 4})
	})
	l.publish(c1, "stop", "x", ontime.WithID("long"))
	select {
	case <-longStarted:
	case <-time.After(waitTimeout):
		l.t.Fatal("the long handler did not start")
	}
	// Hold the next claim between the store and the worker.
	gate.arm()
	if _, err := c1.PublishBatch(l.ctx, "stop", []ontime.Timer{{ID: "u1", Body: "x"}, {ID: "u2", Body: "x"}, {ID: "u3", Body: "x"}}); err != nil {
		l.t.Fatalf("PublishBatch: %v", err)
	}
	var held []string
	select {
	case held = <-gate.entered:
	case <-time.After(waitTimeout):
		l.t.Fatal("the worker did not claim the new timers")
	}
	stopped := make(chan error, 1)
	stopAt := time.Now()
	go func() { stopped <- w1.stop(10 * time.Second) }()
	// Let Stop begin (stop claiming), then let the held claim through: those
	// timers were claimed but never started.
	time.Sleep(200 * time.Millisecond)
	gate.open()
	select {
	case err := <-stopped:
		if err != nil {
			l.t.Errorf("graceful Stop: %v", err)
		}
	case <-time.After(10 * time.Second):
		l.t.Fatal("Stop did not return")
	}
	if !longDone.Load() {
		l.t.Error("Stop returned before the running handler finished")
	}
	if time.Since(stopAt) < 150*time.Millisecond {
		l.t.Error("Stop did not wait for the running handler")
	}
	l.wantAbsent(c1, "stop", "long")
	w1mu <- struct{}{}
	ran := append([]string(nil), w1Ran...)
	<-w1mu
	if len(ran) != 1 {
		l.t.Errorf("worker 1 ran %v; want just the long handler (the held claim %v was taken after Stop began)", ran, held)
	}
	for _, id := range held {
		ti, err := c1.Get(l.ctx, "stop", id)
		if err != nil {
			l.t.Errorf("released timer %s: %v", id, err)
			continue
		}
		if ti.State != ontime.StateScheduled || ti.Due.After(l.now()) {
			l.t.Errorf("released timer %s: state %s due %s; want scheduled and due at once", id, ti.State, ts(ti.Due))
		}
		if !l.lacks.NoAttempts && ti.Attempt != 0 {
			l.t.Errorf("released timer %s: Attempt %d, want 0 (an unstarted claim is not an attempt)", id, ti.Attempt)
		}
	}

	// A second worker takes them at once, long before the 30s lease the
	// first worker claimed them with would have expired.
	col := collect[string](l, nil)
	start := time.Now()
	l.start(l.peerClient(), nil, func(w *ontime.Worker) error { return ontime.Handle(w, "stop", col.handle, nil) })
	col.wait(3, waitTimeout, "the released timers on the second worker")
	if d := time.Since(start); d > waitTimeout {
		l.t.Errorf("released timers took %v to reach the second worker", d)
	}
	for _, s := range col.all() {
		if s.Msg.Attempt != 1 {
			l.t.Errorf("%s: Attempt %d on the second worker, want 1", s.Msg.ID, s.Msg.Attempt)
		}
	}
}

func libForcedStop(l *lib) {
	c := l.client(nil)
	cancelled := make(chan struct{})
	started := make(chan struct{})
	r := l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "forced", func(ctx context.Context, m *ontime.Message[string]) error {
			close(started)
			<-ctx.Done()
			close(cancelled)
			return ctx.Err()
		}, nil)
	})
	l.publish(c, "forced", "x", ontime.WithID("f"))
	select {
	case <-started:
	case <-time.After(waitTimeout):
		l.t.Fatal("the handler did not start")
	}
	err := r.stop(300 * time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		l.t.Errorf("forced Stop returned %v, want context.DeadlineExceeded", err)
	}
	select {
	case <-cancelled:
	default:
		l.t.Error("Stop returned but the handler's context was not cancelled")
	}
	ti, err := c.Get(l.ctx, "forced", "f")
	if err != nil {
		l.t.Fatalf("the timer of a cancelled handler is gone (acked or lost): %v", err)
	}
	if ti.State != ontime.StateScheduled || ti.Due.After(l.now()) {
		l.t.Errorf("after a forced stop: state %s due %s; want scheduled, due at once", ti.State, ts(ti.Due))
	}
	if !l.lacks.NoAttempts && ti.Attempt != 0 {
		l.t.Errorf("after a forced stop: Attempt %d, want 0 (a shutdown is not a failure)", ti.Attempt)
	}
	col := collect[string](l, nil)
	l.start(l.peerClient(), nil, func(w *ontime.Worker) error { return ontime.Handle(w, "forced", col.handle, nil) })
	col.waitOf("f", 1, waitTimeout, "the timer on another worker")
	if s := col.of("f")[0]; s.Msg.Attempt != 1 {
		l.t.Errorf("redelivered with Attempt %d, want 1", s.Msg.Attempt)
	}
}

// libRunContext stops workers by cancelling Run's context: running handlers
// get WorkerConfig.ShutdownTimeout, then their contexts are cancelled.
func libRunContext(l *lib) {
	c := l.client(nil)
	type worker struct {
		cancel  context.CancelFunc
		done    chan error
		started chan struct{}
		ctxErr  atomic.Value
	}
	run := func(topic string, timeout time.Duration, work time.Duration) *worker {
		w := &worker{done: make(chan error, 1), started: make(chan struct{})}
		ww := ontime.NewWorker(c, &ontime.WorkerConfig{ShutdownTimeout: timeout})
		err := ontime.Handle(ww, topic, func(ctx context.Context, m *ontime.Message[string]) error {
			close(w.started)
			select {
			case <-time.After(work):
				return nil
			case <-ctx.Done():
				w.ctxErr.Store(ctx.Err())
				return ctx.Err()
			}
		}, nil)
		if err != nil {
			l.t.Fatalf("Handle: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel = cancel
		go func() { w.done <- ww.Run(ctx) }()
		l.t.Cleanup(func() { cancel(); <-w.done })
		return w
	}
	patient := run("patient", 5*time.Second, 300*time.Millisecond)
	hasty := run("hasty", 200*time.Millisecond, time.Minute)
	l.publish(c, "patient", "x", ontime.WithID("p"))
	l.publish(c, "hasty", "x", ontime.WithID("h"))
	for _, w := range []*worker{patient, hasty} {
		select {
		case <-w.started:
		case <-time.After(waitTimeout):
			l.t.Fatal("a handler did not start")
		}
		w.cancel()
	}
	for name, w := range map[string]*worker{"patient": patient, "hasty": hasty} {
		select {
		case err := <-w.done:
			// The patient handler finished within ShutdownTimeout: a clean
			// stop. The hasty one had to be cancelled: Run says so.
			if name == "patient" && err != nil {
				l.t.Errorf("patient: Run returned %v after a clean stop, want nil", err)
			}
			if name == "hasty" && !errors.Is(err, context.DeadlineExceeded) {
				l.t.Errorf("hasty: Run returned %v after its ShutdownTimeout ran out and its handler was cancelled, want an error wrapping context.DeadlineExceeded", err)
			}
			w.done <- err // for the cleanup
		case <-time.After(10 * time.Second):
			l.t.Fatalf("%s: Run did not return after its context was cancelled", name)
		}
	}
	if v := patient.ctxErr.Load(); v != nil {
		l.t.Errorf("patient: the handler's context was cancelled (%v) within ShutdownTimeout", v)
	}
	l.wantAbsent(c, "patient", "p")
	if v := hasty.ctxErr.Load(); v == nil {
		l.t.Error("hasty: the handler's context was not cancelled after ShutdownTimeout")
	}
	ti, err := c.Get(l.ctx, "hasty", "h")
	if err != nil {
		l.t.Fatalf("hasty: the cancelled handler's timer is gone: %v", err)
	}
	if ti.State != ontime.StateScheduled || ti.Due.After(l.now()) {
		l.t.Errorf("hasty: state %s due %s; want scheduled, due at once", ti.State, ts(ti.Due))
	}
}

func libBadInput(l *lib) {
	c := l.client(&ontime.Config{MaxBodyBytes: 1024})
	wantInvalid := func(what string, err error, mention string) {
		l.t.Helper()
		if !errors.Is(err, ontime.ErrInvalid) {
			l.t.Errorf("%s: error %v, want ErrInvalid", what, err)
			return
		}
		if !strings.Contains(err.Error(), mention) {
			l.t.Errorf("%s: error %q does not mention %q", what, err, mention)
		}
	}
	pub := func(topic string, body any, opts ...ontime.PublishOption) error {
		_, err := c.Publish(l.ctx, topic, body, opts...)
		return err
	}
	wantInvalid("empty topic", pub("", "x"), "topic")
	wantInvalid("topic with a space", pub("bad topic", "x"), "topic")
	wantInvalid("topic with a brace", pub("a{b}", "x"), "topic")
	wantInvalid("topic too long", pub(strings.Repeat("t", 201), "x"), "topic")
	wantInvalid("negative delay", pub("bad", "x", ontime.In(-time.Second)), "negative")
	wantInvalid("In and At", pub("bad", "x", ontime.In(time.Second), ontime.At(time.Now())), "both")
	wantInvalid("body over MaxBodyBytes", pub("bad", strings.Repeat("b", 2000)), "limit")
	wantInvalid("control character in id", pub("bad", "x", ontime.WithID("a\x00b")), "id")
	wantInvalid("invalid json.RawMessage", pub("bad", json.RawMessage(`{"a":`)), "JSON")
	wantInvalid("unmarshalable body", pub("bad", func() {}), "JSON")
	wantInvalid("empty header key", pub("bad", "x", ontime.WithHeader("", "v")), "header")
	// Due times outside years 1970..9999 are refused, naming the value.
	wantInvalid("At before 1970", pub("bad", "x", ontime.At(time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC))), "1969-12-31T23:00:00Z")
	wantInvalid("At in year 10000", pub("bad", "x", ontime.At(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))), "10000-01-01T00:00:00Z")
	wantInvalid("At in year 300000000", pub("bad", "x", ontime.At(time.Date(300_000_000, 1, 1, 0, 0, 0, 0, time.UTC))), "300000000-01-01")
	_, err := c.PublishBatch(l.ctx, "bad", []ontime.Timer{{ID: "ok1", Body: "x"}, {ID: "far", Body: "x", At: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)}})
	wantInvalid("batch with a timer in year 300000", err, "300000-01-01")
	_, err = c.PublishBatch(l.ctx, "bad", []ontime.Timer{{ID: "ok1", Body: "x"}, {ID: "neg", Body: "x", Delay: -time.Millisecond}, {ID: "ok2"}})
	wantInvalid("batch with one bad timer", err, "timer 1")
	wantInvalid("Get with an empty id", func() error { _, err := c.Get(l.ctx, "bad", ""); return err }(), "id")
	wantInvalid("Cancel with an empty id", c.Cancel(l.ctx, "bad", ""), "id")
	wantInvalid("List with a negative limit", func() error { _, err := c.List(l.ctx, "bad", ontime.ListOptions{Limit: -1}); return err }(), "limit")
	wantInvalid("DeadLetters with a negative limit", func() error {
		_, err := c.DeadLetters(l.ctx, "bad", ontime.ListOptions{Limit: -1})
		return err
	}(), "limit")
	if _, err := ontime.NewClient(l.d, &ontime.Config{Prefix: "bad prefix"}); !errors.Is(err, ontime.ErrInvalid) || !strings.Contains(err.Error(), "Prefix") {
		l.t.Errorf("NewClient with a bad prefix: %v, want ErrInvalid naming Prefix", err)
	}
	if _, err := ontime.NewClient(nil, nil); !errors.Is(err, ontime.ErrInvalid) {
		l.t.Errorf("NewClient(nil): %v", err)
	}

	// Handlers: bad options name the field; nothing starts.
	w := ontime.NewWorker(c, nil)
	h := func(ctx context.Context, m *ontime.Message[string]) error { return nil }
	wantInvalid("retry policy MaxDelay < MinDelay", ontime.Handle(w, "t", h, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Second}}), "MaxDelay")
	wantInvalid("retry policy Multiplier", ontime.Handle(w, "t", h, &ontime.TopicOptions{Retry: ontime.RetryPolicy{Multiplier: 0.5}}), "Multiplier")
	wantInvalid("retry policy Jitter", ontime.Handle(w, "t", h, &ontime.TopicOptions{Retry: ontime.RetryPolicy{Jitter: 1.5}}), "Jitter")
	wantInvalid("lease too short", ontime.Handle(w, "t", h, &ontime.TopicOptions{Lease: time.Millisecond}), "Lease")
	wantInvalid("negative concurrency", ontime.Handle(w, "t", h, &ontime.TopicOptions{MaxConcurrency: -1}), "MaxConcurrency")
	wantInvalid("nil handler", ontime.Handle[string](w, "t", nil, nil), "nil")
	wantInvalid("empty topic", ontime.Handle(w, "", h, nil), "topic")
	wantInvalid("empty topic on a Router", ontime.Handle(w.Router("r:"), "", h, nil), "topic")
	wantInvalid("bad topic", ontime.Handle(w, "a b", h, nil), "topic")
	wantInvalid("Run without handlers", w.Run(l.ctx), "handler")
	if err := ontime.Handle(w, "t", h, nil); err != nil {
		l.t.Errorf("Handle: %v", err)
	}
	wantInvalid("a topic registered twice", ontime.Handle(w, "t", h, nil), "t")
	if err := w.Stop(l.ctx); err != nil {
		l.t.Errorf("Stop of a worker that never ran: %v", err)
	}
	if err := w.Stop(l.ctx); err != nil {
		l.t.Errorf("second Stop of a worker that never ran: %v", err)
	}
	if err := w.Run(l.ctx); !errors.Is(err, ontime.ErrStopped) {
		l.t.Errorf("Run after Stop: %v, want ErrStopped", err)
	}

	// Nothing was stored by any of it.
	topics, err := c.Topics(l.ctx)
	if err != nil {
		l.t.Fatalf("Topics: %v", err)
	}
	if len(topics) != 0 {
		l.t.Errorf("bad input stored something: topics %q", topics)
	}
	if n, err := c.Count(l.ctx, "bad"); err != nil || n != (ontime.Counts{}) {
		l.t.Errorf("Count(bad) = %+v, %v; want nothing", n, err)
	}
	// A body just at the limit is fine; no limit with a negative value.
	if err := pub("bad", strings.Repeat("b", 900)); err != nil {
		l.t.Errorf("a body under the limit: %v", err)
	}
	unlimited := l.client(&ontime.Config{MaxBodyBytes: -1})
	if _, err := unlimited.Publish(l.ctx, "big", strings.Repeat("b", 2<<20)); err != nil {
		l.t.Errorf("a 2 MiB body with MaxBodyBytes -1: %v", err)
	}
}

func libBatch(l *lib) {
	const total = 1200 // more than one chunk of 500
	c := l.client(nil)
	timers := make([]ontime.Timer, total)
	for i := range timers {
		timers[i] = ontime.Timer{ID: fmt.Sprintf("b%04d", i), Body: invoice{ID: i}}
		if i%100 == 0 {
			timers[i].Delay = 200 * time.Millisecond
		}
	}
	before := l.now()
	res, err := c.PublishBatch(l.ctx, "batch", timers)
	if err != nil {
		l.t.Fatalf("PublishBatch of %d: %v", total, err)
	}
	if len(res) != total {
		l.t.Fatalf("PublishBatch: %d results for %d timers", len(res), total)
	}
	dues := make(map[string]time.Time, total)
	for i, r := range res {
		if r.Err != nil || r.ID != timers[i].ID || r.Due.Before(before) {
			l.t.Fatalf("result %d: %+v", i, r)
		}
		dues[r.ID] = r.Due
	}
	n, err := c.Count(l.ctx, "batch")
	if err != nil || n.Scheduled != total {
		l.t.Errorf("Count after PublishBatch: %+v, %v; want %d scheduled", n, err, total)
	}
	// List, paged, sees every timer in due order.
	var listed []ontime.TimerInfo
	opts := ontime.ListOptions{Limit: 500}
	for {
		p, err := c.List(l.ctx, "batch", opts)
		if err != nil {
			l.t.Fatalf("List: %v", err)
		}
		listed = append(listed, p.Timers...)
		if p.NextCursor == "" {
			break
		}
		opts.Cursor = p.NextCursor
	}
	if len(listed) != total {
		l.t.Errorf("List: %d timers, want %d", len(listed), total)
	}
	for i := 1; i < len(listed); i++ {
		if listed[i].Due.Before(listed[i-1].Due) {
			l.t.Fatalf("List out of due order at %d: %s after %s", i, ts(listed[i].Due), ts(listed[i-1].Due))
		}
	}
	if len(listed) > 0 && (listed[0].ContentType != "application/json" || listed[0].CorrelationID != listed[0].ID) {
		l.t.Errorf("List: envelope fields %+v", listed[0])
	}

	col := collect[invoice](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "batch", col.handle, &ontime.TopicOptions{MaxConcurrency: 64})
	})
	col.wait(total, 20*time.Second, fmt.Sprintf("%d timers", total))
	l.waitEmpty(c, "batch", 10*time.Second)
	counts := map[string]int{}
	for _, s := range col.all() {
		counts[s.Msg.ID]++
		if s.StoreNow.Before(dues[s.Msg.ID]) {
			l.t.Errorf("%s delivered early", s.Msg.ID)
		}
		if want := fmt.Sprintf("b%04d", s.Msg.Body.ID); want != s.Msg.ID {
			l.t.Errorf("%s delivered with body of %s", s.Msg.ID, want)
		}
	}
	for id := range dues {
		if counts[id] != 1 {
			l.t.Errorf("%s delivered %d times, want once", id, counts[id])
		}
	}
	topics, err := c.Topics(l.ctx)
	if err != nil {
		l.t.Fatalf("Topics: %v", err)
	}
	if contains(topics, "batch") {
		l.t.Errorf("Topics after every timer was acked: %q still lists batch", topics)
	}
}

func libInspect(l *lib) {
	c := l.client(nil)
	now := l.now()
	l.publish(c, "insp", "later", ontime.WithID("later"), ontime.At(now.Add(time.Hour)), ontime.WithHeader("k", "v"))
	l.publish(c, "insp", "sooner", ontime.WithID("sooner"), ontime.In(30*time.Minute))
	ti, err := c.Get(l.ctx, "insp", "later")
	if err != nil {
		l.t.Fatalf("Get: %v", err)
	}
	if ti.ID != "later" || ti.Topic != "insp" || ti.State != ontime.StateScheduled || string(ti.Body) != "later" ||
		ti.ContentType != "text/plain" || ti.CorrelationID != "later" || ti.Headers["k"] != "v" || ti.Attempt != 0 || ti.DecodeError != "" {
		l.t.Errorf("Get: %+v", ti)
	}
	if ti.Due.Before(now.Add(time.Hour)) || ti.Due.After(now.Add(time.Hour+time.Millisecond)) {
		l.t.Errorf("Get: Due %s, want the At given %s", ts(ti.Due), ts(now.Add(time.Hour)))
	}
	if _, err := c.Get(l.ctx, "insp", "nope"); !isNotFound(err) {
		l.t.Errorf("Get of an unknown id: %v, want ErrNotFound", err)
	}
	p, err := c.List(l.ctx, "insp", ontime.ListOptions{})
	if err != nil {
		l.t.Fatalf("List: %v", err)
	}
	if len(p.Timers) != 2 || p.Timers[0].ID != "sooner" || p.Timers[1].ID != "later" || p.NextCursor != "" {
		l.t.Errorf("List: %+v, want sooner then later", p)
	}
	p, err = c.List(l.ctx, "insp", ontime.ListOptions{Limit: 1})
	if err != nil || len(p.Timers) != 1 || p.NextCursor == "" {
		l.t.Fatalf("List limit 1: %+v, %v", p, err)
	}
	p, err = c.List(l.ctx, "insp", ontime.ListOptions{Limit: 1, Cursor: p.NextCursor})
	if err != nil || len(p.Timers) != 1 || p.Timers[0].ID != "later" {
		l.t.Errorf("List second page: %+v, %v", p, err)
	}

	// While a handler runs, the timer is leased.
	started := make(chan struct{})
	release := make(chan struct{})
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "insp-run", func(ctx context.Context, m *ontime.Message[string]) error {
			close(started)
			<-release
			return nil
		}, nil)
	})
	l.publish(c, "insp-run", "x", ontime.WithID("run"))
	select {
	case <-started:
	case <-time.After(waitTimeout):
		l.t.Fatal("handler did not start")
	}
	ti, err = c.Get(l.ctx, "insp-run", "run")
	if err != nil {
		l.t.Fatalf("Get while running: %v", err)
	}
	n, err := c.Count(l.ctx, "insp-run")
	if err != nil {
		l.t.Fatalf("Count: %v", err)
	}
	close(release)
	if l.lacks.NoLeasedState {
		if n.Scheduled+n.Leased != 1 {
			l.t.Errorf("Count while running: %+v", n)
		}
	} else {
		if ti.State != ontime.StateLeased || ti.LeaseUntil.IsZero() || (!l.lacks.NoAttempts && ti.Attempt != 1) {
			l.t.Errorf("Get while running: %+v; want leased, attempt 1", ti)
		}
		if n != (ontime.Counts{Leased: 1}) {
			l.t.Errorf("Count while running: %+v, want 1 leased", n)
		}
	}
	l.waitAbsent(c, "insp-run", "run")
	topics, err := c.Topics(l.ctx)
	if err != nil {
		l.t.Fatalf("Topics: %v", err)
	}
	if !contains(topics, "insp") || contains(topics, "insp-run") {
		l.t.Errorf("Topics = %q, want insp and not the emptied insp-run", topics)
	}
}
