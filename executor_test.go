package ontime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/envelope"
	"github.com/ontime-go/ontime/ontimedriver"
)

// The executor's tests run it alone: no store, no claim loop, no worker.
// A sinkRecorder takes its settlements; a endRecorder hook its outcomes.

// sinkRecorder records the settlements the executor hands over and
// answers manual ones with reply.
type sinkRecorder struct {
	mu    sync.Mutex
	reqs  []settleReq
	reply error
}

func (s *sinkRecorder) submit(r settleReq) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
	if r.reply != nil {
		r.reply <- s.reply
	}
}

func (s *sinkRecorder) settlements() []ontimedriver.Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ontimedriver.Settlement, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = r.op
	}
	return out
}

// endRecorder is a pair of delivery hooks that records what they saw.
type endRecorder struct {
	starts int
	ends   []DeliveryResult
	infos  []Delivery
}

func (h *endRecorder) DeliveryStart(ctx context.Context, _ *Delivery) context.Context {
	h.starts++
	return ctx
}

func (h *endRecorder) DeliveryEnd(_ context.Context, d *Delivery, r DeliveryResult) {
	h.ends = append(h.ends, r)
	h.infos = append(h.infos, *d)
}

// execTest is an executor built on a sinkRecorder and an endRecorder.
type execTest struct {
	ex   *executor
	sink *sinkRecorder
	ends *endRecorder
}

func newExecTest(t *testing.T, h rawHandler, retry RetryPolicy, timeout time.Duration, mws ...Middleware) *execTest {
	t.Helper()
	x := &execTest{sink: &sinkRecorder{}, ends: &endRecorder{}}
	hooks, err := newHookSet([]any{x.ends})
	if err != nil {
		t.Fatal(err)
	}
	x.ex = newExecutor(executorConfig{
		topic: "t", handler: h, middleware: mws, hooks: &hooks,
		retry: retry.withDefaults(), timeout: timeout, log: quietLog, sink: x.sink,
	})
	return x
}

// delivery returns a delivery of a timer with body at attempt.
func (x *execTest) delivery(t *testing.T, body any, attempt int) *delivery {
	t.Helper()
	b, ct, err := encodeBody(body)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := envelope.AppendEncode(nil, "corr-1", ct, []envelope.Header{{Key: "k", Value: "v"}}, b)
	if err != nil {
		t.Fatal(err)
	}
	return x.raw(payload, attempt)
}

func (x *execTest) raw(payload []byte, attempt int) *delivery {
	now := time.Now()
	ct := ontimedriver.ClaimedTimer{ID: "x", Token: "tok", Due: now.Add(-time.Millisecond), Attempt: attempt, LeaseUntil: now.Add(time.Minute), Payload: payload}
	return x.ex.newDelivery(context.Background(), &ct, now, now.Add(time.Minute))
}

// only returns the one settlement and the one outcome of a delivery.
func (x *execTest) only(t *testing.T) (ontimedriver.Settlement, DeliveryResult) {
	t.Helper()
	ss := x.sink.settlements()
	if len(ss) != 1 || len(x.ends.ends) != 1 || x.ends.starts != 1 {
		t.Fatalf("%d settlements, %d starts, %d ends; want one each", len(ss), x.ends.starts, len(x.ends.ends))
	}
	if ss[0].ID != "x" || ss[0].Token != "tok" {
		t.Errorf("settlement fenced by %+v, want the delivery's lease", ss[0].Lease)
	}
	return ss[0], x.ends.ends[0]
}

type invoice struct {
	N int `json:"n"`
}

// TestExecutorOutcomes: each thing a handler can return or do becomes the
// settlement and the outcome it stands for.
func TestExecutorOutcomes(t *testing.T) {
	base := errors.New("boom")
	policy := RetryPolicy{MinDelay: time.Second, Jitter: -1, MaxAttempts: 3}
	cases := []struct {
		name    string
		attempt int
		ret     error
		want    ontimedriver.Settlement
		outcome Outcome
	}{
		{"ack", 1, nil, ontimedriver.Settlement{Kind: ontimedriver.Ack}, OutcomeAcked},
		{"error", 1, base, ontimedriver.Settlement{Kind: ontimedriver.Retry, Delay: time.Second, Error: "boom"}, OutcomeRetried},
		{"error at the last attempt", 3, base, ontimedriver.Settlement{Kind: ontimedriver.Dead, Reason: ontimedriver.ReasonMaxAttempts, Error: "boom"}, OutcomeDeadLettered},
		{"snooze", 1, Snooze(time.Minute), ontimedriver.Settlement{Kind: ontimedriver.Snooze, Delay: time.Minute}, OutcomeSnoozed},
		{"wrapped snooze", 1, fmt.Errorf("x: %w", Snooze(time.Minute)), ontimedriver.Settlement{Kind: ontimedriver.Snooze, Delay: time.Minute}, OutcomeSnoozed},
		{"drop", 1, Drop(base), ontimedriver.Settlement{Kind: ontimedriver.Ack}, OutcomeDropped},
		{"reject (deprecated: drop)", 1, Reject(base), ontimedriver.Settlement{Kind: ontimedriver.Ack}, OutcomeDropped},
		{"dead letter", 1, DeadLetter(base), ontimedriver.Settlement{Kind: ontimedriver.Dead, Reason: ontimedriver.ReasonRejected, Error: "boom"}, OutcomeDeadLettered},
		{"retry after", 1, RetryAfter(5*time.Second, base), ontimedriver.Settlement{Kind: ontimedriver.Retry, Delay: 5 * time.Second, Error: "boom"}, OutcomeRetried},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got *Message[invoice]
			x := newExecTest(t, typedRaw(func(_ context.Context, m *Message[invoice]) error {
				got = m
				return c.ret
			}), policy, 0)
			x.ex.execute(x.delivery(t, invoice{N: 7}, c.attempt))
			s, res := x.only(t)
			s.Lease = ontimedriver.Lease{}
			if s != c.want || res.Outcome != c.outcome {
				t.Errorf("settlement %+v, outcome %v; want %+v, %v", s, res.Outcome, c.want, c.outcome)
			}
			if got == nil || got.Body.N != 7 || got.CorrelationID != "corr-1" || got.Headers["k"] != "v" || got.Attempt != c.attempt || got.Topic != "t" {
				t.Errorf("the handler got %+v", got)
			}
			if info := x.ends.infos[0]; info.ID != "x" || info.CorrelationID != "corr-1" || info.Attempt != c.attempt {
				t.Errorf("the hooks saw %+v", info)
			}
		})
	}
}

// TestExecutorNoHandler: what must not reach the handler is dead-lettered
// with its reason, and the hooks still see it start and end.
func TestExecutorNoHandler(t *testing.T) {
	policy := RetryPolicy{MaxAttempts: 3}
	for _, c := range []struct {
		name    string
		payload []byte
		body    any
		attempt int
		reason  string
	}{
		{"envelope does not decode", []byte("junk"), nil, 1, ontimedriver.ReasonUndecodable},
		{"body does not decode into T", nil, "not json", 1, ontimedriver.ReasonUndecodable},
		{"past the last attempt", nil, invoice{}, 4, ontimedriver.ReasonMaxAttempts},
	} {
		t.Run(c.name, func(t *testing.T) {
			called := false
			x := newExecTest(t, typedRaw(func(context.Context, *Message[invoice]) error {
				called = true
				return nil
			}), policy, 0)
			d := x.raw(c.payload, c.attempt)
			if c.payload == nil {
				d = x.delivery(t, c.body, c.attempt)
			}
			x.ex.execute(d)
			s, res := x.only(t)
			if called {
				t.Error("the handler ran")
			}
			if s.Kind != ontimedriver.Dead || s.Reason != c.reason || s.Error == "" {
				t.Errorf("settlement %+v, want dead with reason %s", s, c.reason)
			}
			if res.Outcome != OutcomeDeadLettered || res.Reason != c.reason || res.Err == nil {
				t.Errorf("outcome %+v", res)
			}
		})
	}
}

// TestExecutorPanicAndTimeout: a panic fails the attempt with a
// *PanicError; an attempt past its Timeout fails with ErrTimeout.
func TestExecutorPanicAndTimeout(t *testing.T) {
	policy := RetryPolicy{MinDelay: time.Second, Jitter: -1}
	x := newExecTest(t, typedRaw(func(context.Context, *Message[[]byte]) error { panic("kaboom") }), policy, 0)
	x.ex.execute(x.delivery(t, []byte("b"), 1))
	s, res := x.only(t)
	var pe *PanicError
	if s.Kind != ontimedriver.Retry || !errors.As(res.Err, &pe) || pe.Value != "kaboom" {
		t.Errorf("panic: %+v, %+v", s, res)
	}

	x = newExecTest(t, typedRaw(func(ctx context.Context, _ *Message[[]byte]) error {
		<-ctx.Done()
		return ctx.Err()
	}), policy, 10*time.Millisecond)
	x.ex.execute(x.delivery(t, []byte("b"), 1))
	s, res = x.only(t)
	if s.Kind != ontimedriver.Retry || !errors.Is(res.Err, ErrTimeout) || res.Outcome != OutcomeRetried {
		t.Errorf("timeout: %+v, %+v", s, res)
	}
}

// TestExecutorManualAndLost: a manual settle decides the outcome (and is
// sent once); a lease lost while the handler ran sends nothing.
func TestExecutorManualAndLost(t *testing.T) {
	x := newExecTest(t, typedRaw(func(ctx context.Context, m *Message[[]byte]) error {
		if err := m.Ack(ctx); err != nil {
			return err
		}
		if err := m.Ack(ctx); !errors.Is(err, ErrAlreadySettled) {
			return fmt.Errorf("second Ack: %v", err)
		}
		return errors.New("ignored")
	}), RetryPolicy{}, 0)
	x.ex.execute(x.delivery(t, []byte("b"), 1))
	if s, res := x.only(t); s.Kind != ontimedriver.Ack || res.Outcome != OutcomeAcked {
		t.Errorf("manual ack: %+v, %+v", s, res)
	}

	x = newExecTest(t, typedRaw(func(ctx context.Context, m *Message[[]byte]) error {
		return m.Drop(ctx, errors.New("no"))
	}), RetryPolicy{}, 0)
	x.sink.reply = ErrLeaseLost
	x.ex.execute(x.delivery(t, []byte("b"), 1))
	if s, res := x.only(t); s.Kind != ontimedriver.Ack || res.Outcome != OutcomeLeaseLost {
		t.Errorf("manual reject, lease lost: %+v, %+v", s, res)
	}

	var d *delivery
	x = newExecTest(t, typedRaw(func(context.Context, *Message[[]byte]) error {
		d.lost.Store(true) // as the lease keeper does
		return nil
	}), RetryPolicy{}, 0)
	d = x.delivery(t, []byte("b"), 1)
	x.ex.execute(d)
	if ss := x.sink.settlements(); len(ss) != 0 || len(x.ends.ends) != 1 || x.ends.ends[0].Outcome != OutcomeLeaseLost {
		t.Errorf("lost lease: settlements %+v, outcomes %+v; want none, lease_lost", ss, x.ends.ends)
	}
}

// TestExecutorMiddlewareReleaseForced: middleware sees the delivery and
// can change the outcome; a release hands the timer back without hooks;
// a handler cancelled by a stop that ran out of time is released.
func TestExecutorMiddlewareReleaseForced(t *testing.T) {
	var seen string
	mw := func(ctx context.Context, d *Delivery, next func(context.Context) error) error {
		seen = d.ID + "/" + d.CorrelationID
		if err := next(ctx); err != nil {
			return DeadLetter(err)
		}
		return nil
	}
	x := newExecTest(t, typedRaw(func(context.Context, *Message[[]byte]) error { return errors.New("bad") }), RetryPolicy{}, 0, mw)
	x.ex.execute(x.delivery(t, []byte("b"), 1))
	if s, _ := x.only(t); s.Kind != ontimedriver.Dead || s.Reason != ontimedriver.ReasonRejected || seen != "x/corr-1" {
		t.Errorf("middleware: %+v, saw %q", s, seen)
	}

	x = newExecTest(t, nil, RetryPolicy{}, 0)
	x.ex.release(x.delivery(t, []byte("b"), 1))
	if ss := x.sink.settlements(); len(ss) != 1 || ss[0].Kind != ontimedriver.Snooze || ss[0].Delay != 0 || x.ends.starts != 0 {
		t.Errorf("release: %+v, %d hook starts", ss, x.ends.starts)
	}

	var d *delivery
	x = newExecTest(t, typedRaw(func(ctx context.Context, _ *Message[[]byte]) error {
		d.ex.forced.Store(true) // as a stop that runs out of time does
		d.cancel()
		return ctx.Err()
	}), RetryPolicy{}, 0)
	d = x.delivery(t, []byte("b"), 1)
	x.ex.execute(d)
	if s, res := x.only(t); s.Kind != ontimedriver.Snooze || s.Delay != 0 || res.Outcome != OutcomeReleased {
		t.Errorf("forced stop: %+v, %+v", s, res)
	}
}

// TestSettlementFor: the mapping of a handler's error to a settlement, and
// the retry policy's limits (RetryForever) on it.
func TestSettlementFor(t *testing.T) {
	x := newExecTest(t, nil, RetryPolicy{MaxAttempts: RetryForever}, 0)
	d := x.delivery(t, nil, 1000)
	if got := x.ex.settlementFor(d, errors.New("boom")); got.Kind != ontimedriver.Retry {
		t.Errorf("MaxAttempts -1 at attempt 1000: %+v", got)
	}
	if got := x.ex.settlementFor(d, &undecodableError{errors.New("boom")}); got.Kind != ontimedriver.Dead || got.Reason != ontimedriver.ReasonUndecodable || got.Error != "body does not decode: boom" {
		t.Errorf("undecodable: %+v", got)
	}
	if got := x.ex.settlementFor(d, DeadLetter(nil)); got.Kind != ontimedriver.Dead || got.Error != "" {
		t.Errorf("DeadLetter(nil): %+v", got)
	}
}

// panicStart panics in DeliveryStart and counts its DeliveryEnd calls.
type panicStart struct{ ends int }

func (*panicStart) DeliveryStart(context.Context, *Delivery) context.Context { panic("start") }
func (p *panicStart) DeliveryEnd(context.Context, *Delivery, DeliveryResult) { p.ends++ }

// panicEnd panics in DeliveryEnd.
type panicEnd struct{}

func (panicEnd) DeliveryEnd(context.Context, *Delivery, DeliveryResult) { panic("end") }

// inFlight counts deliveries started and not ended, as a metrics hook's
// in-flight gauge does.
type inFlight struct{ n, starts int }

func (g *inFlight) DeliveryStart(ctx context.Context, _ *Delivery) context.Context {
	g.n++
	g.starts++
	return ctx
}
func (g *inFlight) DeliveryEnd(context.Context, *Delivery, DeliveryResult) { g.n-- }

// TestDeliveryHooksPaired: a delivery hook that panics does not keep the
// others from running, so every hook's start is paired with its end and
// an in-flight gauge returns to zero, whichever hook panics and wherever
// the hooks sit in the list, for handled deliveries and for those
// dead-lettered without a handler.
func TestDeliveryHooksPaired(t *testing.T) {
	for _, c := range []struct {
		name  string
		order func(p *panicStart, g *inFlight) []any
	}{
		{"panicking start first", func(p *panicStart, g *inFlight) []any { return []any{p, g} }},
		{"panicking start last", func(p *panicStart, g *inFlight) []any { return []any{g, p} }},
		{"panicking end first", func(_ *panicStart, g *inFlight) []any { return []any{g, panicEnd{}} }},
		{"panicking end last", func(_ *panicStart, g *inFlight) []any { return []any{panicEnd{}, g} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, g := &panicStart{}, &inFlight{}
			hooks, err := newHookSet(c.order(p, g))
			if err != nil {
				t.Fatal(err)
			}
			sink := &sinkRecorder{}
			ex := newExecutor(executorConfig{
				topic: "t", handler: typedRaw(func(context.Context, *Message[string]) error { return nil }),
				hooks: &hooks, retry: RetryPolicy{}.withDefaults(), log: quietLog, sink: sink,
			})
			x := &execTest{ex: ex, sink: sink}
			x.ex.execute(x.delivery(t, "body", 1))
			x.ex.execute(x.raw([]byte("junk"), 1)) // dead-lettered, no handler
			if g.starts != 2 || g.n != 0 {
				t.Errorf("in-flight gauge: %d starts, %d in flight after both ended; want 2, 0", g.starts, g.n)
			}
			if ss := sink.settlements(); len(ss) != 2 || ss[0].Kind != ontimedriver.Ack || ss[1].Kind != ontimedriver.Dead {
				t.Errorf("settlements %+v, want an ack and a dead letter", ss)
			}
		})
	}
}
