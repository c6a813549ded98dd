package ontime

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime/internal/backoff"
	"github.com/ontime-go/ontime/ontimedriver"
)

// HandleTopics registers h for every topic that matches pattern: '*'
// matches any run of characters and '?' any one character ("*" is every
// topic, "tenant-*" every tenant's), after the Client's and the Router's
// prefixes, which are glued in front of the pattern as they are in front
// of a topic. Bodies are decoded into T as Handle does; Message.Topic
// tells which topic a timer came from.
//
// One loop serves all the matching topics from the store's topic index
// (see ontimedriver.TopicIndex), however many there are: it asks the
// store which topics have a timer due, and runs a topic's claim loop
// only while it has timers due; a topic whose next timer is more than a
// PollInterval away is left alone until the index says it is due. One
// lease heartbeat and one lease watch serve the running handlers of all
// the topics. So an idle topic costs no goroutine and no store call, and
// a worker with 100,000 topics asks the store once per PollInterval, or
// at the next due instant, or when a publish wakes it.
//
// opts apply to each topic on its own: MaxConcurrency is per topic, as
// with Handle. A topic registered with Handle is served by that handler,
// not by a pattern; a topic that matches several patterns is served by the
// one registered first.
//
// The store must keep the topic index: the embedded store and the Redis
// driver's native layout does (on a Redis Cluster too, unless
// ontimeredis.Options.NoClusterTopicIndex is set); the faststream-compatible Redis
// layout does not (Python writes its keys without it). Otherwise
// HandleTopics returns an error wrapping ErrInvalid. HandleTopics must be called before the
// Worker runs.
func HandleTopics[T any](r Registrar, pattern string, h HandlerFunc[T], opts *TopicOptions) error {
	if h == nil {
		return invalidf("HandleTopics %q: handler is nil", pattern)
	}
	return r.registerPattern(pattern, typedRaw(h), opts)
}

// registerPattern is register for a pattern.
func (w *Worker) registerPattern(pattern string, h rawHandler, opts *TopicOptions) error {
	full := w.client.prefix + pattern
	if err := ontimedriver.ValidatePattern(full); err != nil {
		return fmt.Errorf("HandleTopics: %w", err)
	}
	idx, ok := ontimedriver.IndexedTopics(w.client.drv)
	if !ok {
		return invalidf("HandleTopics %q: the store keeps no topic index (the faststream-compatible Redis layout cannot, so serve its topics with Handle; on a Redis Cluster unset ontimeredis.Options.NoClusterTopicIndex)", full)
	}
	o, err := w.topicOptions(full, opts)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != 0 {
		return fmt.Errorf("HandleTopics %q: the worker is already running", full)
	}
	for _, p := range w.patterns {
		if p.pattern == full {
			return fmt.Errorf("%w: HandleTopics: pattern %q already has a handler", ErrInvalid, full)
		}
	}
	w.patterns = append(w.patterns, newPatternRunner(w, idx, full, h, o))
	return nil
}

func (r *Router) registerPattern(pattern string, h rawHandler, opts *TopicOptions) error {
	if pattern == "" {
		return invalidf("HandleTopics: pattern is empty")
	}
	return r.w.registerPattern(r.prefix+pattern, h, opts)
}

// topicIndexRepair is how often a pattern loop repairs an index that can
// miss hints (ontimedriver.TopicIndexRepairer), unless
// WorkerConfig.TopicIndexRepair says otherwise.
const topicIndexRepair = 5 * time.Minute

// dueTopicsLimit is how many due topics one DueTopics call returns.
const dueTopicsLimit = 1000

// patternRunner serves the topics that match one pattern: one loop asks
// the store's topic index which are due and runs a runner (claimloop.go) for
// each topic while it has timers due or in flight.
type patternRunner struct {
	w      *Worker // its registered topics and patterns (owns)
	env    *workerEnv
	log    *slog.Logger
	health *healthTracker
	// repairEvery is WorkerConfig.TopicIndexRepair; stopTimeout bounds
	// the stop of a topic let go (WorkerConfig.ShutdownTimeout).
	repairEvery, stopTimeout time.Duration
	idx                      ontimedriver.TopicIndex
	pattern                  string
	h                        rawHandler
	opts                     TopicOptions

	// active is owned by the loop goroutine (and by stop, after the loop
	// has ended): the topics started, whether their claim loops run or
	// they are idle.
	active map[string]*runner
	// leaving counts the runners let go that are still stopping.
	leaving sync.WaitGroup
	// linger is how long an idle topic's runner is kept (its claim loop
	// ended, nothing running) before it is let go (see retireIdle).
	linger time.Duration
	// onRetire, if set (by tests, before the worker runs), is called by
	// the loop with each topic it lets go.
	onRetire func(topic string)

	// keeper keeps the leases of the running handlers of all the topics.
	keeper *leaseKeeper
	// base is the parent of the handlers' contexts (see runner.base).
	base context.Context

	// claimOffset is the store clock minus the local clock as the last
	// claim of one of the pattern's topics measured it (ns; set once
	// claimOffsetOK). The loop turns store instants into local ones with
	// it rather than with its own DueTopics calls' offset: DueTopics reads
	// the store's clock before it walks the index, so with thousands of
	// due topics its answer comes a millisecond or more after that
	// instant, and every topic it started claimed that much late (claims
	// were sent 2.0-2.2 ms after the due instant at p50 over 10,000
	// topics, against 0.7 ms with the claim's offset).
	claimOffset   atomic.Int64
	claimOffsetOK atomic.Bool

	quit     chan struct{}
	loopDone chan struct{}
	finished chan struct{}
}

func newPatternRunner(w *Worker, idx ontimedriver.TopicIndex, pattern string, h rawHandler, o TopicOptions) *patternRunner {
	p := &patternRunner{
		w: w, env: &w.env, log: w.env.log, health: w.env.health, idx: idx, pattern: pattern, h: h, opts: o,
		repairEvery: w.cfg.TopicIndexRepair, stopTimeout: w.cfg.ShutdownTimeout,
		active:   map[string]*runner{},
		linger:   max(10*o.PollInterval, 10*time.Second),
		keeper:   newLeaseKeeper(o),
		quit:     make(chan struct{}),
		loopDone: make(chan struct{}),
		finished: make(chan struct{}),
	}
	return p
}

// start starts the pattern's loop and lease keeper; handlers' contexts
// are children of base (without its cancellation).
func (p *patternRunner) start(base context.Context) {
	p.base = base
	p.keeper.start()
	go p.loop()
}

// owns reports whether this pattern serves topic: no exact handler has it
// and no pattern registered before this one matches it.
func (p *patternRunner) owns(topic string) bool {
	if !ontimedriver.MatchTopic(p.pattern, topic) {
		return false
	}
	if _, exact := p.w.runners[topic]; exact {
		return false
	}
	for _, q := range p.w.patterns {
		if q == p {
			return true
		}
		if ontimedriver.MatchTopic(q.pattern, topic) {
			return false
		}
	}
	return true
}

// activate starts serving topic, which has no runner: its first claim is
// at once, or at firstAt (local clock) if that is set: a topic woken for
// a timer due a little later is not claimed before then.
func (p *patternRunner) activate(topic string, firstAt time.Time) {
	if !p.owns(topic) {
		return
	}
	r := newRunner(p.env, topic, p.h, p.opts, p.keeper, p.claimed)
	p.active[topic] = r
	r.start(p.base, firstAt)
}

// retireIdle lets go of the runners that have been idle (no claim loop,
// nothing claimed) for the linger time: an idle runner costs no goroutine,
// but its memory; keeping it a while spares a topic that gets a timer
// every few seconds the allocation of a new one per timer.
func (p *patternRunner) retireIdle() {
	now := time.Now()
	for _, r := range p.active {
		if r.retire(now, p.linger) {
			p.letGo(r)
		}
	}
}

// letGo stops a runner retired by retireIdle.
func (p *patternRunner) letGo(r *runner) {
	if p.active[r.topic] == r {
		delete(p.active, r.topic)
	}
	if p.onRetire != nil {
		p.onRetire(r.topic)
	}
	p.leaving.Add(1)
	go func() {
		defer p.leaving.Done()
		ctx, cancel := context.WithTimeout(context.Background(), p.stopTimeout)
		defer cancel()
		if err := r.stop(ctx); err != nil {
			p.log.Warn("ontime: an idle topic did not stop cleanly", "topic", r.topic, "err", err)
		}
	}()
}

// loop asks the index for due topics and starts them; it sleeps until the
// earliest next instant of a matching topic, a wake-up or the poll
// interval, whichever comes first.
func (p *patternRunner) loop() {
	defer close(p.loopDone)
	var (
		wake     <-chan ontimedriver.TopicWake
		unsub    func()
		subRetry time.Time
		retryIn  time.Duration // the outage back-off
		offset   time.Duration // store clock - local clock
		repaired = time.Now()
		swept    = time.Now()
		sleepTmr = time.NewTimer(time.Hour)
	)
	sleepTmr.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		if unsub != nil {
			unsub()
		}
	}()
	// Repair the index once at the start (topics written before the store
	// kept one, after an upgrade, are in no index), then every
	// TopicIndexRepair where hints can be lost (a Redis Cluster).
	repairer, _ := ontimedriver.As[ontimedriver.TopicIndexRepairer](p.env.drv)
	if repairer != nil {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Minute)
		if err := repairer.SyncTopicIndex(rctx); err != nil && !p.stopping() {
			p.log.Warn("ontime: topic index repair at start failed; topics written before the index existed wait for their next publish or the next repair", "pattern", p.pattern, "err", err)
		}
		rcancel()
		if !repairer.NeedsIndexRepair() {
			repairer = nil
		}
	}
	repairEvery := p.repairEvery
	if repairEvery == 0 {
		repairEvery = topicIndexRepair
	}

	for {
		if unsub == nil && !time.Now().Before(subRetry) {
			ch, c, err := p.idx.SubscribeTopics(ctx, p.pattern)
			if err != nil {
				if p.stopping() {
					return
				}
				subRetry = time.Now().Add(time.Second)
				p.health.subscribeFailed(p.pattern, err)
			} else {
				wake, unsub = ch, c
				p.health.subscribed(p.pattern)
			}
		}
		if repairer != nil && repairEvery > 0 && time.Since(repaired) >= repairEvery {
			rctx, rcancel := context.WithTimeout(ctx, time.Minute)
			if err := repairer.SyncTopicIndex(rctx); err != nil && !p.stopping() {
				p.log.Warn("ontime: topic index repair failed; retrying at the next interval", "pattern", p.pattern, "err", err)
			}
			rcancel()
			repaired = time.Now()
		}

		cctx, ccancel := context.WithTimeout(ctx, storeCallTimeout(p.opts.Lease))
		res, err := p.dueTopics(cctx)
		ccancel()
		if err != nil {
			if p.stopping() {
				return
			}
			p.health.fail("due_topics", err)
			retryIn = backoff.Next(retryIn, minOutageBackoff, min(p.opts.PollInterval, maxOutageBackoff))
			if !p.wait(time.Now().Add(retryIn), nil, sleepTmr, offset) {
				return
			}
			continue
		}
		retryIn = 0
		p.health.ok()
		localNow := time.Now()
		offset = res.Now.Sub(localNow)
		// Start the claim loops of the topics due within the horizon
		// that have none, each at its instant. A running claim loop is
		// its runner's business: it knows its topic's next instant, and
		// is woken by publishes.
		for i, t := range res.Topics {
			var first time.Time
			if i < len(res.At) && res.At[i].After(res.Now) {
				first = res.At[i].Add(-p.clockOffset(offset))
			}
			if r, ok := p.active[t]; ok {
				r.resume(first)
				continue
			}
			p.activate(t, first)
		}
		if localNow.Sub(swept) >= max(p.linger/10, time.Second) {
			p.retireIdle()
			swept = localNow
		}

		// Ask again after a poll interval (the horizon: every topic due
		// before then has been started), at the next instant beyond it
		// if that comes first, or, when the call returned as many
		// topics as it may, from the last one's instant on.
		wait := p.opts.PollInterval
		switch {
		case len(res.Topics) == dueTopicsLimit && len(res.At) == len(res.Topics):
			wait = min(max(res.At[len(res.At)-1].Sub(res.Now), 5*time.Millisecond), wait)
		case !res.Next.IsZero():
			wait = min(wait, max(res.Next.Sub(res.Now), time.Millisecond))
		}
		if !p.wait(localNow.Add(wait), &wake, sleepTmr, offset) {
			return
		}
		if wake == nil && unsub != nil {
			// The driver closed the subscription: subscribe again.
			unsub()
			unsub = nil
		}
	}
}

// wait sleeps until deadline (local clock), handing wake-ups of running
// topics to their claim loops; a wake-up for a topic that has none starts
// it if the timer is due within a poll interval, and otherwise brings the
// deadline forward to its due time.
// It returns false when the loop must stop. A closed wake channel is set
// to nil.
func (p *patternRunner) wait(deadline time.Time, wake *<-chan ontimedriver.TopicWake, tmr *time.Timer, offset time.Duration) bool {
	var ch <-chan ontimedriver.TopicWake
	if wake != nil {
		ch = *wake
	}
	for {
		d := time.Until(deadline)
		if d <= 0 {
			return true
		}
		tmr.Reset(d)
		select {
		case <-tmr.C:
			return true
		case wk, ok := <-ch:
			stopTimer(tmr)
			if !ok {
				*wake = nil
				return true
			}
			if wk.Topic == "" {
				return true // any topic: ask the index again
			}
			// A running claim loop takes the wake-up. A timer due
			// within a poll interval: start its topic's claim loop now
			// (it sleeps until the timer is due). On a Redis Cluster
			// the index hint follows the wake-up, so the index may not
			// list the topic yet. A later one: ask the index then.
			var first time.Time
			local := wk.Due.Add(-p.clockOffset(offset))
			if !wk.Due.IsZero() {
				first = local
			}
			near := wk.Due.IsZero() || time.Until(local) <= p.opts.PollInterval
			if r, ok := p.active[wk.Topic]; ok {
				if r.wake(wk.Due, first, near) {
					continue
				}
			} else if near {
				p.activate(wk.Topic, first)
				continue
			}
			if local.Before(deadline) {
				deadline = local
			}
		case <-p.quit:
			stopTimer(tmr)
			return false
		}
	}
}

// clockOffset is the store clock minus the local clock: the last claim's
// measure (see claimOffset), or def (the loop's own, from DueTopics)
// before any claim.
func (p *patternRunner) clockOffset(def time.Duration) time.Duration {
	if p.claimOffsetOK.Load() {
		return time.Duration(p.claimOffset.Load())
	}
	return def
}

// claimed records the clock offset a claim measured.
func (p *patternRunner) claimed(offset time.Duration) {
	p.claimOffset.Store(int64(offset))
	p.claimOffsetOK.Store(true)
}

func stopTimer(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
}

// dueTopics asks the index, reported to the Client's StoreCallHooks.
func (p *patternRunner) dueTopics(ctx context.Context) (*ontimedriver.DueTopicsResult, error) {
	start := time.Now()
	res, err := p.idx.DueTopics(ctx, p.pattern, p.opts.PollInterval, dueTopicsLimit)
	reportStoreCall(ctx, p.env.drv, "due_topics", "", start, err)
	return res, err
}

func (p *patternRunner) stopping() bool {
	select {
	case <-p.quit:
		return true
	default:
		return false
	}
}

// stop ends the loop, then stops every running topic gracefully (see
// Worker.Stop) and waits for those let go before.
func (p *patternRunner) stop(ctx context.Context) error {
	defer close(p.finished)
	close(p.quit)
	<-p.loopDone
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	for _, r := range p.active {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.stop(ctx); err != nil {
				mu.Lock()
				errs = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	p.leaving.Wait()
	p.keeper.stop()
	return errs
}
