package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// recorder is a hook of every kind; it records what it saw.
type recorder struct {
	mu        sync.Mutex
	published []ontime.PublishEvent
	started   []ontime.Delivery
	ended     map[string][]endRecord
	endCh     chan endRecord
	// order, when set, records hook calls by name (under orderMu).
	name  string
	order *[]string
}

var orderMu sync.Mutex

type endRecord struct {
	d   ontime.Delivery
	r   ontime.DeliveryResult
	ctx context.Context
}

type ctxKey string

func newRecorder() *recorder {
	return &recorder{ended: map[string][]endRecord{}, endCh: make(chan endRecord, 100)}
}

func (h *recorder) note(what string) {
	if h.order != nil {
		orderMu.Lock()
		*h.order = append(*h.order, h.name+"."+what)
		orderMu.Unlock()
	}
}

func (h *recorder) BeforePublish(ctx context.Context, p *ontime.PublishEvent) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.note("before")
	for i := range p.Timers {
		if p.Timers[i].Headers == nil {
			p.Timers[i].Headers = map[string]string{}
		}
		p.Timers[i].Headers["traceparent"] = "00-trace-" + p.Timers[i].ID
	}
	return context.WithValue(ctx, ctxKey("publish-span"), "span")
}

func (h *recorder) AfterPublish(ctx context.Context, p *ontime.PublishEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.note("after")
	if ctx.Value(ctxKey("publish-span")) != "span" {
		p.Err = errors.New("AfterPublish did not get BeforePublish's context")
	}
	h.published = append(h.published, *p)
}

func (h *recorder) DeliveryStart(ctx context.Context, d *ontime.Delivery) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.note("start")
	h.started = append(h.started, *d)
	return context.WithValue(ctx, ctxKey("span"), d.Headers["traceparent"])
}

func (h *recorder) DeliveryEnd(ctx context.Context, d *ontime.Delivery, r ontime.DeliveryResult) {
	h.mu.Lock()
	h.note("end")
	e := endRecord{*d, r, ctx}
	h.ended[d.ID] = append(h.ended[d.ID], e)
	h.mu.Unlock()
	h.endCh <- e
}

// next waits for the next DeliveryEnd.
func (h *recorder) next(t *testing.T) endRecord {
	t.Helper()
	select {
	case e := <-h.endCh:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no DeliveryEnd within 5s")
		return endRecord{}
	}
}

func openBolt(t *testing.T) *ontimebolt.Driver {
	t.Helper()
	d, err := ontimebolt.Open(filepath.Join(t.TempDir(), "timers.db"), &ontimebolt.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func runWorker(t *testing.T, w *ontime.Worker, ctx context.Context) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx)
	}()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = w.Stop(sctx)
		<-done
	})
}

// TestHooksSeeEveryDelivery: publish hooks see every timer with its id and
// can write headers that reach the handler; delivery hooks see each
// delivery's topic, id, attempt, due and fire instants and headers, and
// its outcome, duration and error, for every outcome a handler can ask for.
func TestHooksSeeEveryDelivery(t *testing.T) {
	t.Parallel()
	h := newRecorder()
	client, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet, Prefix: "app:", Hooks: []any{h}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := []string{"ack", "fail", "snooze", "reject", "dead", "retry-after", "panic", "manual-reject", "manual-nack"}
	seenHeaders := map[string]string{}
	var (
		mu      sync.Mutex
		snoozed sync.Map
	)
	baseCtx := context.WithValue(ctx, ctxKey("run"), "run-value")
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	err = ontime.Handle(w, "jobs", func(ctx context.Context, m *ontime.Message[string]) error {
		mu.Lock()
		seenHeaders[m.ID] = m.Headers["traceparent"]
		mu.Unlock()
		if ctx.Value(ctxKey("run")) != "run-value" {
			return ontime.DeadLetter(errors.New("the handler's context lacks Run's values"))
		}
		if ctx.Value(ctxKey("span")) != m.Headers["traceparent"] {
			return ontime.DeadLetter(errors.New("the handler's context lacks DeliveryStart's values"))
		}
		switch m.ID {
		case "ack":
			return nil
		case "fail":
			if m.Attempt == 1 {
				return errors.New("boom")
			}
			return nil
		case "snooze":
			// Snooze does not count the attempt: a flag tells the second
			// delivery apart.
			if _, again := snoozed.LoadOrStore(m.ID, true); !again {
				return ontime.Snooze(10 * time.Millisecond)
			}
			return nil
		case "reject":
			return ontime.Drop(errors.New("bad"))
		case "dead":
			return ontime.DeadLetter(errors.New("poison"))
		case "retry-after":
			if m.Attempt == 1 {
				return ontime.RetryAfter(20*time.Millisecond, errors.New("later"))
			}
			return nil
		case "panic":
			if m.Attempt == 1 {
				panic("kaboom")
			}
			return nil
		case "manual-reject":
			return m.Drop(ctx, errors.New("by hand"))
		case "manual-nack":
			if m.Attempt == 1 {
				_ = m.Nack(ctx, errors.New("by hand"))
				return nil // ignored: Nack decided
			}
			return nil
		}
		return nil
	}, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MinDelay: 10 * time.Millisecond, Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	var res []ontime.PublishResult
	for _, id := range ids[:4] {
		if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID(id)); err != nil {
			t.Fatal(err)
		}
	}
	var batch []ontime.Timer
	for _, id := range ids[4:] {
		batch = append(batch, ontime.Timer{ID: id, Body: "x", Headers: map[string]string{"k": "v"}})
	}
	if res, err = client.PublishBatch(ctx, "jobs", batch); err != nil || len(res) != len(batch) {
		t.Fatalf("PublishBatch: %v %v", res, err)
	}
	if _, ok := batch[0].Headers["traceparent"]; ok {
		t.Error("BeforePublish changed the caller's header map")
	}
	runWorker(t, w, baseCtx)

	want := map[string][]ontime.Outcome{
		"ack":           {ontime.OutcomeAcked},
		"fail":          {ontime.OutcomeRetried, ontime.OutcomeAcked},
		"snooze":        {ontime.OutcomeSnoozed, ontime.OutcomeAcked},
		"reject":        {ontime.OutcomeDropped},
		"dead":          {ontime.OutcomeDeadLettered},
		"retry-after":   {ontime.OutcomeRetried, ontime.OutcomeAcked},
		"panic":         {ontime.OutcomeRetried, ontime.OutcomeAcked},
		"manual-reject": {ontime.OutcomeDropped},
		"manual-nack":   {ontime.OutcomeRetried, ontime.OutcomeAcked},
	}
	total := 0
	for _, o := range want {
		total += len(o)
	}
	for range total {
		h.next(t)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, outs := range want {
		got := h.ended[id]
		var gotOuts []ontime.Outcome
		for _, e := range got {
			gotOuts = append(gotOuts, e.r.Outcome)
		}
		if !slices.Equal(gotOuts, outs) {
			t.Errorf("%s: outcomes %v, want %v", id, gotOuts, outs)
			continue
		}
		for i, e := range got {
			d := e.d
			if d.Topic != "app:jobs" || d.ID != id || d.CorrelationID != id || d.ContentType != "text/plain" {
				t.Errorf("%s: delivery %+v", id, d)
			}
			if d.Headers["traceparent"] != "00-trace-"+id {
				t.Errorf("%s: headers %v, want the traceparent BeforePublish injected", id, d.Headers)
			}
			if d.Due.IsZero() || d.FiredAt.Before(d.Due) || !d.LeaseUntil.After(d.FiredAt) {
				t.Errorf("%s: due %v fired %v lease until %v", id, d.Due, d.FiredAt, d.LeaseUntil)
			}
			if id != "snooze" && d.Attempt != i+1 {
				t.Errorf("%s: delivery %d has attempt %d", id, i+1, d.Attempt)
			}
			if e.r.Duration <= 0 {
				t.Errorf("%s: duration %v", id, e.r.Duration)
			}
			if e.ctx.Value(ctxKey("span")) != "00-trace-"+id {
				t.Errorf("%s: DeliveryEnd did not get DeliveryStart's context", id)
			}
			switch e.r.Outcome {
			case ontime.OutcomeAcked:
				if e.r.Err != nil {
					t.Errorf("%s: acked with error %v", id, e.r.Err)
				}
			case ontime.OutcomeRetried:
				if e.r.Err == nil || e.r.Delay <= 0 {
					t.Errorf("%s: retried with err %v delay %v", id, e.r.Err, e.r.Delay)
				}
			case ontime.OutcomeSnoozed:
				if e.r.Delay != 10*time.Millisecond {
					t.Errorf("%s: snoozed for %v", id, e.r.Delay)
				}
			case ontime.OutcomeDeadLettered:
				if e.r.Reason != "rejected" || e.r.Err == nil {
					t.Errorf("%s: dead-lettered with reason %q err %v", id, e.r.Reason, e.r.Err)
				}
			}
		}
	}
	var pe *ontime.PanicError
	if first := h.ended["panic"][0]; !errors.As(first.r.Err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
		t.Errorf("panic: DeliveryResult.Err %v, want a *PanicError", first.r.Err)
	}
	if d := h.ended["retry-after"][0].r.Delay; d != 20*time.Millisecond {
		t.Errorf("retry-after: delay %v, want 20ms", d)
	}
	// Publish hooks: one event per Publish and one for the batch, each
	// with ids and results.
	var pubIDs []string
	for _, p := range h.published {
		if p.Err != nil || p.Topic != "app:jobs" || len(p.Results) != len(p.Timers) {
			t.Errorf("publish event %+v", p)
		}
		for i, tm := range p.Timers {
			pubIDs = append(pubIDs, tm.ID)
			if p.Results[i].ID != tm.ID || p.Results[i].Err != nil {
				t.Errorf("publish result %+v for %s", p.Results[i], tm.ID)
			}
		}
	}
	slices.Sort(pubIDs)
	wantIDs := slices.Clone(ids)
	slices.Sort(wantIDs)
	if !slices.Equal(pubIDs, wantIDs) {
		t.Errorf("publish hooks saw %v, want %v", pubIDs, wantIDs)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if seenHeaders[id] != "00-trace-"+id {
			t.Errorf("%s: the handler saw traceparent %q", id, seenHeaders[id])
		}
	}
}

// TestHooksLeaseLostAndReleased: a delivery whose lease is lost and one
// cancelled by a shutdown that ran out of time are reported as such.
func TestHooksLeaseLostAndReleased(t *testing.T) {
	t.Parallel()
	h := newRecorder()
	client, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet, Hooks: []any{h}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	err = ontime.Handle(w, "jobs", func(ctx context.Context, m *ontime.Message[string]) error {
		if m.ID == "lost" && m.Body == "x" {
			// Re-publishing the id takes the timer away from this delivery.
			if _, err := client.Publish(ctx, "jobs", "y", ontime.WithID(m.ID), ontime.In(time.Hour)); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return ctx.Err()
	}, &ontime.TopicOptions{Lease: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"lost", "stopped"} {
		if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID(id)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if e := h.next(t); e.d.ID != "lost" || e.r.Outcome != ontime.OutcomeLeaseLost || !errors.Is(e.r.Err, context.Canceled) {
		t.Errorf("lost: %s %v %v, want lease_lost", e.d.ID, e.r.Outcome, e.r.Err)
	}
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := w.Stop(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop: %v", err)
	}
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run: %v, want an unclean stop", err)
	}
	if e := h.next(t); e.d.ID != "stopped" || e.r.Outcome != ontime.OutcomeReleased {
		t.Errorf("stopped: %s %v, want released", e.d.ID, e.r.Outcome)
	}
}

// TestMiddleware: middleware run outermost first around the handler, see
// the delivery, can change the context and the result, and get a handler's
// panic as a *PanicError (here: a policy that dead-letters panics).
func TestMiddleware(t *testing.T) {
	t.Parallel()
	h := newRecorder()
	client, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet, Hooks: []any{h}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		trace []string
	)
	logMW := func(name string) ontime.Middleware {
		return func(ctx context.Context, d *ontime.Delivery, next func(context.Context) error) error {
			mu.Lock()
			trace = append(trace, name+" in "+d.ID)
			mu.Unlock()
			err := next(context.WithValue(ctx, ctxKey(name), true))
			mu.Lock()
			trace = append(trace, fmt.Sprintf("%s out %s: %v", name, d.ID, err))
			mu.Unlock()
			return err
		}
	}
	panicPolicy := func(ctx context.Context, d *ontime.Delivery, next func(context.Context) error) error {
		err := next(ctx)
		if pe := (*ontime.PanicError)(nil); errors.As(err, &pe) {
			return ontime.DeadLetter(err)
		}
		return err
	}
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet, Middleware: []ontime.Middleware{logMW("outer"), nil, logMW("inner"), panicPolicy}})
	err = ontime.Handle(w, "jobs", func(ctx context.Context, m *ontime.Message[string]) error {
		if ctx.Value(ctxKey("outer")) != true || ctx.Value(ctxKey("inner")) != true {
			return errors.New("the middleware's context did not reach the handler")
		}
		if m.ID == "p" {
			panic("kaboom")
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID("a")); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w, ctx)
	if e := h.next(t); e.r.Outcome != ontime.OutcomeAcked {
		t.Fatalf("a: %v %v", e.r.Outcome, e.r.Err)
	}
	if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID("p")); err != nil {
		t.Fatal(err)
	}
	if e := h.next(t); e.r.Outcome != ontime.OutcomeDeadLettered || e.r.Reason != "rejected" {
		t.Fatalf("p: %v %q %v, want dead-lettered by the panic policy", e.r.Outcome, e.r.Reason, e.r.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"outer in a", "inner in a", "inner out a: <nil>", "outer out a: <nil>",
		"outer in p", "inner in p",
	}
	if len(trace) != 8 || !slices.Equal(trace[:6], want) ||
		!strings.Contains(trace[6], "inner out p: ontime: dead-lettered: handler panicked: kaboom") ||
		!strings.Contains(trace[7], "outer out p: ontime: dead-lettered") {
		t.Errorf("middleware trace:\n%s", strings.Join(trace, "\n"))
	}
}

// TestTimeout: an attempt that runs past TopicOptions.Timeout fails, with
// ErrTimeout as its context's cause, whether the handler returns the
// context's error or ignores it and returns nil; the next attempt runs.
func TestTimeout(t *testing.T) {
	t.Parallel()
	h := newRecorder()
	client, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet, Hooks: []any{h}})
	if err != nil {
		t.Fatal(err)
	}
	causes := make(chan error, 10)
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	err = ontime.Handle(w, "jobs", func(ctx context.Context, m *ontime.Message[string]) error {
		if m.Attempt > 1 {
			return nil
		}
		if _, ok := ctx.Deadline(); !ok {
			return ontime.DeadLetter(errors.New("no deadline"))
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		if m.ID == "ignores" {
			return nil // too late: the attempt has failed
		}
		return ctx.Err()
	}, &ontime.TopicOptions{Timeout: 50 * time.Millisecond, Retry: ontime.RetryPolicy{MinDelay: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"returns", "ignores"} {
		if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID(id)); err != nil {
			t.Fatal(err)
		}
	}
	runWorker(t, w, ctx)
	got := map[string][]ontime.Outcome{}
	for range 4 {
		e := h.next(t)
		got[e.d.ID] = append(got[e.d.ID], e.r.Outcome)
		if e.r.Outcome == ontime.OutcomeRetried && !errors.Is(e.r.Err, ontime.ErrTimeout) {
			t.Errorf("%s: retried with %v, want an error wrapping ErrTimeout", e.d.ID, e.r.Err)
		}
	}
	for _, id := range []string{"returns", "ignores"} {
		if !slices.Equal(got[id], []ontime.Outcome{ontime.OutcomeRetried, ontime.OutcomeAcked}) {
			t.Errorf("%s: outcomes %v, want retried (timed out), then acked", id, got[id])
		}
	}
	for range 2 {
		if c := <-causes; !errors.Is(c, ontime.ErrTimeout) {
			t.Errorf("context cause %v, want ErrTimeout", c)
		}
	}
	if err := ontime.Handle(ontime.NewWorker(client, nil), "bad", func(context.Context, *ontime.Message[string]) error { return nil },
		&ontime.TopicOptions{Timeout: -time.Second}); !errors.Is(err, ontime.ErrInvalid) || !strings.Contains(err.Error(), "Timeout") {
		t.Errorf("negative Timeout: %v", err)
	}
}

// TestHookOrderAndValidation: hooks that start run in Config order, hooks
// that end in reverse; a value that implements no hook is refused.
func TestHookOrderAndValidation(t *testing.T) {
	t.Parallel()
	var order []string
	a, b := newRecorder(), newRecorder()
	a.name, a.order, b.name, b.order = "a", &order, "b", &order
	client, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet, Hooks: []any{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.Handle(w, "jobs", func(context.Context, *ontime.Message[string]) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Publish(context.Background(), "jobs", "x"); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w, context.Background())
	a.next(t)
	b.next(t)
	orderMu.Lock()
	got := slices.Clone(order)
	orderMu.Unlock()
	if want := []string{"a.before", "b.before", "b.after", "a.after", "a.start", "b.start", "b.end", "a.end"}; !slices.Equal(got, want) {
		t.Errorf("hook order %v, want %v", got, want)
	}
	if _, err := ontime.NewClient(openBolt(t), &ontime.Config{Hooks: []any{"not a hook"}}); !errors.Is(err, ontime.ErrInvalid) || !strings.Contains(err.Error(), "Hooks[0]") {
		t.Errorf("a hook that implements nothing: %v", err)
	}
}

type panicHook struct{}

func (panicHook) DeliveryStart(ctx context.Context, d *ontime.Delivery) context.Context {
	panic("start")
}

func (panicHook) DeliveryEnd(ctx context.Context, d *ontime.Delivery, r ontime.DeliveryResult) {
	panic("end")
}

// TestPanickingHookSparesTheWorker: a delivery hook that panics is logged;
// the delivery is handled and acked all the same.
func TestPanickingHookSparesTheWorker(t *testing.T) {
	t.Parallel()
	client, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet, Hooks: []any{panicHook{}}})
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{}, 1)
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.Handle(w, "jobs", func(context.Context, *ontime.Message[string]) error {
		handled <- struct{}{}
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID("a")); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w, ctx)
	select {
	case <-handled:
	case <-time.After(5 * time.Second):
		t.Fatal("not handled")
	}
	wait.For(t, 10*time.Second, func() bool {
		_, err := client.Get(ctx, "jobs", "a")
		return errors.Is(err, ontime.ErrNotFound)
	}, "the timer acked")
}
