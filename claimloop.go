package ontime

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ontime-go/ontime/internal/backoff"
	"github.com/ontime-go/ontime/ontimedriver"
)

// runner serves one topic in one Worker. It is the topic's claim loop: it
// claims due timers while handler slots are free, holds them in the
// topic's leaseSet (whose leases a leaseKeeper keeps, leasekeeper.go), and
// runs each on the topic's executor (executor.go), whose settlements the
// topic's settler (settler.go) sends to the store.
//
// It owns the topic's state machine, and only the methods of this file
// change it:
//
//	idle ──start, wake, resume──▶ claiming ──goIdle──▶ idle
//	idle ──retire──▶ stopped          any ──stop──▶ stopped
//
// A Handle topic claims from start to stop. A topic served by HandleTopics
// claims only while it has timers due: its claim loop ends when the topic
// is idle (goIdle), and its pattern loop (topics.go) starts it again
// (wake, resume) or lets it go (retire).
type runner struct {
	topic  string
	drv    ontimedriver.Driver
	opts   TopicOptions
	log    *slog.Logger
	health *healthTracker
	// base is the parent of every handler's context: Run's ctx without
	// its cancellation. Set by start, before any claim loop runs.
	base context.Context

	exec    *executor
	leases  *leaseSet
	settler *settler
	// keeper keeps the leases: the topic's own (Handle, ownKeeper), or
	// its pattern's, shared by all its topics (HandleTopics).
	keeper    *leaseKeeper
	ownKeeper bool

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
	// loops that run (one at most).
	stopClaims chan struct{}
	claims     sync.WaitGroup
	// The state machine. stateMu guards claiming (a claim loop runs),
	// stopped (stop or retire has begun: no claim loop starts) and
	// idleSince (when the claim loop last ended).
	stateMu   sync.Mutex
	claiming  bool
	stopped   bool
	idleSince time.Time

	handlers sync.WaitGroup
	finished chan struct{}

	// A topic served by HandleTopics (byPattern) takes its wake-ups from
	// poke (its pattern loop forwards them from its one subscription) and
	// reports each claim's clock offset to onClaim.
	byPattern bool
	poke      chan time.Time
	onClaim   func(offset time.Duration)
}

// workerEnv is what the topics of a Worker share.
type workerEnv struct {
	drv        ontimedriver.Driver
	log        *slog.Logger
	health     *healthTracker
	hooks      *hookSet
	middleware []Middleware
	lenient    bool
}

// newRunner returns the runner of a topic. keeper is nil for a Handle
// topic (it gets its own); for a HandleTopics topic it is the pattern's,
// and onClaim gets the clock offset each claim measures.
func newRunner(env *workerEnv, topic string, h rawHandler, o TopicOptions, keeper *leaseKeeper, onClaim func(time.Duration)) *runner {
	r := &runner{
		topic: topic, drv: env.drv, opts: o, log: env.log, health: env.health,
		keeper:     keeper,
		slots:      make(chan struct{}, o.MaxConcurrency+o.ClaimAhead),
		stopClaims: make(chan struct{}),
		finished:   make(chan struct{}),
		byPattern:  keeper != nil,
		onClaim:    onClaim,
	}
	limit := 4 * maxSettleBatch
	if r.byPattern {
		r.poke = make(chan time.Time, 1)
		// A topic served by HandleTopics runs only while it has timers:
		// its claimed timers (the slots) bound what it queues, but for
		// outcomes a stop or an outage leaves behind.
		limit = max(2*cap(r.slots), 16)
	} else {
		r.keeper, r.ownKeeper = newLeaseKeeper(o), true
	}
	r.settler = newSettler(topic, env.drv, o.Lease, env.log, env.health, limit)
	r.leases = newLeaseSet(topic, env.drv, o.Lease, env.log, env.health, r.keeper)
	r.exec = newExecutor(executorConfig{
		topic: topic, handler: h, middleware: env.middleware, hooks: env.hooks,
		retry: o.Retry, timeout: o.Timeout, lenient: env.lenient, log: env.log, sink: r.settler,
	})
	return r
}

// start starts serving the topic: handlers' contexts are children of
// base (without its cancellation); its claim loop starts at once, or at
// firstAt (local clock) if that is later, and, for a Handle topic, its
// lease keeper.
func (r *runner) start(base context.Context, firstAt time.Time) {
	r.base = base
	if r.ownKeeper {
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
	r.startClaiming(firstAt)
	return true
}

// resume starts the claim loop of an idle pattern-served topic, first
// claiming at firstAt (local clock; zero: at once); a running claim loop
// knows its topic's next instant already.
func (r *runner) resume(firstAt time.Time) {
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	if r.claiming || r.stopped {
		return
	}
	r.startClaiming(firstAt)
}

// startClaiming is the transition idle → claiming. r.stateMu is held.
func (r *runner) startClaiming(firstAt time.Time) {
	r.claiming = true
	r.claims.Add(1)
	go r.claimLoop(firstAt)
}

// goIdle is called by a claim loop after a claim that took fewer timers
// than it asked for. For a pattern-served topic whose next timer (or lease
// deadline: its running timers' included) is more than a poll interval
// away, or that has none, it reports true: the transition claiming → idle,
// and the claim loop ends, asking the store nothing, until the pattern
// loop starts it again (wake, resume): a publish to the topic, or the
// topic's instant coming within the loop's horizon. Its running handlers
// need no claim loop: an outcome that reschedules a timer publishes a
// wake-up, and a lease that runs out is the topic's next instant in the
// index, so either starts it again. A wake-up forwarded to the claim loop
// since its claim keeps it running.
func (r *runner) goIdle(res *ontimedriver.ClaimResult) bool {
	if !r.byPattern {
		return false
	}
	if !res.Next.IsZero() && res.Next.Sub(res.Now) <= r.opts.PollInterval {
		return false
	}
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	if len(r.poke) > 0 || r.stopped {
		// A wake-up came since the claim (the claim loop's sleep takes
		// it), or a stop began (the claim loop sees it).
		return false
	}
	r.claiming = false
	r.idleSince = time.Now()
	return true
}

// retire reports whether the runner has been idle since linger before now
// with nothing claimed; then (the transition idle → stopped) it may start
// no claim loop again, and its pattern loop lets it go.
func (r *runner) retire(now time.Time, linger time.Duration) bool {
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	if r.claiming || r.stopped || now.Sub(r.idleSince) < linger || len(r.slots) > 0 {
		return false
	}
	r.stopped = true
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
		r.exec.forceStop()
		r.leases.abandon()
		r.leases.cancelAll()
		// Handlers that ignore their context are abandoned after a grace
		// period: their leases expire and the timers are delivered again.
		select {
		case <-allDone:
		case <-time.After(2 * time.Second):
			r.log.Warn("ontime: handlers did not return after cancellation; their timers will be redelivered when the lease expires", "topic", r.topic)
		}
	}
	r.leases.abandon()
	if r.ownKeeper {
		r.keeper.stop()
	}
	if n := r.settler.close(ctx); n > 0 && err == nil {
		// Handlers all returned, but outcomes were given up: the stop was
		// not clean either.
		err = ctx.Err()
	}
	return err
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
		wait     time.Duration // the outage back-off
		offset   time.Duration // store clock - local clock, from the last claim
		sleepTmr = time.NewTimer(time.Hour)
		ctx      context.Context
	)
	if !r.byPattern {
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
	if r.byPattern {
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
		if !r.byPattern && unsub == nil && !time.Now().Before(subRetry) {
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
				r.health.subscribeFailed(r.topic, err)
			} else {
				wake, unsub = ch, cancel
				r.health.subscribed(r.topic)
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
			back := r.health.recovery()
			r.health.fail("claim", err)
			wait = backoff.Next(wait, minOutageBackoff, min(r.opts.PollInterval, maxOutageBackoff))
			if !outageSleep(wait, back, r.stopClaims) {
				return
			}
			continue
		}
		wait = 0
		r.health.ok()
		localNow := time.Now()
		offset = res.Now.Sub(localNow)
		if r.onClaim != nil {
			r.onClaim(offset)
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
		sleep := r.opts.PollInterval
		if !res.Next.IsZero() {
			if d := res.Next.Sub(res.Now); d < sleep {
				sleep = d
			}
		}
		if sleep <= 0 {
			if len(res.Timers) > 0 {
				continue
			}
			sleep = time.Millisecond // guard against a spin on inconsistent data
		}
		deadline := localNow.Add(sleep)
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

// maxOutageBackoff bounds the wait between two store calls of a worker
// during an outage, so that every worker notices a store that came back
// within this (or its poll interval, if shorter), however long the outage
// was: a 5 s cap once let a worker report the store unreachable seconds
// after it had returned.
const maxOutageBackoff = time.Second

// minOutageBackoff is the first wait after a failed store call of a
// worker; the waits double from it (backoff.Next), jittered, up to
// maxOutageBackoff or the poll interval.
const minOutageBackoff = 50 * time.Millisecond

func (r *runner) releaseSlots(n int) {
	for range n {
		<-r.slots
	}
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

// dispatch hands a claimed timer to the executor: at once if a running
// slot is free, else when a running delivery ends. deadline is its lease
// deadline on the local clock, counted from when the claim (or an
// extension) was sent: the store leased the timer after that instant, so
// the store's deadline comes no earlier (clock drift aside; see
// leaseMargin).
func (r *runner) dispatch(t *ontimedriver.ClaimedTimer, deadline, storeNow time.Time) {
	// The handler's context is a child of Run's ctx without its
	// cancellation (its values only), and of nothing the topic shares: a
	// shared parent would add and remove a child, under one lock for all
	// of the topic's handlers, per delivery. A stop that runs out of time
	// cancels the running handlers itself (leaseSet.cancelAll); the claim
	// loop has ended by then, so no delivery starts after it.
	d := r.exec.newDelivery(r.base, t, storeNow, deadline)
	r.leases.add(d)
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

// process runs one delivery on the executor; it holds a running slot,
// which it passes on when it ends.
func (r *runner) process(d *delivery) {
	defer func() {
		d.cancel()
		r.leases.remove(d)
		<-r.slots
		r.runNext()
		r.handlers.Done()
	}()
	switch {
	case r.stopping():
		// Claimed but not started: hand it back, due at once, without
		// counting the attempt.
		r.exec.release(d)
	case d.lost.Load():
		// The lease ran out (or was lost) while the timer waited for a
		// running slot; the heartbeat or lease watch that saw it logged
		// it.
	default:
		r.exec.execute(d)
	}
}
