package ontime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime/envelope"
	"github.com/ontime-go/ontime/ontimedriver"
)

// executor runs one claimed timer to its outcome: it decodes the stored
// envelope, runs the delivery hooks, the middleware and the handler, maps
// what they returned (or what a manual Ack, Nack, Drop, DeadLetter or
// Snooze asked for) to a settlement, and hands that to its settle sink. It
// knows neither the store nor the claim loop: the claim loop (claimloop.go)
// gives it deliveries, the settler (settler.go) takes its settlements, so
// it can be run, and tested, with no store at all.
type executor struct {
	topic      string
	handler    rawHandler
	middleware []Middleware
	hooks      *hookSet
	retry      RetryPolicy
	timeout    time.Duration
	lenient    bool // decode payloads leniently (see decodePayload)
	log        *slog.Logger
	sink       settleSink
	// forced is set when a stop ran out of time and cancelled the
	// running handlers: a handler that returns because of it is
	// released (due again at once, the attempt not counted), not failed.
	forced atomic.Bool
}

// settleSink takes the settlements of a topic's deliveries (the settler).
type settleSink interface {
	submit(settleReq)
}

// executorConfig is what an executor is built from.
type executorConfig struct {
	topic      string
	handler    rawHandler
	middleware []Middleware
	hooks      *hookSet
	retry      RetryPolicy // with its defaults filled in
	timeout    time.Duration
	lenient    bool
	log        *slog.Logger
	sink       settleSink
}

func newExecutor(c executorConfig) *executor {
	return &executor{
		topic: c.topic, handler: c.handler, middleware: c.middleware, hooks: c.hooks,
		retry: c.retry, timeout: c.timeout, lenient: c.lenient, log: c.log, sink: c.sink,
	}
}

// delivery is one claimed timer while this worker holds it: what the
// executor runs, and what the lease keeper extends and watches.
type delivery struct {
	ex      *executor
	t       ontimedriver.ClaimedTimer
	firedAt time.Time // the store's clock at the claim
	info    Delivery  // what middleware and hooks see
	ctx     context.Context
	cancel  context.CancelFunc
	settled atomic.Bool
	lost    atomic.Bool
	// manual is the outcome of a manual settle (Message.Ack, ...).
	manual atomic.Pointer[manualOutcome]
	// deadline is the lease deadline on the local clock (UnixNano),
	// measured from when the claim or the last successful extension was
	// sent, so never later than the store's.
	deadline atomic.Int64
}

// newDelivery returns the delivery of a claimed timer, fired at storeNow
// (the store's clock at the claim), whose lease runs out at deadline on
// the local clock, with a handler context that is a child of base.
func (e *executor) newDelivery(base context.Context, t *ontimedriver.ClaimedTimer, storeNow, deadline time.Time) *delivery {
	d := &delivery{ex: e, t: *t, firedAt: storeNow}
	d.deadline.Store(deadline.UnixNano())
	d.ctx, d.cancel = context.WithCancel(base)
	return d
}

// execute runs a delivery to its outcome and hands the settlement to the
// sink (unless the lease was lost meanwhile, or a manual settle already
// did). It returns, once the outcome is decided, what the DeliveryEnd
// hooks saw; the store applies the outcome later.
func (e *executor) execute(d *delivery) DeliveryResult {
	d.info = Delivery{
		Topic: e.topic, ID: d.t.ID, Attempt: d.t.Attempt, Due: d.t.Due,
		FiredAt: d.firedAt, LeaseUntil: d.t.LeaseUntil, Tick: tickOf(&d.t),
	}
	env, err := decodePayload(e.lenient, d.t.Payload)
	if err != nil {
		e.log.Error("ontime: stored envelope does not decode; dead-lettering it", "topic", e.topic, "id", d.t.ID, "err", err)
		d.info.CorrelationID = d.t.ID
		return e.endWithoutHandler(d, deadSettlement(ontimedriver.ReasonUndecodable, err), err)
	}
	d.info.CorrelationID, d.info.ContentType, d.info.Headers = splitHeaders(env, d.t.ID)
	if d.t.Attempt > 1 && e.retry.exhausted(d.t.Attempt-1) {
		// Earlier deliveries used up MaxAttempts without an outcome: the
		// process died in them (a message that crashes its handler's
		// process) or their leases ran out. Running it again could crash
		// the process again: dead-letter it.
		err := fmt.Errorf("attempt %d of at most %d: the earlier deliveries ended without an outcome (process killed or crashed, or lease ran out)", d.t.Attempt, e.retry.MaxAttempts)
		e.log.Warn("ontime: past the last attempt without an outcome; dead-lettering", "topic", e.topic, "id", d.t.ID, "attempt", d.t.Attempt)
		return e.endWithoutHandler(d, deadSettlement(ontimedriver.ReasonMaxAttempts, err), err)
	}
	ctx := d.ctx
	if len(e.hooks.start) > 0 {
		ctx = e.hookStart(ctx, d)
	}
	hctx, cancelTimeout := ctx, context.CancelFunc(nil)
	if e.timeout > 0 {
		hctx, cancelTimeout = context.WithTimeoutCause(ctx, e.timeout, ErrTimeout)
	}
	start := time.Now()
	err = e.call(hctx, d, env)
	res := DeliveryResult{Err: err, Duration: time.Since(start)}
	timedOut := false
	if cancelTimeout != nil {
		timedOut = errors.Is(context.Cause(hctx), ErrTimeout)
		cancelTimeout()
	}
	var s ontimedriver.Settlement
	settle := false
	switch {
	case d.settled.Load():
		// Settled by hand: the manual call decided the outcome.
		if m := d.manual.Load(); m != nil {
			res.Outcome, res.Delay, res.Reason = m.outcome, m.delay, m.reason
			if m.err != nil {
				res.Err = m.err
			}
		}
	case d.lost.Load():
		// The heartbeat round or lease watch that found the lease lost
		// logged it (one line for all the leases it lost).
		e.log.Debug("ontime: lease lost while the handler ran; its result is not acked", "topic", e.topic, "id", d.t.ID)
		res.Outcome = OutcomeLeaseLost
	default:
		s, res.Outcome, res.Err = e.decide(d, err, timedOut)
		res.Delay, res.Reason = s.Delay, s.Reason
		settle = true
	}
	if len(e.hooks.end) > 0 {
		e.hookEnd(ctx, d, res)
	}
	if settle {
		e.settle(d, s, nil)
	}
	return res
}

// endWithoutHandler dead-letters a delivery whose handler must not run
// (its envelope does not decode, or it is past its last attempt): the
// delivery hooks see it start and end, and s goes to the store.
func (e *executor) endWithoutHandler(d *delivery, s ontimedriver.Settlement, err error) DeliveryResult {
	res := DeliveryResult{Outcome: OutcomeDeadLettered, Err: err, Reason: s.Reason}
	if e.hooks.deliveryHooks() {
		ctx := e.hookStart(d.ctx, d)
		e.hookEnd(ctx, d, res)
	}
	e.settle(d, s, nil)
	return res
}

// release hands a claimed timer back unstarted (a stop began before its
// handler did): due again at once, the attempt not counted. No hook sees
// it: it was not delivered.
func (e *executor) release(d *delivery) {
	e.settle(d, ontimedriver.Settlement{Kind: ontimedriver.Snooze}, nil)
}

// settle sends a delivery's settlement to the store, unless the delivery
// was settled already (then it reports false).
func (e *executor) settle(d *delivery, s ontimedriver.Settlement, reply chan error) bool {
	if d.settled.Swap(true) {
		return false
	}
	e.submit(d, s, reply)
	return true
}

// submit is the one way out of the executor: every settlement of a
// delivery (the handler's outcome, a manual one, a release, a dead letter
// of bad data) goes to the store from here, once per delivery, in one
// Settle call with whatever else the settler has queued. A settlement that
// must carry more than the outcome (a recurring timer's next tick, armed
// in the same fenced call) is completed here. reply, if not nil, gets the
// store's answer for it.
func (e *executor) submit(d *delivery, s ontimedriver.Settlement, reply chan error) {
	s.Lease = ontimedriver.Lease{ID: d.t.ID, Token: d.t.Token}
	e.withNextTick(d, &s)
	e.sink.submit(settleReq{op: s, deadline: d.deadline.Load(), reply: reply})
}

// hookStart runs the DeliveryStart hooks. A hook that panics is logged and
// skipped, and the others run: a worker must not die of a hook, and every
// hook's start is paired with its end.
func (e *executor) hookStart(ctx context.Context, d *delivery) context.Context {
	return e.hooks.deliveryStart(ctx, &d.info, func(h, p any) {
		e.log.Error("ontime: a DeliveryStartHook panicked", "hook", fmt.Sprintf("%T", h), "topic", e.topic, "id", d.t.ID, "panic", fmt.Sprint(p))
	})
}

// hookEnd runs the DeliveryEnd hooks; a panic is logged, as in hookStart.
func (e *executor) hookEnd(ctx context.Context, d *delivery, res DeliveryResult) {
	e.hooks.deliveryEnd(ctx, &d.info, res, func(h, p any) {
		e.log.Error("ontime: a DeliveryEndHook panicked", "hook", fmt.Sprintf("%T", h), "topic", e.topic, "id", d.t.ID, "panic", fmt.Sprint(p))
	})
}

// call runs the middleware and the handler. A panic in the handler becomes
// a *PanicError the middleware sees; a panic in a middleware becomes one
// too.
func (e *executor) call(ctx context.Context, d *delivery, env *envelope.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = e.panicked(d, p)
		}
	}()
	inner := func(ctx context.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = e.panicked(d, p)
			}
		}()
		return e.handler(ctx, d, env)
	}
	if len(e.middleware) == 0 {
		return inner(ctx)
	}
	next := inner
	for i := len(e.middleware) - 1; i >= 0; i-- {
		mw, n := e.middleware[i], next
		next = func(ctx context.Context) error { return mw(ctx, &d.info, n) }
	}
	return next(ctx)
}

// panicked logs a recovered panic and returns it as an error.
func (e *executor) panicked(d *delivery, p any) error {
	stack := debug.Stack()
	e.log.Error("ontime: handler panicked", "topic", e.topic, "id", d.t.ID, "panic", fmt.Sprint(p), "stack", string(stack))
	return &PanicError{Value: p, Stack: stack}
}

// forceStop records that a stop ran out of time and is cancelling the
// running handlers.
func (e *executor) forceStop() { e.forced.Store(true) }

// forcedStop reports whether d's context ended because a stop ran out of
// time.
func (e *executor) forcedStop(d *delivery) bool { return e.forced.Load() && d.ctx.Err() != nil }

// decide maps a handler's result to what happens to the timer, the outcome
// hooks report and the error that ended the attempt. An attempt that ran
// past the timeout has failed, whatever the handler returned (with an
// error wrapping ErrTimeout), unless a stop that ran out of time cancelled
// it (then it is released).
func (e *executor) decide(d *delivery, err error, timedOut bool) (ontimedriver.Settlement, Outcome, error) {
	forced := e.forcedStop(d)
	if timedOut && !forced {
		terr := fmt.Errorf("%w after %s", ErrTimeout, e.timeout)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			terr = fmt.Errorf("%w after %s: %w", ErrTimeout, e.timeout, err)
		}
		s := e.failure(d, terr, -1)
		return s, outcomeOfKind(s.Kind), terr
	}
	s := e.settlementFor(d, err)
	oe := outcomeIn(err)
	_, dropped := oe.(*DropError)
	_, snoozed := oe.(*SnoozeError)
	switch {
	case s.Kind == ontimedriver.Ack && dropped:
		return s, OutcomeDropped, err
	case s.Kind == ontimedriver.Snooze && forced && !snoozed:
		return s, OutcomeReleased, err
	}
	return s, outcomeOfKind(s.Kind), err
}

// outcomeOfKind is the outcome a settlement kind reports (an Ack of a
// dropped timer, and the release of a cancelled one, are told apart by
// the caller).
func outcomeOfKind(k ontimedriver.SettleKind) Outcome {
	switch k {
	case ontimedriver.Ack:
		return OutcomeAcked
	case ontimedriver.Retry:
		return OutcomeRetried
	case ontimedriver.Snooze:
		return OutcomeSnoozed
	}
	return OutcomeDeadLettered
}

// settlementFor maps a handler's result to what happens to the timer.
func (e *executor) settlementFor(d *delivery, err error) ontimedriver.Settlement {
	if err == nil {
		return ontimedriver.Settlement{Kind: ontimedriver.Ack}
	}
	switch o := outcomeIn(err).(type) {
	case *SnoozeError:
		return ontimedriver.Settlement{Kind: ontimedriver.Snooze, Delay: max(o.Delay, 0)}
	case *DropError:
		e.logDrop(d, o.Err)
		return ontimedriver.Settlement{Kind: ontimedriver.Ack}
	case *DeadLetterError:
		return deadSettlement(ontimedriver.ReasonRejected, o.Err)
	case *RetryAfterError:
		return e.failure(d, o.Err, max(o.Delay, 0))
	}
	var ue *undecodableError
	if errors.As(err, &ue) {
		e.log.Error("ontime: message body does not decode; dead-lettering it", "topic", e.topic, "id", d.t.ID, "err", err)
		return deadSettlement(ontimedriver.ReasonUndecodable, err)
	}
	if e.forcedStop(d) {
		// Cancelled by a stop that ran out of time: due again at once,
		// and the attempt does not count.
		return ontimedriver.Settlement{Kind: ontimedriver.Snooze}
	}
	return e.failure(d, err, -1)
}

// failure counts a failed attempt: retry after delay (the policy's backoff
// when delay < 0), or dead-letter past MaxAttempts.
func (e *executor) failure(d *delivery, err error, delay time.Duration) ontimedriver.Settlement {
	text := "unknown error"
	if err != nil {
		text = err.Error()
	}
	if e.retry.exhausted(d.t.Attempt) {
		e.log.Warn("ontime: giving up after the last attempt; dead-lettering", "topic", e.topic, "id", d.t.ID, "attempt", d.t.Attempt, "err", text)
		return ontimedriver.Settlement{Kind: ontimedriver.Dead, Reason: ontimedriver.ReasonMaxAttempts, Error: text}
	}
	if delay < 0 {
		delay = e.retry.Backoff(d.t.Attempt)
	}
	e.log.Debug("ontime: handler failed; retrying", "topic", e.topic, "id", d.t.ID, "attempt", d.t.Attempt, "retry_in", delay.String(), "err", text)
	return ontimedriver.Settlement{Kind: ontimedriver.Retry, Delay: delay, Error: text}
}

func (e *executor) logDrop(d *delivery, err error) {
	e.log.Info("ontime: handler dropped the message", "topic", e.topic, "id", d.t.ID, "err", err)
}

// deadSettlement moves a timer to the dead letters for reason, with err's
// text.
func deadSettlement(reason string, err error) ontimedriver.Settlement {
	s := ontimedriver.Settlement{Kind: ontimedriver.Dead, Reason: reason}
	if err != nil {
		s.Error = err.Error()
	}
	return s
}

// manualOutcome is what a manual settle decided, for DeliveryEndHook.
type manualOutcome struct {
	outcome Outcome
	delay   time.Duration
	reason  string
	err     error // the error given to Nack, Drop or DeadLetter
}

// nack counts a failed attempt by hand (Message.Nack).
func (d *delivery) nack(ctx context.Context, err error) error {
	return d.settleNow(ctx, d.ex.failure(d, err, -1), false, err)
}

// drop drops the timer by hand (Message.Drop).
func (d *delivery) drop(ctx context.Context, err error) error {
	d.ex.logDrop(d, err)
	return d.settleNow(ctx, ontimedriver.Settlement{Kind: ontimedriver.Ack}, true, err)
}

// settleNow applies a manual outcome and waits for the store's answer.
// dropped tells a Drop from an Ack (both delete the timer); cause is the
// error given to Nack, Drop or DeadLetter.
func (d *delivery) settleNow(ctx context.Context, s ontimedriver.Settlement, dropped bool, cause error) error {
	if d.settled.Swap(true) {
		return ErrAlreadySettled
	}
	m := &manualOutcome{outcome: outcomeOfKind(s.Kind), delay: s.Delay, reason: s.Reason, err: cause}
	if dropped {
		m.outcome = OutcomeDropped
	}
	d.manual.Store(m)
	reply := make(chan error, 1)
	d.ex.submit(d, s, reply)
	select {
	case err := <-reply:
		if isLeaseLost(err) {
			d.manual.Store(&manualOutcome{outcome: OutcomeLeaseLost, err: cause})
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
