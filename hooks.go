package ontime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Delivery describes one delivery of a timer to a handler, as middleware
// and hooks see it. It is built by the worker; treat it as read-only.
type Delivery struct {
	// Topic is the full topic (Client and Router prefixes applied).
	Topic string
	// ID is the timer id.
	ID string
	// Attempt is 1 on the first delivery and grows with each retry (always
	// 1 with a store that keeps no attempt counter).
	Attempt int
	// Due is the instant the timer was due, as the store reports it (with
	// the faststream-compatible layout: the instant it became claimable).
	Due time.Time
	// FiredAt is the store's clock when the worker claimed the timer.
	// FiredAt.Sub(Due) is how late the timer fired; it is never negative
	// (a negative value would mean the timer fired early).
	FiredAt time.Time
	// LeaseUntil is the lease deadline at claim time (on the store's clock).
	LeaseUntil time.Time
	// CorrelationID is the envelope's correlation id (the timer id when the
	// envelope has none).
	CorrelationID string
	// ContentType is the envelope's content type.
	ContentType string
	// Headers are the user headers the publisher set (not correlation_id
	// or content-type), such as a W3C traceparent a tracing hook injected
	// at publish. Nil when there are none. Do not modify.
	Headers map[string]string
	// Tick is a recurring timer's tick (zero for a plain timer).
	Tick Tick
}

// DeliveryResult is how a delivery ended, as DeliveryEndHook sees it.
type DeliveryResult struct {
	// Outcome is what the worker asked the store to do with the timer. The
	// store applies it asynchronously, fenced by the lease token; a settle
	// the store refuses (the lease was lost meanwhile) or never receives (an
	// outage longer than the lease) is logged, and the timer is delivered
	// again.
	Outcome Outcome
	// Err is the error the handler (through its middleware) returned, or
	// the panic (a *PanicError), the timeout (wrapping ErrTimeout) or the
	// decoding error that ended the attempt; nil when it succeeded. After a
	// manual Nack, Reject or DeadLetter it is the error given to it.
	Err error
	// Duration is how long the middleware and the handler ran (zero when
	// the stored envelope did not decode and no handler ran).
	Duration time.Duration
	// Delay is how long until the timer is due again, for OutcomeRetried
	// and OutcomeSnoozed.
	Delay time.Duration
	// Reason is the dead-letter reason, for OutcomeDeadLettered.
	Reason string
}

// Middleware runs around every handler call of a Worker: it gets the
// handler's context and delivery and calls next to run the rest of the
// chain (the next middleware, then the handler), or does not call it to
// skip the handler. What it returns is the handler's result as far as the
// worker is concerned, so a middleware can log, time, trace, add values to
// the context, turn errors into outcomes (return Drop(err), DeadLetter,
// Snooze, RetryAfter) or apply a panic policy: a handler's panic reaches the
// middleware as an error of type *PanicError.
//
// Middleware must call next at most once and return after it returns.
// WorkerConfig.Middleware lists them outermost first.
type Middleware func(ctx context.Context, d *Delivery, next func(ctx context.Context) error) error

// PanicError is the error a handler's panic becomes. The worker logs it
// with its stack; middleware can recognise it with errors.As.
type PanicError struct {
	// Value is what the handler passed to panic.
	Value any
	// Stack is the handler goroutine's stack at the panic.
	Stack []byte
}

// Error returns "handler panicked: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// ErrTimeout is the cause of a handler's context ending at
// TopicOptions.Timeout (context.Cause), and is wrapped by the error an
// attempt that ran past its Timeout fails with.
var ErrTimeout = errors.New("ontime: handler timed out")

// BeforePublishHook is called by Publish and PublishBatch once the topic is
// valid and every timer has its id, before the timers are encoded and
// written. It may set or change each timer's Headers (a tracing hook
// injects a W3C traceparent there; the maps are the hook's to change, never
// the caller's). The context it returns is used for the store call and
// passed to AfterPublishHook.
type BeforePublishHook interface {
	BeforePublish(ctx context.Context, p *PublishEvent) context.Context
}

// AfterPublishHook is called by Publish and PublishBatch after the store
// call (or after the timers were refused before it), with PublishEvent's
// Results and Err set. It is called whenever BeforePublish was.
type AfterPublishHook interface {
	AfterPublish(ctx context.Context, p *PublishEvent)
}

// DeliveryStartHook is called when a worker is about to handle a claimed
// timer, before its middleware and handler. The context it returns is the
// one they receive, and the one DeliveryEndHook gets. A timer a worker
// claimed but hands back unstarted at shutdown is not delivered: no hook is
// called for it.
type DeliveryStartHook interface {
	DeliveryStart(ctx context.Context, d *Delivery) context.Context
}

// DeliveryEndHook is called once a delivery's outcome is decided, after the
// handler returned (or its manual Ack, Nack, Reject, DeadLetter or Snooze
// was answered), before the outcome is sent to the store. It is called for
// every delivery DeliveryStartHook saw, including the ones whose stored
// envelope does not decode (OutcomeDeadLettered, reason "undecodable", no
// handler run).
type DeliveryEndHook interface {
	DeliveryEnd(ctx context.Context, d *Delivery, r DeliveryResult)
}

// PublishEvent is one Publish or PublishBatch call, as publish hooks see it.
type PublishEvent struct {
	// Topic is the full topic (with the Client's prefix).
	Topic string
	// Timers are the timers to write, in order, each with its ID filled in
	// (a random UUID where the caller gave none). BeforePublishHook may
	// change their Headers; other changes are ignored.
	Timers []Timer
	// IfAbsent is true for IfAbsent and BatchIfAbsent.
	IfAbsent bool
	// Results is set for AfterPublishHook: one per timer written (fewer
	// than Timers when a larger batch failed part-way; none when the call
	// failed before writing). A result whose Err is nil is a timer written.
	Results []PublishResult
	// Err is set for AfterPublishHook: the call's error, if any.
	Err error
}

// hookSet holds a Client's hooks, sorted by kind.
type hookSet struct {
	beforePublish []BeforePublishHook
	afterPublish  []AfterPublishHook
	start         []DeliveryStartHook
	end           []DeliveryEndHook
	store         []StoreCallHook
	unfired       []UnfiredTicksHook
}

func newHookSet(hooks []any) (hookSet, error) {
	var s hookSet
	for i, h := range hooks {
		n := 0
		if x, ok := h.(BeforePublishHook); ok {
			s.beforePublish = append(s.beforePublish, x)
			n++
		}
		if x, ok := h.(AfterPublishHook); ok {
			s.afterPublish = append(s.afterPublish, x)
			n++
		}
		if x, ok := h.(DeliveryStartHook); ok {
			s.start = append(s.start, x)
			n++
		}
		if x, ok := h.(DeliveryEndHook); ok {
			s.end = append(s.end, x)
			n++
		}
		if x, ok := h.(StoreCallHook); ok {
			s.store = append(s.store, x)
			n++
		}
		if x, ok := h.(UnfiredTicksHook); ok {
			s.unfired = append(s.unfired, x)
			n++
		}
		if n == 0 {
			return s, invalidf("Config.Hooks[%d] (%T) implements none of BeforePublishHook, AfterPublishHook, DeliveryStartHook, DeliveryEndHook, StoreCallHook, UnfiredTicksHook", i, h)
		}
	}
	return s, nil
}

func (s *hookSet) publishHooks() bool { return len(s.beforePublish)+len(s.afterPublish) > 0 }

func (s *hookSet) deliveryHooks() bool { return len(s.start)+len(s.end) > 0 }

func (s *hookSet) before(ctx context.Context, p *PublishEvent) context.Context {
	for _, h := range s.beforePublish {
		ctx = h.BeforePublish(ctx, p)
	}
	return ctx
}

func (s *hookSet) after(ctx context.Context, p *PublishEvent) {
	for i := len(s.afterPublish) - 1; i >= 0; i-- {
		s.afterPublish[i].AfterPublish(ctx, p)
	}
}

// deliveryStart runs the DeliveryStart hooks in order, each with the
// context the one before it returned. A hook that panics is passed to
// panicked and skipped (the context stays as it was); the hooks after it
// still run, so that every hook's start is paired with its end (an
// in-flight gauge must not drift).
func (s *hookSet) deliveryStart(ctx context.Context, d *Delivery, panicked func(hook, p any)) context.Context {
	for _, h := range s.start {
		ctx = startHook(ctx, h, d, panicked)
	}
	return ctx
}

func startHook(ctx context.Context, h DeliveryStartHook, d *Delivery, panicked func(hook, p any)) (out context.Context) {
	out = ctx
	defer func() {
		if p := recover(); p != nil {
			panicked(h, p)
		}
	}()
	return h.DeliveryStart(ctx, d)
}

// deliveryEnd runs the DeliveryEnd hooks in reverse order; a hook that
// panics is passed to panicked, and the others still run.
func (s *hookSet) deliveryEnd(ctx context.Context, d *Delivery, r DeliveryResult, panicked func(hook, p any)) {
	for i := len(s.end) - 1; i >= 0; i-- {
		endHook(ctx, s.end[i], d, r, panicked)
	}
}

func endHook(ctx context.Context, h DeliveryEndHook, d *Delivery, r DeliveryResult, panicked func(hook, p any)) {
	defer func() {
		if p := recover(); p != nil {
			panicked(h, p)
		}
	}()
	h.DeliveryEnd(ctx, d, r)
}
