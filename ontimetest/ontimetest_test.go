package ontimetest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimetest"
)

type invoice struct {
	ID     int    `json:"id"`
	Status string `json:"status"`
}

// handle is a handler whose outcome depends on the invoice's status.
func handle(ctx context.Context, m *ontime.Message[invoice]) error {
	switch m.Body.Status {
	case "paid":
		return nil
	case "pending":
		return ontime.Snooze(time.Hour)
	case "void":
		return ontime.Drop(errors.New("void"))
	case "disputed":
		return ontime.DeadLetter(errors.New("disputed"))
	case "later":
		return ontime.RetryAfter(time.Minute, errors.New("later"))
	case "panic":
		panic("bad invoice")
	case "slow":
		<-ctx.Done()
		return ctx.Err()
	case "ack by hand":
		return m.Ack(ctx)
	}
	return errors.New("unknown status")
}

// endHook records the delivery hooks' view.
type endHook struct {
	mu      sync.Mutex
	started int
	ended   []ontime.DeliveryResult
}

func (h *endHook) DeliveryStart(ctx context.Context, _ *ontime.Delivery) context.Context {
	h.mu.Lock()
	h.started++
	h.mu.Unlock()
	return ctx
}

func (h *endHook) DeliveryEnd(_ context.Context, _ *ontime.Delivery, r ontime.DeliveryResult) {
	h.mu.Lock()
	h.ended = append(h.ended, r)
	h.mu.Unlock()
}

func TestWorkOutcomes(t *testing.T) {
	ctx := context.Background()
	hook := &endHook{}
	var seen []string
	mw := func(ctx context.Context, d *ontime.Delivery, next func(context.Context) error) error {
		seen = append(seen, fmt.Sprintf("%s/%s/%d/%s", d.Topic, d.ID, d.Attempt, d.Headers["h"]))
		return next(ctx)
	}
	w, err := ontimetest.NewWorker(&ontimetest.Config{
		Middleware: []ontime.Middleware{mw},
		Hooks:      []any{hook},
		Defaults: ontime.TopicOptions{
			Retry:   ontime.RetryPolicy{MinDelay: time.Second, Jitter: -1, MaxAttempts: 3},
			Timeout: 20 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ontime.Handle(w, "invoices", handle, nil); err != nil {
		t.Fatal(err)
	}
	var pe *ontime.PanicError
	for _, c := range []struct {
		status  string
		attempt int
		outcome ontime.Outcome
		delay   time.Duration
		reason  string
		err     func(error) bool
	}{
		{"paid", 1, ontime.OutcomeAcked, 0, "", func(err error) bool { return err == nil }},
		{"pending", 1, ontime.OutcomeSnoozed, time.Hour, "", nil},
		{"void", 1, ontime.OutcomeDropped, 0, "", nil},
		{"disputed", 1, ontime.OutcomeDeadLettered, 0, "rejected", nil},
		{"later", 1, ontime.OutcomeRetried, time.Minute, "", nil},
		{"unknown", 1, ontime.OutcomeRetried, time.Second, "", nil},
		{"unknown", 2, ontime.OutcomeRetried, 2 * time.Second, "", nil},
		{"unknown", 3, ontime.OutcomeDeadLettered, 0, "max_attempts", nil},
		{"panic", 1, ontime.OutcomeRetried, time.Second, "", func(err error) bool { return errors.As(err, &pe) }},
		{"slow", 1, ontime.OutcomeRetried, time.Second, "", func(err error) bool { return errors.Is(err, ontime.ErrTimeout) }},
		{"ack by hand", 1, ontime.OutcomeAcked, 0, "", nil},
	} {
		name := fmt.Sprintf("%s/attempt %d", c.status, c.attempt)
		res, err := w.Work(ctx, "invoices", invoice{ID: 7, Status: c.status}, &ontimetest.Delivery{Attempt: c.attempt, Headers: map[string]string{"h": "v"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Outcome != c.outcome || res.Delay != c.delay || res.Reason != c.reason {
			t.Errorf("%s: %v, delay %v, reason %q; want %v, %v, %q", name, res.Outcome, res.Delay, res.Reason, c.outcome, c.delay, c.reason)
		}
		if c.err != nil && !c.err(res.Err) {
			t.Errorf("%s: err %v", name, res.Err)
		}
	}
	if n := len(seen); n != 11 || seen[0] != "invoices/ontimetest/1/v" {
		t.Errorf("middleware saw %d deliveries: %q", n, seen)
	}
	if hook.started != 11 || len(hook.ended) != 11 {
		t.Errorf("hooks: %d started, %d ended; want 11 each", hook.started, len(hook.ended))
	}
}

func TestWorkBadData(t *testing.T) {
	ctx := context.Background()
	w, err := ontimetest.NewWorker(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ontime.HandleTopics(w, "tenant-*", handle, nil); err != nil {
		t.Fatal(err)
	}
	// A body that does not decode into the handler's type.
	res, err := w.Work(ctx, "tenant-1", "not json", nil)
	if err != nil || res.Outcome != ontime.OutcomeDeadLettered || res.Reason != "undecodable" {
		t.Errorf("text into a struct: %+v, %v; want dead-lettered, undecodable", res, err)
	}
	// A stored payload that does not decode.
	res, err = w.Work(ctx, "tenant-2", nil, &ontimetest.Delivery{Payload: []byte("junk")})
	if err != nil || res.Outcome != ontime.OutcomeDeadLettered || res.Reason != "undecodable" {
		t.Errorf("junk payload: %+v, %v; want dead-lettered, undecodable", res, err)
	}
	// Leniently, a raw JSON payload is a body.
	res, err = w.Work(ctx, "tenant-3", nil, &ontimetest.Delivery{Payload: []byte(`{"id":1,"status":"paid"}`), Lenient: true})
	if err != nil || res.Outcome != ontime.OutcomeAcked {
		t.Errorf("legacy payload: %+v, %v; want acked", res, err)
	}
	// No handler; a body Publish would refuse.
	if _, err := w.Work(ctx, "other", invoice{}, nil); !errors.Is(err, ontime.ErrInvalid) {
		t.Errorf("no handler: %v, want ErrInvalid", err)
	}
	if _, err := w.Work(ctx, "tenant-1", func() {}, nil); !errors.Is(err, ontime.ErrInvalid) {
		t.Errorf("a func body: %v, want ErrInvalid", err)
	}
	// The store answers a manual settle with a lost lease.
	res, err = w.Work(ctx, "tenant-1", invoice{Status: "ack by hand"}, &ontimetest.Delivery{SettleErr: ontime.ErrLeaseLost})
	if err != nil || res.Outcome != ontime.OutcomeLeaseLost {
		t.Errorf("ack with the lease lost: %+v, %v; want lease lost", res, err)
	}
}

func TestNewMessage(t *testing.T) {
	ctx := context.Background()
	m, settled, err := ontimetest.NewMessage[invoice](ctx, invoice{ID: 3, Status: "paid"}, &ontimetest.Delivery{ID: "inv-3", Attempt: 2, Headers: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "inv-3" || m.Topic != "ontimetest" || m.Body.ID != 3 || m.Attempt != 2 || m.Headers["k"] != "v" || m.CorrelationID != "inv-3" || m.ContentType != "application/json" {
		t.Errorf("message %+v", m)
	}
	if _, ok := settled.Result(); ok {
		t.Error("settled before any manual settle")
	}
	if err := m.Snooze(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if r, ok := settled.Result(); !ok || r.Outcome != ontime.OutcomeSnoozed || r.Delay != 5*time.Second {
		t.Errorf("after Snooze: %+v, %v", r, ok)
	}
	if err := m.Ack(ctx); !errors.Is(err, ontime.ErrAlreadySettled) {
		t.Errorf("second settle: %v, want ErrAlreadySettled", err)
	}
	if _, _, err := ontimetest.NewMessage[invoice](ctx, "not json", nil); err == nil {
		t.Error("a body that does not decode into T built a message")
	}
	m2, settled2, err := ontimetest.NewMessage[string](ctx, "hi", &ontimetest.Delivery{Topic: "greetings"})
	if err != nil || m2.Body != "hi" || m2.Topic != "greetings" {
		t.Fatalf("string message: %+v, %v", m2, err)
	}
	if err := m2.DeadLetter(ctx, errors.New("no")); err != nil {
		t.Fatal(err)
	}
	if r, ok := settled2.Result(); !ok || r.Outcome != ontime.OutcomeDeadLettered || r.Reason != "rejected" || r.Err == nil {
		t.Errorf("after DeadLetter: %+v, %v", r, ok)
	}
}

// fakeTB records the failures of a Require call. Its Fatalf ends the
// goroutine that called it, as testing's does.
type fakeTB struct {
	testing.TB
	failures []string
}

func (f *fakeTB) Helper()                  {}
func (f *fakeTB) Context() context.Context { return context.Background() }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// run calls fn with a fakeTB on a goroutine of its own and returns the
// failures.
func run(fn func(tb testing.TB)) []string {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.failures
}

func TestRequirePublished(t *testing.T) {
	ctx := t.Context()
	c := ontimetest.NewClient(t, nil)
	due := time.Now().Add(time.Hour)
	if _, err := c.Publish(ctx, "invoices", invoice{ID: 1, Status: "due"}, ontime.WithID("inv-1"), ontime.At(due), ontime.WithHeader("tenant", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "invoices", "a note", ontime.WithID("note")); err != nil {
		t.Fatal(err)
	}
	ti := ontimetest.RequirePublished(t, c, "invoices", ontimetest.Want{
		Body: invoice{ID: 1, Status: "due"}, Headers: map[string]string{"tenant": "a"},
		DueAfter: due.Add(-time.Millisecond), DueBefore: due.Add(time.Millisecond),
	})
	if ti.ID != "inv-1" {
		t.Errorf("matched %q, want inv-1", ti.ID)
	}
	ontimetest.RequirePublished(t, c, "invoices", ontimetest.Want{ID: "note", Body: "a note"})
	ontimetest.RequireNotPublished(t, c, "invoices", ontimetest.Want{ID: "inv-2"})

	for name, fn := range map[string]func(testing.TB){
		"wrong body": func(tb testing.TB) {
			ontimetest.RequirePublished(tb, c, "invoices", ontimetest.Want{Body: invoice{ID: 2}})
		},
		"wrong header": func(tb testing.TB) {
			ontimetest.RequirePublished(tb, c, "invoices", ontimetest.Want{Headers: map[string]string{"tenant": "b"}})
		},
		"due too late": func(tb testing.TB) {
			ontimetest.RequirePublished(tb, c, "invoices", ontimetest.Want{ID: "inv-1", DueBefore: due.Add(-time.Minute)})
		},
		"empty topic":     func(tb testing.TB) { ontimetest.RequirePublished(tb, c, "nothing", ontimetest.Want{}) },
		"published after": func(tb testing.TB) { ontimetest.RequireNotPublished(tb, c, "invoices", ontimetest.Want{ID: "note"}) },
	} {
		failures := run(fn)
		if len(failures) != 1 {
			t.Errorf("%s: %d failures, want 1: %q", name, len(failures), failures)
			continue
		}
		if !strings.Contains(failures[0], "ontimetest:") {
			t.Errorf("%s: failure %q", name, failures[0])
		}
	}
}
