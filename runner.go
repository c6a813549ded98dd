package ontime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime/envelope"
	"github.com/ontime-go/ontime/ontimedriver"
)

// runner serves one topic in one Worker: a claim loop (this file), a settle
// batcher (settler.go) and a lease heartbeat and lease watch
// (heartbeat.go). A topic served by HandleTopics shares its pattern's
// heartbeat and lease watch, and runs its claim loop only while it has
// timers due (see runner.goIdle); the settle batcher runs only while it
// has outcomes to settle.
type runner struct {
	w     *Worker
	drv   ontimedriver.Driver
	topic string
	h     rawHandler
	opts  TopicOptions

	// slots holds a token per claimed timer (running, or waiting to run):
	// at most MaxConcurrency + ClaimAhead. running counts the deliveries
	// that run (at most MaxConcurrency); the others wait in waitq, in claim
	// order, and each delivery that ends starts the first of them, so
	// timers claimed ahead start in the order the store handed them out.
	slots   chan struct{}
	runMu   sync.Mutex
	running int
	waitq   []*delivery

	// stopClaims is closed to stop the claim loop. claims counts the claim
	// loops that run (one at most; a pattern-served topic's ends when the
	// topic is idle and starts again when it is due). stateMu guards
	// claiming (a claim loop runs), stopped (stop has begun: no claim loop
	// starts) and idleSince (when the claim loop last ended).
	stopClaims chan struct{}
	claims     sync.WaitGroup
	stateMu    sync.Mutex
	claiming   bool
	stopped    bool
	idleSince  time.Time
	// hctx is cancelled when a shutdown runs out of time (it bounds the
	// heartbeat); the handlers' contexts are cancelled with it, one by one
	// (cancelHandlers).
	hctx       context.Context
	cancelHctx context.CancelFunc
	forced     atomic.Bool
	// extending is set while the heartbeat extends this topic's leases.
	extending atomic.Bool
	handlers  sync.WaitGroup

	mu       sync.Mutex
	inflight map[*delivery]struct{}

	settler settler
	// keeper keeps the leases of the running handlers: the topic's own
	// (Handle), or its pattern's, shared by all its topics (HandleTopics).
	keeper   *leaseKeeper
	finished chan struct{}

	// pr is the HandleTopics loop that runs this topic, nil for Handle.
	// Such a runner takes its wake-ups from poke (the loop forwards them
	// from its one subscription), ends its claim loop when the topic is
	// idle (see goIdle) and is started again by the loop (wake).
	pr   *patternRunner
	poke chan time.Time
}

// newRunner returns the runner of a topic; pr is the HandleTopics loop
// that runs it, nil for Handle.
func newRunner(w *Worker, topic string, h rawHandler, o TopicOptions, pr *patternRunner) *runner {
	r := &runner{
		w: w, drv: w.client.drv, topic: topic, h: h, opts: o,
		slots:      make(chan struct{}, o.MaxConcurrency+o.ClaimAhead),
		stopClaims: make(chan struct{}),
		inflight:   map[*delivery]struct{}{},
		finished:   make(chan struct{}),
		pr:         pr,
	}
	if pr != nil {
		r.poke = make(chan time.Time, 1)
		r.keeper = pr.keeper
	} else {
		r.keeper = newLeaseKeeper(o)
	}
	r.hctx, r.cancelHctx = context.WithCancel(context.Background())
	r.settler.init(r)
	return r
}

// start starts serving the topic: its claim loop at once, or at firstAt
// (local clock) if that is later, and, for a Handle topic, its heartbeat
// and lease watch.
func (r *runner) start(firstAt time.Time) {
	if r.pr == nil {
		r.keeper.start()
	}
	r.wake(time.Time{}, firstAt, true)
}

// wake hands a wake-up (due, on the store's clock; zero: now) to the claim
// loop if one runs. If none does and start is set, it starts one whose
// first claim is at firstAt (local clock; zero or past: at once). It
// reports whether a claim loop runs (or the runner stops, when there is
// nothing to wake).
func (r *runner) wake(due, firstAt time.Time, start bool) bool {
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	switch {
	case r.stopped:
		return true
	case r.claiming:
		if r.poke != nil {
			select {
			case r.poke <- due:
			default: // a wake-up is pending already
			}
		}
		return true
	case !start:
		return false
	}
	r.claiming = true
	r.claims.Add(1)
	go r.claimLoop(firstAt)
	return true
}

// stop performs the graceful stop of this topic; see Worker.Stop.
func (r *runner) stop(ctx context.Context) error {
	defer close(r.finished)
	r.stateMu.Lock()
	r.stopped = true
	r.stateMu.Unlock()
	close(r.stopClaims)
	r.claims.Wait()

	var err error
	allDone := make(chan struct{})
	go func() { r.handlers.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-ctx.Done():
		err = ctx.Err()
		r.forced.Store(true)
		r.cancelHctx()
		r.cancelHandlers()
		// Handlers that ignore their context are abandoned after a grace
		// period: their leases expire and the timers are delivered again.
		select {
		case <-allDone:
		case <-time.After(2 * time.Second):
			r.w.log.Warn("ontime: handlers did not return after cancellation; their timers will be redelivered when the lease expires", "topic", r.topic)
		}
	}
	r.cancelHctx()
	if r.pr == nil {
		r.keeper.stop()
	}
	if n := r.settler.close(ctx); n > 0 && err == nil {
		// Handlers all returned, but outcomes were given up: the stop was
		// not clean either.
		err = ctx.Err()
	}
	return err
}

// cancelHandlers cancels the context of every running handler.
func (r *runner) cancelHandlers() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range r.inflight {
		d.cancel()
	}
}

func (r *runner) stopping() bool {
	select {
	case <-r.stopClaims:
		return true
	default:
		return false
	}
}

// claimLoop claims due timers while handler slots are free and sleeps until
// the topic's next due instant, a wake-up notification or the poll interval,
// whichever comes first. Its first claim is at firstAt (local clock), or at
// once. A pattern-served topic's claim loop ends when the topic is idle
// (goIdle).
func (r *runner) claimLoop(firstAt time.Time) {
	defer r.claims.Done()
	var (
		wake     <-chan time.Time
		unsub    func()
		subRetry time.Time
		backoff  time.Duration
		offset   time.Duration // store clock - local clock, from the last claim
		sleepTmr = time.NewTimer(time.Hour)
		ctx      context.Context
	)
	if r.pr == nil {
		// The context of the subscription: cancelled when the claim
		// loop stops.
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(context.Background())
		defer stop()
		go func() {
			select {
			case <-r.stopClaims:
				stop()
			case <-ctx.Done():
			}
		}()
	}
	defer func() {
		if unsub != nil {
			unsub()
		}
	}()
	sleepTmr.Stop()
	if r.pr != nil {
		wake = r.poke
		if d := time.Until(firstAt); d > 0 {
			// Woken for a timer due a little later: claim then (or
			// at the next wake-up), not now, when there is nothing.
			sleepTmr.Reset(d)
			select {
			case <-sleepTmr.C:
			case <-wake:
				stopTimer(sleepTmr)
			case <-r.stopClaims:
				return
			}
		}
	}

	for {
		if r.pr == nil && unsub == nil && !time.Now().Before(subRetry) {
			ch, cancel, err := r.drv.Subscribe(ctx, r.topic)
			if err != nil {
				if r.stopping() {
					return
				}
				// Polling still works, so the store is not unreachable
				// for this: the worker is degraded (timers published for
				// an earlier instant wait for the next poll). Try again
				// later.
				subRetry = time.Now().Add(time.Second)
				r.w.health.subscribeFailed(r.topic, err)
			} else {
				wake, unsub = ch, cancel
				r.w.health.subscribed(r.topic)
			}
		}

		// Wait for at least one free handler slot.
		select {
		case r.slots <- struct{}{}:
		case <-r.stopClaims:
			return
		}
		n := 1
		for n < r.opts.ClaimBatch && n < cap(r.slots) {
			select {
			case r.slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}

		// select picks at random among ready cases: a free slot must not
		// win over a stop that has begun.
		if r.stopping() {
			r.releaseSlots(n)
			return
		}
		// The claim is not cancelled by a stop: a claim cut short after the
		// store leased timers would strand them until their leases expire.
		// Its timers are released below, unstarted, if a stop has begun.
		cctx, ccancel := context.WithTimeout(context.Background(), storeCallTimeout(r.opts.Lease))
		sent := time.Now()
		res, err := r.drv.Claim(cctx, r.topic, n, r.opts.Lease)
		ccancel()
		if err != nil {
			r.releaseSlots(n)
			if r.stopping() {
				return
			}
			r.w.health.fail("claim", err)
			backoff = nextBackoff(backoff, min(r.opts.PollInterval, maxOutageBackoff))
			if !r.sleep(backoff) {
				return
			}
			continue
		}
		backoff = 0
		r.w.health.ok()
		localNow := time.Now()
		offset = res.Now.Sub(localNow)
		if r.pr != nil {
			r.pr.claimed(offset)
		}
		r.releaseSlots(n - len(res.Timers))
		// The store leased the timers at some instant between sent and
		// now; the lease deadline on the local clock is taken from sent,
		// which is never late. After a slow claim (go-redis redialling a
		// store that just came back, a claim held in a partition) that is
		// far too early: extend the leases at once, and count from then.
		leaseFrom := func(*ontimedriver.ClaimedTimer) time.Time { return sent }
		if localNow.Sub(sent) > leaseMargin(r.opts.Lease)/2 && len(res.Timers) > 0 {
			leaseFrom = r.reLease(res, sent)
		}
		for i := range res.Timers {
			t := &res.Timers[i]
			from := leaseFrom(t)
			if from.IsZero() {
				// Lost between the claim and the extension (re-published
				// or cancelled): not ours to run.
				r.releaseSlots(1)
				continue
			}
			r.dispatch(t, from.Add(t.LeaseUntil.Sub(res.Now)), res.Now)
		}
		if len(res.Timers) == n {
			continue // maybe more are due
		}

		if r.goIdle(res) {
			// Served from the topic index: the claim loop of an idle
			// topic ends instead of polling, and the pattern's loop
			// starts it again when the topic is due.
			return
		}

		// Nothing more is due now: sleep until the next due instant.
		wait := r.opts.PollInterval
		if !res.Next.IsZero() {
			if d := res.Next.Sub(res.Now); d < wait {
				wait = d
			}
		}
		if wait <= 0 {
			if len(res.Timers) > 0 {
				continue
			}
			wait = time.Millisecond // guard against a spin on inconsistent data
		}
		deadline := localNow.Add(wait)
		for {
			d := time.Until(deadline)
			if d <= 0 {
				break
			}
			sleepTmr.Reset(d)
			select {
			case <-sleepTmr.C:
				continue
			case due, ok := <-wake:
				if !sleepTmr.Stop() {
					<-sleepTmr.C
				}
				if !ok {
					// The driver closed the subscription; resubscribe.
					wake, unsub = nil, nil
					deadline = time.Now()
					continue
				}
				local := due.Add(-offset)
				if due.IsZero() || local.Before(deadline) {
					deadline = local
				}
			case <-r.stopClaims:
				sleepTmr.Stop()
				return
			}
		}
	}
}

// storeCallTimeout bounds one Claim or Settle call of a topic: a third of
// the lease, between 2 s and 5 s. A store that hangs (paused, a network
// black hole) then turns the worker unhealthy within that time instead of
// after the client's own read timeouts and retries, and a late Settle
// still leaves time to retry within the lease. A claim cut short after the
// store applied it strands its timers until their leases expire (they are
// delayed, not lost).
func storeCallTimeout(lease time.Duration) time.Duration {
	return min(max(lease/3, 2*time.Second), 5*time.Second)
}

// sleep waits d, or until the claim loop stops (false).
func (r *runner) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopClaims:
		return false
	}
}

// maxOutageBackoff bounds the wait between two store calls of a worker
// during an outage, so that every worker notices a store that came back
// within this (or its poll interval, if shorter), however long the outage
// was: a 5 s cap once let a worker report the store unreachable seconds
// after it had returned.
const maxOutageBackoff = time.Second

// nextBackoff grows the outage back-off from 50ms, doubling, up to hi,
// with jitter (each wait is a random 50-100 % of the step) so that many
// workers do not return in step; no wait exceeds hi.
func nextBackoff(prev, hi time.Duration) time.Duration {
	const lo = 50 * time.Millisecond
	hi = max(hi, lo)
	d := max(prev*2, lo)
	if d > hi {
		d = hi
	}
	return time.Duration(float64(d) * (0.5 + 0.5*rand.Float64()))
}

func (r *runner) releaseSlots(n int) {
	for range n {
		<-r.slots
	}
}

// delivery is one claimed timer while this worker holds it.
type delivery struct {
	r       *runner
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

// reLease extends the leases of a slow claim's timers right away, so that
// their local deadlines count from a recent instant instead of from when
// the claim was sent. It returns, per timer, the local instant its lease
// counts from (when the extension was sent; sent, for all of them, if the
// extension failed), or the zero time for a timer whose lease was lost.
func (r *runner) reLease(res *ontimedriver.ClaimResult, sent time.Time) func(*ontimedriver.ClaimedTimer) time.Time {
	leases := make([]ontimedriver.Lease, len(res.Timers))
	for i, t := range res.Timers {
		leases[i] = ontimedriver.Lease{ID: t.ID, Token: t.Token}
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout(r.opts.Lease))
	defer cancel()
	ext := time.Now()
	errs, err := r.drv.Extend(ctx, r.topic, leases, r.opts.Lease)
	if err != nil || len(errs) != len(leases) {
		return func(*ontimedriver.ClaimedTimer) time.Time { return sent }
	}
	from := make(map[string]time.Time, len(leases))
	for i, e := range errs {
		switch {
		case e == nil:
			from[leases[i].ID] = ext
		case isLeaseLost(e):
			from[leases[i].ID] = time.Time{}
		default:
			from[leases[i].ID] = sent
		}
	}
	return func(t *ontimedriver.ClaimedTimer) time.Time { return from[t.ID] }
}

// dispatch starts the handler of a claimed timer. deadline is its lease
// deadline on the local clock, counted from when the claim (or an
// extension) was sent: the store leased the timer after that instant, so
// the store's deadline comes no earlier (clock drift aside; see
// leaseMargin).
func (r *runner) dispatch(t *ontimedriver.ClaimedTimer, deadline, storeNow time.Time) {
	d := &delivery{r: r, t: *t, firedAt: storeNow}
	d.deadline.Store(deadline.UnixNano())
	if time.Until(deadline) < r.opts.Lease*2/3 {
		// The claim took long (a slow store): this lease runs out sooner
		// than leaseWatch expects of a fresh one; have it look again.
		select {
		case r.keeper.poke <- struct{}{}:
		default:
		}
	}
	// A child of Run's ctx without its cancellation (its values only),
	// and not of hctx: a child would be added to and removed from
	// hctx's set of children (one lock for all of the topic's handlers)
	// per delivery. A stop that runs out of time cancels the running
	// handlers itself (cancelHandlers); the claim loop has ended by then,
	// so no delivery starts after it.
	d.ctx, d.cancel = context.WithCancel(r.w.base)
	r.mu.Lock()
	r.inflight[d] = struct{}{}
	if len(r.inflight) == 1 {
		r.keeper.setBusy(r, true)
	}
	r.mu.Unlock()
	r.handlers.Add(1)
	r.runMu.Lock()
	if r.running < r.opts.MaxConcurrency {
		r.running++
		r.runMu.Unlock()
		go r.process(d)
		return
	}
	r.waitq = append(r.waitq, d) // claimed ahead: runs when a handler ends
	r.runMu.Unlock()
}

// runNext passes the running slot of a delivery that ended to the first
// waiting one, or frees it.
func (r *runner) runNext() {
	r.runMu.Lock()
	if len(r.waitq) == 0 {
		r.running--
		r.runMu.Unlock()
		return
	}
	next := r.waitq[0]
	r.waitq[0] = nil
	r.waitq = r.waitq[1:]
	r.runMu.Unlock()
	go r.process(next)
}

// process runs one delivery; it holds a running slot, which it passes on
// when it ends.
func (r *runner) process(d *delivery) {
	defer func() {
		d.cancel()
		r.mu.Lock()
		delete(r.inflight, d)
		if len(r.inflight) == 0 {
			r.keeper.setBusy(r, false)
		}
		r.mu.Unlock()
		<-r.slots
		r.runNext()
		r.handlers.Done()
	}()
	if r.stopping() {
		// Claimed but not started: hand it back, due at once, without
		// counting the attempt.
		d.settleAsync(ontimedriver.Settlement{Kind: ontimedriver.Snooze})
		return
	}
	if d.lost.Load() {
		// The lease ran out (or was lost) while the timer waited for a
		// running slot; the heartbeat or lease watch that saw it logged it.
		return
	}
	hooks := &r.w.client.hooks
	d.info = Delivery{
		Topic: r.topic, ID: d.t.ID, Attempt: d.t.Attempt, Due: d.t.Due,
		FiredAt: d.firedAt, LeaseUntil: d.t.LeaseUntil,
	}
	var env *envelope.Message
	var err error
	if r.w.client.lenient {
		env, err = envelope.Decode(d.t.Payload)
	} else {
		env, err = envelope.DecodeBinary(d.t.Payload)
	}
	if err != nil {
		r.w.log.Error("ontime: stored envelope does not decode; dead-lettering it", "topic", r.topic, "id", d.t.ID, "err", err)
		if hooks.deliveryHooks() {
			d.info.CorrelationID = d.t.ID
			ctx := r.hookStart(d.ctx, d)
			r.hookEnd(ctx, d, DeliveryResult{Outcome: OutcomeDeadLettered, Err: err, Reason: ontimedriver.ReasonUndecodable})
		}
		d.settleAsync(deadSettlement(ontimedriver.ReasonUndecodable, err))
		return
	}
	d.info.CorrelationID, d.info.ContentType, d.info.Headers = splitHeaders(env)
	if d.info.CorrelationID == "" {
		d.info.CorrelationID = d.t.ID // envelopes without one (legacy, raw)
	}
	if p := r.opts.Retry; d.t.Attempt > 1 && p.exhausted(d.t.Attempt-1) {
		// Earlier deliveries used up MaxAttempts without an outcome: the
		// process died in them (a message that crashes its handler's
		// process) or their leases ran out. Running it again could crash
		// the process again: dead-letter it.
		err := fmt.Errorf("attempt %d of at most %d: the earlier deliveries ended without an outcome (process killed or crashed, or lease ran out)", d.t.Attempt, p.MaxAttempts)
		r.w.log.Warn("ontime: past the last attempt without an outcome; dead-lettering", "topic", r.topic, "id", d.t.ID, "attempt", d.t.Attempt)
		if hooks.deliveryHooks() {
			ctx := r.hookStart(d.ctx, d)
			r.hookEnd(ctx, d, DeliveryResult{Outcome: OutcomeDeadLettered, Err: err, Reason: ontimedriver.ReasonMaxAttempts})
		}
		d.settleAsync(deadSettlement(ontimedriver.ReasonMaxAttempts, err))
		return
	}
	ctx := d.ctx
	if len(hooks.start) > 0 {
		ctx = r.hookStart(ctx, d)
	}
	hctx, cancelTimeout := ctx, context.CancelFunc(nil)
	if r.opts.Timeout > 0 {
		hctx, cancelTimeout = context.WithTimeoutCause(ctx, r.opts.Timeout, ErrTimeout)
	}
	start := time.Now()
	err = r.call(hctx, d, env)
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
		r.w.log.Debug("ontime: lease lost while the handler ran; its result is not acked", "topic", r.topic, "id", d.t.ID)
		res.Outcome = OutcomeLeaseLost
	default:
		s, res.Outcome, res.Err = r.decide(d, err, timedOut)
		res.Delay, res.Reason = s.Delay, s.Reason
		settle = true
	}
	if len(hooks.end) > 0 {
		r.hookEnd(ctx, d, res)
	}
	if settle {
		d.settleAsync(s)
	}
}

// hookStart runs the DeliveryStart hooks. A hook that panics is logged and
// skipped (with the hooks after it): a worker must not die of a hook.
func (r *runner) hookStart(ctx context.Context, d *delivery) (out context.Context) {
	out = ctx
	defer func() {
		if p := recover(); p != nil {
			r.w.log.Error("ontime: a DeliveryStartHook panicked", "topic", r.topic, "id", d.t.ID, "panic", fmt.Sprint(p))
		}
	}()
	return r.w.client.hooks.deliveryStart(ctx, &d.info)
}

// hookEnd runs the DeliveryEnd hooks; a panic is logged, as in hookStart.
func (r *runner) hookEnd(ctx context.Context, d *delivery, res DeliveryResult) {
	defer func() {
		if p := recover(); p != nil {
			r.w.log.Error("ontime: a DeliveryEndHook panicked", "topic", r.topic, "id", d.t.ID, "panic", fmt.Sprint(p))
		}
	}()
	r.w.client.hooks.deliveryEnd(ctx, &d.info, res)
}

// call runs the middleware and the handler. A panic in the handler becomes
// a *PanicError the middleware sees; a panic in a middleware becomes one
// too.
func (r *runner) call(ctx context.Context, d *delivery, env *envelope.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = r.panicked(d, p)
		}
	}()
	inner := func(ctx context.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = r.panicked(d, p)
			}
		}()
		return r.h(ctx, d, env)
	}
	mws := r.w.cfg.Middleware
	if len(mws) == 0 {
		return inner(ctx)
	}
	next := inner
	for i := len(mws) - 1; i >= 0; i-- {
		mw, n := mws[i], next
		next = func(ctx context.Context) error { return mw(ctx, &d.info, n) }
	}
	return next(ctx)
}

// panicked logs a recovered panic and returns it as an error.
func (r *runner) panicked(d *delivery, p any) error {
	stack := debug.Stack()
	r.w.log.Error("ontime: handler panicked", "topic", r.topic, "id", d.t.ID, "panic", fmt.Sprint(p), "stack", string(stack))
	return &PanicError{Value: p, Stack: stack}
}

// decide maps a handler's result to what happens to the timer, the outcome
// hooks report and the error that ended the attempt. An attempt that ran
// past TopicOptions.Timeout has failed, whatever the handler returned
// (with an error wrapping ErrTimeout), unless a shutdown that ran out of
// time cancelled it (then it is released).
func (r *runner) decide(d *delivery, err error, timedOut bool) (ontimedriver.Settlement, Outcome, error) {
	forcedStop := r.forced.Load() && d.ctx.Err() != nil
	var s ontimedriver.Settlement
	if timedOut && !forcedStop {
		terr := fmt.Errorf("%w after %s", ErrTimeout, r.opts.Timeout)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			terr = fmt.Errorf("%w after %s: %w", ErrTimeout, r.opts.Timeout, err)
		}
		s = d.failure(terr, -1)
		return s, outcomeOfKind(s.Kind), terr
	}
	s = r.settlementFor(d, err)
	var o *outcome
	isOutcome := errors.As(err, &o)
	switch {
	case s.Kind == ontimedriver.Ack && isOutcome && o.kind == outcomeReject:
		return s, OutcomeRejected, err
	case s.Kind == ontimedriver.Snooze && forcedStop && !(isOutcome && o.kind == outcomeSnooze):
		return s, OutcomeReleased, err
	}
	return s, outcomeOfKind(s.Kind), err
}

// outcomeOfKind is the outcome a settlement kind reports (an Ack of a
// rejected timer, and the release of a cancelled one, are told apart by
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
func (r *runner) settlementFor(d *delivery, err error) ontimedriver.Settlement {
	if err == nil {
		return ontimedriver.Settlement{Kind: ontimedriver.Ack}
	}
	var o *outcome
	if errors.As(err, &o) {
		switch o.kind {
		case outcomeSnooze:
			return ontimedriver.Settlement{Kind: ontimedriver.Snooze, Delay: o.delay}
		case outcomeReject:
			r.logReject(d, o.err)
			return ontimedriver.Settlement{Kind: ontimedriver.Ack}
		case outcomeDead:
			return deadSettlement(ontimedriver.ReasonRejected, o.err)
		case outcomeRetryAfter:
			return d.failure(o.err, o.delay)
		}
	}
	var ue *undecodableError
	if errors.As(err, &ue) {
		r.w.log.Error("ontime: message body does not decode; dead-lettering it", "topic", r.topic, "id", d.t.ID, "err", err)
		return deadSettlement(ontimedriver.ReasonUndecodable, err)
	}
	if r.forced.Load() && d.ctx.Err() != nil {
		// Cancelled by a shutdown that ran out of time: due again at once,
		// and the attempt does not count.
		return ontimedriver.Settlement{Kind: ontimedriver.Snooze}
	}
	return d.failure(err, -1)
}

// failure counts a failed attempt: retry after delay (the policy's backoff
// when delay < 0), or dead-letter past MaxAttempts.
func (d *delivery) failure(err error, delay time.Duration) ontimedriver.Settlement {
	p := d.r.opts.Retry
	text := "unknown error"
	if err != nil {
		text = err.Error()
	}
	if p.exhausted(d.t.Attempt) {
		d.r.w.log.Warn("ontime: giving up after the last attempt; dead-lettering", "topic", d.r.topic, "id", d.t.ID, "attempt", d.t.Attempt, "err", text)
		return ontimedriver.Settlement{Kind: ontimedriver.Dead, Reason: ontimedriver.ReasonMaxAttempts, Error: text}
	}
	if delay < 0 {
		delay = p.Backoff(d.t.Attempt)
	}
	d.r.w.log.Debug("ontime: handler failed; retrying", "topic", d.r.topic, "id", d.t.ID, "attempt", d.t.Attempt, "retry_in", delay.String(), "err", text)
	return ontimedriver.Settlement{Kind: ontimedriver.Retry, Delay: delay, Error: text}
}

func (r *runner) logReject(d *delivery, err error) {
	r.w.log.Info("ontime: handler rejected the message; dropping it", "topic", r.topic, "id", d.t.ID, "err", err)
}

// settleAsync queues the outcome for the batcher.
func (d *delivery) settleAsync(s ontimedriver.Settlement) {
	if d.settled.Swap(true) {
		return
	}
	s.Lease = ontimedriver.Lease{ID: d.t.ID, Token: d.t.Token}
	d.r.settler.submit(settleReq{op: s, deadline: d.deadline.Load()})
}

// manualOutcome is what a manual settle decided, for DeliveryEndHook.
type manualOutcome struct {
	outcome Outcome
	delay   time.Duration
	reason  string
	err     error // the error given to Nack, Reject or DeadLetter
}

// settleNow applies a manual outcome and waits for the store's answer.
// rejected tells a Reject from an Ack (both delete the timer); cause is the
// error given to Nack, Reject or DeadLetter.
func (d *delivery) settleNow(ctx context.Context, s ontimedriver.Settlement, rejected bool, cause error) error {
	if d.settled.Swap(true) {
		return ErrAlreadySettled
	}
	m := &manualOutcome{outcome: outcomeOfKind(s.Kind), delay: s.Delay, reason: s.Reason, err: cause}
	if rejected {
		m.outcome = OutcomeRejected
	}
	d.manual.Store(m)
	s.Lease = ontimedriver.Lease{ID: d.t.ID, Token: d.t.Token}
	reply := make(chan error, 1)
	d.r.settler.submit(settleReq{op: s, deadline: d.deadline.Load(), reply: reply})
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
