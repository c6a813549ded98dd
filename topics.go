package ontime

import (
	"context"
	"fmt"
	"sync"
	"time"

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
// store which topics have a timer due, and starts serving a topic (a
// claim loop, a lease heartbeat and a settle batcher, as Handle does)
// only while it has timers due or in flight; a topic whose next timer is
// more than a PollInterval away is let go until the index says it is
// due. So an idle topic costs nothing, and a worker with 100,000 topics
// asks the store once per PollInterval, or at the next due instant, or
// when a publish wakes it.
//
// opts apply to each topic on its own: MaxConcurrency is per topic, as
// with Handle. A topic registered with Handle is served by that handler,
// not by a pattern; a topic that matches several patterns is served by the
// one registered first.
//
// The store must keep the topic index: the embedded store and the Redis
// driver's native layout on one node do, and on a Redis Cluster with
// ontimeredis.Options.ClusterTopicIndex; the faststream-compatible Redis
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
	idx, ok := w.client.orig.(ontimedriver.TopicIndex)
	if !ok || !idx.TopicIndexed() {
		return invalidf("HandleTopics %q: the store keeps no topic index (the faststream-compatible Redis layout cannot, so serve its topics with Handle; on a Redis Cluster set ontimeredis.Options.ClusterTopicIndex)", full)
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
// the store's topic index which are due and runs a runner (runner.go) for
// each topic while it has timers due or in flight.
type patternRunner struct {
	w       *Worker
	idx     ontimedriver.TopicIndex
	pattern string
	h       rawHandler
	opts    TopicOptions

	// active is owned by the loop goroutine (and by stop, after the loop
	// has ended).
	active map[string]*runner
	// idle receives a runner whose claim loop found its topic idle and
	// ended; the loop lets it go.
	idle chan *runner
	// leaving counts the runners let go that are still stopping.
	leaving sync.WaitGroup
	// linger is how long an idle topic's runner stays parked before it
	// is let go (see runner.park).
	linger time.Duration

	quit     chan struct{}
	loopDone chan struct{}
	finished chan struct{}
}

func newPatternRunner(w *Worker, idx ontimedriver.TopicIndex, pattern string, h rawHandler, o TopicOptions) *patternRunner {
	return &patternRunner{
		w: w, idx: idx, pattern: pattern, h: h, opts: o,
		active:   map[string]*runner{},
		linger:   max(10*o.PollInterval, 10*time.Second),
		idle:     make(chan *runner),
		quit:     make(chan struct{}),
		loopDone: make(chan struct{}),
		finished: make(chan struct{}),
	}
}

func (p *patternRunner) start() { go p.loop() }

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

// activate makes sure topic has a running runner; due is passed on as a
// wake-up to a runner that already runs. A new runner makes its first
// claim at once, or at firstAt (local clock) if that is set: a topic
// woken for a timer due a little later is not claimed before then.
func (p *patternRunner) activate(topic string, due, firstAt time.Time) {
	if r, ok := p.active[topic]; ok {
		select {
		case r.poke <- due:
		default: // a wake-up is pending already
		}
		return
	}
	if !p.owns(topic) {
		return
	}
	r := newRunner(p.w, topic, p.h, p.opts, p)
	r.firstAt = firstAt
	p.active[topic] = r
	r.start()
}

// letGo stops a runner whose claim loop found its topic idle. A wake-up
// forwarded to it after its last claim (still in its poke buffer) starts
// the topic again at once.
func (p *patternRunner) letGo(r *runner) {
	if p.active[r.topic] == r {
		delete(p.active, r.topic)
	}
	p.leaving.Add(1)
	go func() {
		defer p.leaving.Done()
		ctx, cancel := context.WithTimeout(context.Background(), p.w.cfg.ShutdownTimeout)
		defer cancel()
		if err := r.stop(ctx); err != nil {
			p.w.log.Warn("ontime: an idle topic did not stop cleanly", "topic", r.topic, "err", err)
		}
	}()
	select {
	case due := <-r.poke:
		p.activate(r.topic, due, time.Time{})
	default:
	}
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
		backoff  time.Duration
		offset   time.Duration // store clock - local clock
		repaired = time.Now()
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
	repairer, _ := p.idx.(ontimedriver.TopicIndexRepairer)
	if repairer != nil {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Minute)
		if err := repairer.SyncTopicIndex(rctx); err != nil && !p.stopping() {
			p.w.log.Warn("ontime: topic index repair at start failed; topics written before the index existed wait for their next publish or the next repair", "pattern", p.pattern, "err", err)
		}
		rcancel()
		if !repairer.NeedsIndexRepair() {
			repairer = nil
		}
	}
	repairEvery := p.w.cfg.TopicIndexRepair
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
				p.w.health.subscribeFailed(p.pattern, err)
			} else {
				wake, unsub = ch, c
				p.w.health.subscribed(p.pattern)
			}
		}
		if repairer != nil && repairEvery > 0 && time.Since(repaired) >= repairEvery {
			rctx, rcancel := context.WithTimeout(ctx, time.Minute)
			if err := repairer.SyncTopicIndex(rctx); err != nil && !p.stopping() {
				p.w.log.Warn("ontime: topic index repair failed; retrying at the next interval", "pattern", p.pattern, "err", err)
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
			p.w.health.fail("due_topics", err)
			backoff = nextBackoff(backoff, min(p.opts.PollInterval, maxOutageBackoff))
			if !p.wait(time.Now().Add(backoff), nil, sleepTmr, offset) {
				return
			}
			continue
		}
		backoff = 0
		p.w.health.ok()
		localNow := time.Now()
		offset = res.Now.Sub(localNow)
		// Start the topics due within the horizon that are not running,
		// each at its instant. A running topic is its runner's business:
		// the runner knows its next instant, and is woken by publishes.
		for i, t := range res.Topics {
			if r, running := p.active[t]; running {
				// A busy runner knows its topic's next instant; a
				// parked one is poked with it.
				if r.parked.Load() && i < len(res.At) {
					select {
					case r.poke <- res.At[i]:
					default:
					}
				}
				continue
			}
			var first time.Time
			if i < len(res.At) && res.At[i].After(res.Now) {
				first = res.At[i].Add(-offset)
			}
			p.activate(t, time.Time{}, first)
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
// topics to their runners and idle runners to letGo; a wake-up for a
// topic that is not running brings the deadline forward to its due time.
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
		case r := <-p.idle:
			stopTimer(tmr)
			p.letGo(r)
		case wk, ok := <-ch:
			stopTimer(tmr)
			if !ok {
				*wake = nil
				return true
			}
			if wk.Topic == "" {
				return true // any topic: ask the index again
			}
			if _, running := p.active[wk.Topic]; running {
				p.activate(wk.Topic, wk.Due, time.Time{})
				continue
			}
			// A timer due within a poll interval: start its topic now
			// (its runner sleeps until the timer is due). On a Redis
			// Cluster the index hint follows the wake-up, so the index
			// may not list the topic yet. A later one: ask the index
			// then.
			local := wk.Due.Add(-offset)
			if wk.Due.IsZero() {
				p.activate(wk.Topic, wk.Due, time.Time{})
				continue
			}
			if time.Until(local) <= p.opts.PollInterval {
				p.activate(wk.Topic, wk.Due, local)
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
	od, observed := p.w.client.drv.(*observedDriver)
	start := time.Now()
	res, err := p.idx.DueTopics(ctx, p.pattern, p.opts.PollInterval, dueTopicsLimit)
	if observed {
		od.report(ctx, "due_topics", "", start, err)
	}
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
	return errs
}

// park is called by a pattern-served runner's claim loop after a claim
// that took fewer timers than it asked for. The topic is idle when its
// next timer (or lease deadline: its running timers' included) is more
// than a poll interval away, or it has none: then the runner parks
// (reported true), asking the store nothing, until
// the pattern loop pokes it (a publish to the topic, or the topic's
// instant coming within the loop's horizon) and the poked instant comes,
// after which the claim loop claims again; or until it has been parked for
// the loop's linger time with nothing running, when it hands itself to the
// loop to be stopped (end true; also when the runner stops). Its running
// handlers need no claim loop: an outcome that reschedules a timer
// publishes a wake-up, and a lease that runs out is the topic's next
// instant in the index, so either pokes the runner. A parked runner costs its
// goroutines' memory and nothing per poll; keeping it for a while spares
// a topic that gets a timer every few seconds a stop and a start per
// timer.
func (r *runner) park(res *ontimedriver.ClaimResult, wake <-chan time.Time, tmr *time.Timer, offset time.Duration) (parked, end bool) {
	if r.pr == nil {
		return false, false
	}
	if !res.Next.IsZero() && res.Next.Sub(res.Now) <= r.opts.PollInterval {
		return false, false
	}
	r.parked.Store(true)
	defer r.parked.Store(false)
	linger := time.NewTimer(r.pr.linger)
	defer linger.Stop()
	var at time.Time // when to claim (local clock); zero: no poke yet
	for {
		var tc <-chan time.Time
		if !at.IsZero() {
			d := time.Until(at)
			if d <= 0 {
				return true, false
			}
			tmr.Reset(d)
			tc = tmr.C
		}
		select {
		case <-tc:
			return true, false
		case due := <-wake:
			if !at.IsZero() {
				stopTimer(tmr)
			}
			local := due.Add(-offset)
			if due.IsZero() || !local.After(time.Now()) {
				return true, false
			}
			if at.IsZero() || local.Before(at) {
				at = local
			}
		case <-linger.C:
			if !at.IsZero() {
				stopTimer(tmr)
				return true, false // poked meanwhile: claim now, park again later
			}
			if len(r.slots) > 0 {
				linger.Reset(r.pr.linger) // handlers still run: not idle
				continue
			}
			select {
			case r.pr.idle <- r:
			case <-r.stopClaims:
			case <-r.pr.quit:
				<-r.stopClaims // the loop's stop stops every runner it has
			}
			return true, true
		case <-r.stopClaims:
			if !at.IsZero() {
				stopTimer(tmr)
			}
			return true, true
		}
	}
}
