package ontime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// WorkerConfig configures a Worker. The zero value (or nil) means the
// defaults.
type WorkerConfig struct {
	// Logger defaults to the Client's.
	Logger *slog.Logger
	// ShutdownTimeout bounds the graceful stop Run performs when its context
	// is cancelled: handlers get this long to finish before their contexts
	// are cancelled. Default 15s. (Stop takes its bound from its context.)
	ShutdownTimeout time.Duration
	// Defaults applies to every topic for the fields its TopicOptions leave
	// zero.
	Defaults TopicOptions
	// Middleware runs around every handler call of the worker, the first
	// outermost (see [Middleware]). Default none.
	Middleware []Middleware
	// TopicIndexRepair is how often a HandleTopics loop repairs a topic
	// index that can miss hints (a Redis Cluster: see
	// ontimedriver.TopicIndexRepairer), reading every topic once. Default
	// 5m; negative: never. Every loop repairs the index once when it
	// starts, on any store that can (topics written before the store kept
	// an index are in none); stores whose index cannot miss a hint are
	// not repaired again.
	TopicIndexRepair time.Duration
}

// Worker runs handlers for topics. Register handlers with Handle (on the
// Worker or a Router of it), then call Run. Any number of Workers, in any
// number of processes, may serve the same topics: each due timer is leased
// to one of them at a time.
type Worker struct {
	client *Client
	log    *slog.Logger
	cfg    WorkerConfig
	health healthTracker
	env    workerEnv // what its topics share

	mu       sync.Mutex
	runners  map[string]*runner
	order    []*runner
	patterns []*patternRunner // HandleTopics, in registration order
	state    int              // 0 new, 1 running, 2 stopping, 3 stopped
	stopped  chan struct{}
	done     chan struct{}
	stopErr  error
}

// NewWorker returns a Worker on c's store.
func NewWorker(c *Client, cfg *WorkerConfig) *Worker {
	var wc WorkerConfig
	if cfg != nil {
		wc = *cfg
	}
	if wc.Logger == nil {
		wc.Logger = c.log
	}
	if wc.ShutdownTimeout == 0 {
		wc.ShutdownTimeout = 15 * time.Second
	}
	wc.Defaults = wc.Defaults.withDefaults()
	// A nil middleware is skipped (and the caller's slice is not shared).
	mws := make([]Middleware, 0, len(wc.Middleware))
	for _, m := range wc.Middleware {
		if m != nil {
			mws = append(mws, m)
		}
	}
	wc.Middleware = mws
	w := &Worker{
		client:  c,
		log:     wc.Logger,
		cfg:     wc,
		runners: map[string]*runner{},
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
	}
	w.health.init(w.log)
	w.env = workerEnv{
		drv: c.drv, log: w.log, health: &w.health, hooks: &c.hooks,
		middleware: wc.Middleware, lenient: c.lenient,
	}
	return w
}

func (w *Worker) register(topic string, h rawHandler, opts *TopicOptions) error {
	full, err := w.client.fullTopic(topic)
	if err != nil {
		return fmt.Errorf("Handle: %w", err)
	}
	o, err := w.topicOptions(full, opts)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != 0 {
		return fmt.Errorf("Handle %q: the worker is already running", full)
	}
	if _, dup := w.runners[full]; dup {
		return fmt.Errorf("%w: Handle: topic %q already has a handler", ErrInvalid, full)
	}
	r := newRunner(&w.env, full, h, o, nil, nil)
	w.runners[full] = r
	w.order = append(w.order, r)
	return nil
}

// topicOptions merges opts with the worker's defaults and checks them
// (resolveOptions), and sets ClaimAhead's default for the store.
func (w *Worker) topicOptions(name string, opts *TopicOptions) (TopicOptions, error) {
	o, err := resolveOptions(name, opts, w.cfg.Defaults)
	if err != nil {
		return o, err
	}
	switch {
	case o.ClaimAhead < 0:
		o.ClaimAhead = 0
	case o.ClaimAhead == 0 && ontimedriver.ClaimsAreSlow(w.client.drv):
		o.ClaimAhead = o.ClaimBatch
	}
	return o, nil
}

// Router namespaces topics: handlers registered through it get prefix
// glued in front of their topic (after the Client's prefix).
type Router struct {
	w      *Worker
	prefix string
}

// Router returns a Router that registers on w with prefix.
func (w *Worker) Router(prefix string) *Router { return &Router{w: w, prefix: prefix} }

// Router returns a nested Router: its prefix follows r's.
func (r *Router) Router(prefix string) *Router { return &Router{w: r.w, prefix: r.prefix + prefix} }

func (r *Router) register(topic string, h rawHandler, opts *TopicOptions) error {
	if topic == "" {
		return invalidf("Handle: topic is empty")
	}
	return r.w.register(r.prefix+topic, h, opts)
}

// Run serves the registered topics until ctx is cancelled or Stop is called,
// then stops gracefully (see Stop; when ctx ends, handlers get
// WorkerConfig.ShutdownTimeout to finish). It returns nil after a clean
// stop; after an unclean one (handlers had to be cancelled, or outcomes
// were given up: see Stop) an error that wraps the stop's context error
// (context.DeadlineExceeded when ShutdownTimeout ran out), whichever of ctx
// and Stop started it; or the error that prevented it from starting
// (ErrStopped, ErrInvalid).
//
// Handlers' contexts carry ctx's values (a logger, a trace, request-scoped
// data put there before Run), but not its cancellation: ending ctx starts
// the graceful stop, which cancels handlers only when its time runs out.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	switch {
	case w.state != 0:
		w.mu.Unlock()
		return fmt.Errorf("%w: Run called twice", ErrStopped)
	case len(w.order) == 0 && len(w.patterns) == 0:
		w.mu.Unlock()
		return invalidf("Run: no handlers registered")
	}
	w.state = 1
	runners := append([]*runner(nil), w.order...)
	patterns := append([]*patternRunner(nil), w.patterns...)
	// Started under w.mu: a Stop (shutdown takes w.mu to begin) then
	// stops topics that have started, never one whose start is under way.
	base := context.WithoutCancel(ctx)
	for _, r := range runners {
		r.start(base, time.Time{})
	}
	for _, p := range patterns {
		p.start(base)
	}
	w.mu.Unlock()
	defer close(w.done)

	var err error
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ShutdownTimeout)
		defer cancel()
		err = w.shutdown(sctx)
	case <-w.stopped:
		w.mu.Lock()
		err = w.stopErr
		w.mu.Unlock()
	}
	// Either path ends with every runner shut down.
	for _, r := range runners {
		<-r.finished
	}
	for _, p := range patterns {
		<-p.finished
	}
	if err != nil {
		return fmt.Errorf("ontime: the worker did not stop cleanly (handlers cancelled, or outcomes given up; see Worker.Stop): %w", err)
	}
	return nil
}

// Stop stops the worker gracefully, like http.Server.Shutdown: it stops
// claiming, hands claimed timers whose handlers have not started back to the
// store (due at once), and waits for running handlers until ctx ends. Then
// it cancels the handlers' contexts; a timer whose handler was cancelled and
// returned an error is due again at once, neither lost nor acked.
// Outcomes that the store has not taken yet (during an outage) are retried
// until ctx ends; then each gets one last try, and those still not settled
// are given up: their timers are delivered again when their leases expire.
// So Stop returns within seconds of ctx's end even with the store down or
// hung: what it still waits for then is bounded (a claim in flight and the
// last settle try by a third of the lease, between 2 s and 5 s each;
// handlers that ignore their cancelled context by a 2 s grace, after which
// they are abandoned). Stop returns ctx's error if handlers had to be
// cancelled or outcomes were given up, nil otherwise, and waits for Run to
// return. Calling Stop on a Worker that never ran marks it
// stopped (Run then returns ErrStopped); calling Stop again is harmless.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if w.state == 0 {
		// Never ran: there is nothing to stop, and Run will refuse to start.
		w.state = 3
		close(w.stopped)
		close(w.done)
		w.mu.Unlock()
		return nil
	}
	w.mu.Unlock()
	err := w.shutdown(ctx)
	// Every runner has finished (a handler that ignores its cancelled
	// context is abandoned after a short grace period), so Run returns
	// promptly.
	<-w.done
	return err
}

// shutdown runs the graceful stop once; later callers wait for it.
func (w *Worker) shutdown(ctx context.Context) error {
	w.mu.Lock()
	if w.state >= 2 {
		w.mu.Unlock()
		<-w.stopped
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.stopErr
	}
	w.state = 2
	runners := append([]*runner(nil), w.order...)
	patterns := append([]*patternRunner(nil), w.patterns...)
	w.mu.Unlock()

	var wg sync.WaitGroup
	errs := make([]error, len(runners)+len(patterns))
	for i, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.stop(ctx)
		}()
	}
	for i, p := range patterns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[len(runners)+i] = p.stop(ctx)
		}()
	}
	wg.Wait()
	w.mu.Lock()
	w.state = 3
	if errors.Join(errs...) != nil {
		w.stopErr = ctx.Err()
	}
	err := w.stopErr
	w.mu.Unlock()
	close(w.stopped)
	return err
}
