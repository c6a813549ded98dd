package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/ontimedriver"
)

// ErrClosed is returned by Watch after Shutdown began.
var ErrClosed = errors.New("delivery: shutting down")

// ErrNotServed is returned by Watch for a topic this server does not
// deliver (neither configured nor matching serve_topics).
var ErrNotServed = errors.New("delivery: topic not served by this server")

// Options configure a Dispatcher.
type Options struct {
	Client *ontime.Client
	Config *config.Config // filled and validated
	Logger *slog.Logger
	// OpenRedis gives redis-stream targets their client; nil means no
	// redis-stream targets.
	OpenRedis RedisOpener
	// ReapAfter stops the worker of a topic that is not configured, has no
	// watcher and has held no timer for this long. Default 1m.
	ReapAfter time.Duration
	// WatchWorker, when set, is called with each worker the dispatcher
	// starts (to report its health in the metrics); the func it returns is
	// called when that worker is stopped for being idle.
	WatchWorker func(*ontime.Worker) (unwatch func())
	// Hooks are the Client's hooks (ontime.Config.Hooks). The timers the
	// dispatcher claims itself for confirming watchers (see Watch) are
	// reported to those that implement ontime.DeliveryStartHook and
	// ontime.DeliveryEndHook, as a worker reports its deliveries.
	Hooks []any
}

// Dispatcher delivers the topics this server serves: the configured ones
// and those that match serve_topics (Config.Serves), never others, so a
// server does not take the timers of topics that belong to other
// consumers.
//
// On a store that keeps a topic index (the embedded store, Redis's native
// layout) it runs one ontime.Worker: a handler per configured topic, and
// one ontime.HandleTopics loop per serve_topics pattern, which finds the
// due topics in the index however many there are, so idle topics cost
// nothing. On the faststream-compatible layout (no index) it runs one
// Worker per topic: the configured ones (started at once), those the API
// schedules on (Ensure) and those found by polling the store's topic list
// every Config.DiscoverInterval (timers published by other processes).
type Dispatcher struct {
	o   Options
	log *slog.Logger

	// indexed: one shared worker serves every topic (see above).
	indexed       bool
	shared        *ontime.Worker
	sharedUnwatch func()
	sharedDone    chan struct{}

	mu      sync.Mutex
	closing bool
	topics  map[string]*topicRun
	broken  map[string]bool // topics whose worker could not start; not retried
	wg      sync.WaitGroup  // worker Run goroutines and reaped stops

	stopDiscover chan struct{}
	discoverDone chan struct{}

	delivered atomic.Int64
	failed    atomic.Int64
	hooks     hookSet // of the timers claimed for watchers (claimer.go)

	kafka *KafkaClients // the kafka targets' clients, closed by Shutdown
}

// topicRun is one topic's worker, target and watchers.
type topicRun struct {
	d          *Dispatcher
	name       string
	target     Target
	worker     *ontime.Worker
	configured bool
	lastSeen   time.Time // guarded by d.mu
	unwatch    func()    // from Options.WatchWorker; nil without
	ackWait    time.Duration
	window     int

	// The watchers (watch.go), guarded by wmu.
	wmu        sync.Mutex
	confirmers []*Watcher       // confirming watchers, who take the timers
	taps       []*Watcher       // watchers who see copies
	queue      holdHeap         // timers waiting for a confirming watcher, see order.go
	pending    map[string]*hold // by event id: sent to a watcher (or about to be), unconfirmed
	session    *watchSession    // the pump and claimer while there are confirmers
	rr         int              // where the pump's next search for a watcher starts
	kick       chan struct{}    // a timer was queued; buffer 1
	credit     chan struct{}    // a watcher has room again; buffer 1
}

// New checks every configured target and returns a Dispatcher; Start
// starts it.
func New(o Options) (*Dispatcher, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReapAfter == 0 {
		o.ReapAfter = time.Minute
	}
	d := &Dispatcher{
		o: o, log: o.Logger,
		topics:       map[string]*topicRun{},
		broken:       map[string]bool{},
		stopDiscover: make(chan struct{}),
		discoverDone: make(chan struct{}),
		sharedDone:   make(chan struct{}),
		kafka:        &KafkaClients{},
		hooks:        newHookSet(o.Hooks, o.Logger),
	}
	_, d.indexed = ontimedriver.IndexedTopics(o.Client.Driver())
	// Build every configured target now, so that a bad one fails the start.
	for _, name := range slices.Sorted(maps.Keys(o.Config.Topics)) {
		tc := o.Config.TopicConfig(name)
		if _, err := NewTarget(name, tc.Target, o.Logger, o.OpenRedis, d.kafka); err != nil {
			d.kafka.Close()
			return nil, err
		}
		warnUnsigned(o.Logger, name, tc.Target)
	}
	if o.Config.Defaults.Target != nil {
		if _, err := NewTarget("(defaults)", o.Config.Defaults.Target, o.Logger, o.OpenRedis, d.kafka); err != nil {
			d.kafka.Close()
			return nil, err
		}
		warnUnsigned(o.Logger, "(defaults)", o.Config.Defaults.Target)
	}
	return d, nil
}

// warnUnsigned warns that an http target without a secret sends no
// webhook-signature, so its receiver cannot tell ontime from anyone else,
// and that one with legacy_signature still sends Ontime-Signature.
func warnUnsigned(log *slog.Logger, topic string, tc *config.Target) {
	if tc == nil || tc.Type != config.TargetHTTP {
		return
	}
	if keys, err := tc.WebhookKeys(); err == nil && len(keys) == 0 {
		log.Warn("http target has no secret: its requests carry no webhook-signature; set secret or secret_env", "topic", topic)
	}
	if tc.LegacySignature {
		log.Warn("http target sends the deprecated Ontime-Signature (legacy_signature); move its receiver to webhook-signature, the option goes in the next release", "topic", topic)
	}
}

// Start starts the configured topics and, when serve_topics has an entry,
// the discovery loop (or, on a store with a topic index, the one worker
// that serves them all). An error means nothing was started.
func (d *Dispatcher) Start() error {
	if d.indexed {
		return d.startShared()
	}
	for name := range d.o.Config.Topics {
		d.Ensure(name)
	}
	if len(d.o.Config.ServeTopics) == 0 {
		close(d.discoverDone) // only the configured topics: nothing to discover
		d.log.Info("delivering only the configured topics (serve_topics is empty)", "topics", len(d.o.Config.Topics))
		return nil
	}
	go d.discover()
	return nil
}

// startShared runs the one worker of a store with a topic index: a
// handler per configured topic, with its own options, and a HandleTopics
// loop per serve_topics pattern, with the default options.
func (d *Dispatcher) startShared() error {
	cfg := d.o.Config
	w := ontime.NewWorker(d.o.Client, &ontime.WorkerConfig{
		Logger:          d.log,
		ShutdownTimeout: cfg.ShutdownTimeout.D(),
	})
	d.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(cfg.Topics)) {
		tr, err := d.newRun(name)
		if err == nil {
			err = ontime.Handle(w, name, tr.handle, topicOptions(cfg.TopicConfig(name)))
		}
		if err != nil {
			d.mu.Unlock()
			return fmt.Errorf("topic %q: %w", name, err)
		}
		d.topics[name] = tr
	}
	d.mu.Unlock()
	seen := map[string]bool{}
	for _, p := range cfg.ServeTopics {
		if seen[p] {
			continue
		}
		seen[p] = true
		// The defaults (the empty name is never a configured topic).
		if err := ontime.HandleTopics(w, p, d.handleServed, topicOptions(cfg.TopicConfig(""))); err != nil {
			return fmt.Errorf("serve_topics %q: %w", p, err)
		}
	}
	if len(cfg.Topics) == 0 && len(seen) == 0 {
		close(d.sharedDone)
		close(d.discoverDone)
		d.log.Info("delivering no topics (no [topics] and serve_topics is empty)")
		return nil
	}
	d.shared = w
	if d.o.WatchWorker != nil {
		d.sharedUnwatch = d.o.WatchWorker(w)
	}
	go func() {
		defer close(d.sharedDone)
		if err := w.Run(context.Background()); err != nil {
			d.log.Error("worker stopped", "err", err)
		}
	}()
	go d.reapLoop()
	d.log.Info("delivering from the store's topic index: one worker for every topic", "configured", len(cfg.Topics), "serve_topics", cfg.ServeTopics)
	return nil
}

// handleServed delivers a timer of a topic found through serve_topics.
func (d *Dispatcher) handleServed(ctx context.Context, m *ontime.Message[[]byte]) error {
	tr := d.ensure(m.Topic)
	if tr == nil {
		// Shutting down (or the topic's target cannot be built: logged):
		// the timer stays, due again later.
		return ontime.RetryAfter(time.Second, fmt.Errorf("topic %q cannot be delivered now", m.Topic))
	}
	return tr.handle(ctx, m)
}

// reapLoop forgets, every DiscoverInterval, the idle topics of the shared
// worker (see reap).
func (d *Dispatcher) reapLoop() {
	defer close(d.discoverDone)
	t := time.NewTicker(d.o.Config.DiscoverInterval.D())
	defer t.Stop()
	for {
		select {
		case <-d.stopDiscover:
			return
		case <-t.C:
			d.reap()
		}
	}
}

// topicOptions are a topic's worker options from its configuration.
func topicOptions(tc config.Topic) *ontime.TopicOptions {
	return &ontime.TopicOptions{
		MaxConcurrency: tc.Concurrency,
		Lease:          tc.Lease.D(),
		Retry: ontime.RetryPolicy{
			MinDelay:    tc.Retry.MinDelay.D(),
			MaxDelay:    tc.Retry.MaxDelay.D(),
			Multiplier:  tc.Retry.Multiplier,
			Jitter:      tc.Retry.Jitter,
			MaxAttempts: int(tc.Retry.MaxAttempts),
		},
	}
}

// Ensure makes sure topic has a running worker if this server serves it
// (Config.Serves). It is cheap when it has. With a topic index there is
// nothing to start (the shared worker finds the topic when it is due);
// Ensure then only keeps the topic's watchers and target ready.
func (d *Dispatcher) Ensure(topic string) {
	d.ensure(topic)
}

// Serves reports whether this server delivers topic.
func (d *Dispatcher) Serves(topic string) bool { return d.o.Config.Serves(topic) }

func (d *Dispatcher) ensure(topic string) *topicRun {
	if !d.o.Config.Serves(topic) {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		// The workers are stopping or stopped: a watcher would wait for
		// timers that never come.
		return nil
	}
	if tr, ok := d.topics[topic]; ok {
		tr.lastSeen = time.Now()
		return tr
	}
	if d.broken[topic] {
		return nil
	}
	tr, err := d.start(topic)
	if err != nil {
		d.broken[topic] = true
		d.log.Error("cannot deliver topic", "topic", topic, "err", err)
		return nil
	}
	d.topics[topic] = tr
	return tr
}

// newRun builds a topic's target and watcher state, without a worker.
func (d *Dispatcher) newRun(topic string) (*topicRun, error) {
	tc := d.o.Config.TopicConfig(topic)
	target, err := NewTarget(topic, tc.Target, d.log, d.o.OpenRedis, d.kafka)
	if err != nil {
		return nil, err
	}
	_, configured := d.o.Config.Topics[topic]
	ackWait := tc.Lease.D()
	if ackWait <= 0 {
		ackWait = config.DefaultLease
	}
	return &topicRun{
		d: d, name: topic, target: target, configured: configured, lastSeen: time.Now(),
		ackWait: ackWait, window: tc.WatchWindowOrDefault(), pending: map[string]*hold{},
		kick: make(chan struct{}, 1), credit: make(chan struct{}, 1),
	}, nil
}

// start builds a topic's run and, without a topic index, runs its
// worker; d.mu is held.
func (d *Dispatcher) start(topic string) (*topicRun, error) {
	tr, err := d.newRun(topic)
	if err != nil || d.indexed {
		return tr, err
	}
	cfg := d.o.Config
	w := ontime.NewWorker(d.o.Client, &ontime.WorkerConfig{
		Logger:          d.log,
		ShutdownTimeout: cfg.ShutdownTimeout.D(),
	})
	if err := ontime.Handle(w, topic, tr.handle, topicOptions(cfg.TopicConfig(topic))); err != nil {
		return nil, err
	}
	tr.worker = w
	if d.o.WatchWorker != nil {
		tr.unwatch = d.o.WatchWorker(w)
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := w.Run(context.Background()); err != nil {
			d.log.Error("worker stopped", "topic", topic, "err", err)
		}
	}()
	d.log.Debug("delivering topic", "topic", topic, "target", tr.target.Kind())
	return tr, nil
}

// discover polls the store's topic list and reaps idle topics.
func (d *Dispatcher) discover() {
	defer close(d.discoverDone)
	every := d.o.Config.DiscoverInterval.D()
	t := time.NewTicker(every)
	defer t.Stop()
	var failing bool
	for {
		select {
		case <-d.stopDiscover:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		topics, err := d.o.Client.Topics(ctx)
		cancel()
		if err != nil {
			if !failing {
				d.log.Warn("cannot list topics", "err", err)
				failing = true
			}
			continue
		}
		failing = false
		for _, name := range topics {
			d.ensure(name) // only those it serves
		}
		d.reap()
	}
}

// reap stops the workers of idle, unconfigured, unwatched topics.
func (d *Dispatcher) reap() {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, tr := range d.topics {
		if tr.configured || now.Sub(tr.lastSeen) < d.o.ReapAfter || tr.watchers() > 0 {
			continue
		}
		delete(d.topics, name)
		if tr.worker == nil {
			continue // served by the shared worker: nothing to stop
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), d.o.Config.ShutdownTimeout.D())
			defer cancel()
			_ = tr.worker.Stop(ctx)
			if tr.unwatch != nil {
				tr.unwatch()
			}
			d.log.Debug("stopped idle topic", "topic", name)
		}()
	}
}

// Shutdown stops discovery and every worker gracefully (see
// ontime.Worker.Stop), in parallel, within ctx.
func (d *Dispatcher) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return nil
	}
	d.closing = true
	runs := make([]*topicRun, 0, len(d.topics))
	for _, tr := range d.topics {
		runs = append(runs, tr)
	}
	d.mu.Unlock()
	close(d.stopDiscover)
	<-d.discoverDone
	// Watchers first: their timers go back to the store, due at once.
	for _, tr := range runs {
		tr.releaseWatchers()
	}

	errs := make([]error, len(runs)+1)
	var wg sync.WaitGroup
	for i, tr := range runs {
		if tr.worker == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = tr.worker.Stop(ctx)
		}()
	}
	if d.shared != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[len(runs)] = d.shared.Stop(ctx)
			<-d.sharedDone
			if d.sharedUnwatch != nil {
				d.sharedUnwatch()
			}
		}()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	d.kafka.Close()
	return errors.Join(errs...)
}

// Counters are the dispatcher's numbers since it started.
type Counters struct {
	Delivered, Failed int64
	Workers, Watchers int
}

// Counters returns the dispatcher's numbers.
func (d *Dispatcher) Counters() Counters {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := Counters{Delivered: d.delivered.Load(), Failed: d.failed.Load(), Workers: len(d.topics)}
	for _, tr := range d.topics {
		c.Watchers += tr.watchers()
	}
	return c
}

// Topics returns the topics being served: with a running worker, or,
// with a topic index, known to the shared worker (configured, watched or
// delivered within ReapAfter).
func (d *Dispatcher) Topics() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.topics))
	for name := range d.topics {
		out = append(out, name)
	}
	return out
}

// handle is the topic's handler: to the confirming watchers while there
// is one (the handler then waits for the confirmation), else to the
// target. Watchers who only look get a copy either way.
func (tr *topicRun) handle(ctx context.Context, m *ontime.Message[[]byte]) error {
	msg := &Message{
		ID: m.ID, Topic: m.Topic, Due: m.Due, Attempt: m.Attempt, Headers: m.Headers,
		CorrelationID: m.CorrelationID, ContentType: m.ContentType, Body: m.Body,
	}
	tr.tapCopy(msg)
	if h := tr.offer(msg); h != nil {
		select {
		case r := <-h.done:
			switch r {
			case holdConfirmed:
				tr.d.delivered.Add(1)
				return nil
			case holdUnconfirmed:
				tr.d.failed.Add(1)
				return ontime.RetryAfter(0, errUnconfirmed)
			case holdReleased:
				return ontime.Snooze(0)
			}
			// holdNobody: the last watcher left before it was sent; the
			// target takes it.
		case <-ctx.Done():
			tr.abandon(h)
			return ctx.Err()
		}
	}
	err := tr.target.Deliver(ctx, msg)
	if err != nil {
		tr.d.failed.Add(1)
		tr.d.log.Warn("delivery failed", "topic", tr.name, "id", m.ID, "target", tr.target.Kind(), "attempt", m.Attempt, "err", err)
		return err
	}
	tr.d.delivered.Add(1)
	return nil
}
