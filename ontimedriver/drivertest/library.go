package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
)

// RunLibrary runs the library-level conformance suite: the same store, seen
// through the public API of package ontime (a Client publishing, Workers
// handling). Where Run checks the store contract call by call, RunLibrary
// checks what a user is promised: delivery with the right fields, never
// early, cancel and reschedule, the concurrency bound, retries, dead
// letters, re-arming, wake-ups, heartbeats, graceful and forced stops, and
// clear errors for bad input.
//
// Each case is a parallel subtest with its own driver from h.New; cases that
// need a second worker process build it on h.NewPeer. Features the driver
// lacks (h.Lacks) and drivers that accept legacy payloads
// (ontimedriver.LegacyPayloads) relax or skip the checks that need them,
// always with a log line or a skip that says so.
//
// Times are read from the store's clock (a claim on an empty topic) inside
// handlers, so "never early" is checked strictly against the due time the
// store reported; lateness bounds are generous.
func RunLibrary(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("drivertest: Harness.New is nil")
	}
	for _, c := range libraryCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(newLib(t, h))
		})
	}
}

type libCase struct {
	name string
	fn   func(l *lib)
}

func libraryCases() []libCase {
	return []libCase{
		{"Delivery", libDelivery},
		{"NeverEarly", libNeverEarly},
		{"Cancel", libCancel},
		{"Reschedule", libReschedule},
		{"IfAbsent", libIfAbsent},
		{"Concurrency", libConcurrency},
		{"TwoWorkers", libTwoWorkers},
		{"Retry", libRetry},
		{"Reject", libReject},
		{"Snooze", libSnooze},
		{"LongestDelays", libLongestDelays},
		{"MaxAttempts", libMaxAttempts},
		{"DeadLetterOutcome", libDeadLetterOutcome},
		{"Undecodable", libUndecodable},
		{"Rearm", libRearm},
		{"Topics", libTopics},
		{"Panic", libPanic},
		{"Manual", libManual},
		{"Wake", libWake},
		{"Heartbeat", libHeartbeat},
		{"NoHeartbeat", libNoHeartbeat},
		{"LeaseLostCancels", libLeaseLostCancels},
		{"GracefulStop", libGracefulStop},
		{"ForcedStop", libForcedStop},
		{"RunContext", libRunContext},
		{"BadInput", libBadInput},
		{"Batch", libBatch},
		{"Inspect", libInspect},
		{"StopDuringOutage", libStopDuringOutage},
		{"AckAfterShortOutage", libAckAfterShortOutage},
		{"AckAfterLongOutage", libAckAfterLongOutage},
		{"SubscribeOutage", libSubscribeOutage},
		{"TopicsPattern", libTopicsPattern},
		{"TopicsWake", libTopicsWake},
		{"TopicsRetry", libTopicsRetry},
		{"TopicsTwoWorkers", libTopicsTwoWorkers},
		{"TopicsLongHandler", libTopicsLongHandler},
		{"RecurringThreeWorkers", libRecurringThreeWorkers},
		{"RecurringUpsertWhileRunning", libRecurringUpsertWhileRunning},
		{"RecurringCancelWhileRunning", libRecurringCancelWhileRunning},
		{"RecurringPauseResume", libRecurringPauseResume},
		{"RecurringMissedOnce", libRecurringMissedOnce},
		{"RecurringMissedEach", libRecurringMissedEach},
		{"RecurringJitter", libRecurringJitter},
		{"RecurringNoOverlap", libRecurringNoOverlap},
	}
}

// lib is what a library case works with: the driver-level env plus a
// logger and helpers to build clients and workers.
type lib struct {
	*env
	legacy bool
	log    *slog.Logger
}

func newLib(t *testing.T, h Harness) *lib {
	e := newEnv(t, h)
	lp, ok := ontimedriver.As[ontimedriver.LegacyPayloads](e.d)
	w := &testLogWriter{t: t}
	// Registered before any worker's cleanup, so it runs after them: logs
	// stop reaching t once the case is over.
	t.Cleanup(w.close)
	return &lib{
		env:    e,
		legacy: ok && lp.AcceptsLegacyPayloads(),
		log:    slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// testLogWriter sends library logs to t.Log while the case runs.
type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func (w *testLogWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// client returns a Client on the case's driver.
func (l *lib) client(cfg *ontime.Config) *ontime.Client {
	l.t.Helper()
	return l.clientOn(l.d, cfg)
}

// clientOn returns a Client on d, logging to the test.
func (l *lib) clientOn(d ontimedriver.Driver, cfg *ontime.Config) *ontime.Client {
	l.t.Helper()
	var c ontime.Config
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = l.log
	}
	cl, err := ontime.NewClient(d, &c)
	if err != nil {
		l.t.Fatalf("NewClient: %v", err)
	}
	return cl
}

// peerClient returns a Client on the peer driver (a second worker process).
func (l *lib) peerClient() *ontime.Client {
	l.t.Helper()
	return l.clientOn(l.peer(), nil)
}

// running is a Worker whose Run is in a goroutine.
type running struct {
	l    *lib
	w    *ontime.Worker
	done chan error
	once sync.Once
	err  error
}

// start builds a Worker on c, lets register add handlers, and runs it until
// the case ends (or stop is called).
func (l *lib) start(c *ontime.Client, cfg *ontime.WorkerConfig, register func(w *ontime.Worker) error) *running {
	l.t.Helper()
	w := ontime.NewWorker(c, cfg)
	if err := register(w); err != nil {
		l.t.Fatalf("registering handlers: %v", err)
	}
	r := &running{l: l, w: w, done: make(chan error, 1)}
	go func() { r.done <- w.Run(context.Background()) }()
	l.t.Cleanup(func() { r.stop(10 * time.Second) })
	return r
}

// stop stops the worker with a deadline and waits for Run to return. Only
// the first call stops; later calls return the first one's error.
func (r *running) stop(timeout time.Duration) error {
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r.err = r.w.Stop(ctx)
		select {
		case err := <-r.done:
			// Run reports the stop as Stop does: nil after a clean stop,
			// an error wrapping Stop's after an unclean one.
			switch {
			case r.err == nil && err != nil:
				r.l.t.Errorf("Worker.Run returned %v after a clean Stop", err)
			case r.err != nil && !errors.Is(err, r.err):
				r.l.t.Errorf("Worker.Run returned %v after an unclean Stop (%v), want an error wrapping Stop's", err, r.err)
			}
		case <-time.After(timeout + 5*time.Second):
			r.l.t.Errorf("Worker.Run did not return within %v of Stop", timeout+5*time.Second)
		}
	})
	return r.err
}

// storeNow reads the store's clock without failing the test, so handlers
// can call it.
func (l *lib) storeNow() (time.Time, error) {
	res, err := l.d.Claim(context.Background(), clockTopic, 1, time.Second)
	if err != nil {
		return time.Time{}, err
	}
	return res.Now, nil
}

// seen is one delivery as a handler saw it.
type seen[T any] struct {
	Msg ontime.Message[T]
	// StoreNow is the store's clock when the handler started.
	StoreNow time.Time
	// End is the store's clock when the handler returned (only when the
	// collector was asked to read it).
	End time.Time
	// Nth counts the deliveries of this id before this one.
	Nth int
}

// collector records every delivery of a handler and then runs then (nil
// means ack).
type collector[T any] struct {
	l       *lib
	then    func(ctx context.Context, m *ontime.Message[T], nth int) error
	readEnd bool

	mu   sync.Mutex
	got  []seen[T]
	errs []error
}

func collect[T any](l *lib, then func(ctx context.Context, m *ontime.Message[T], nth int) error) *collector[T] {
	return &collector[T]{l: l, then: then}
}

func (c *collector[T]) handle(ctx context.Context, m *ontime.Message[T]) error {
	now, err := c.l.storeNow()
	c.mu.Lock()
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("reading the store clock: %w", err))
	}
	nth := 0
	for _, s := range c.got {
		if s.Msg.ID == m.ID {
			nth++
		}
	}
	i := len(c.got)
	c.got = append(c.got, seen[T]{Msg: *m, StoreNow: now, Nth: nth})
	c.mu.Unlock()
	var herr error
	if c.then != nil {
		herr = c.then(ctx, m, nth)
	}
	if c.readEnd {
		end, err := c.l.storeNow()
		c.mu.Lock()
		c.got[i].End = end
		if err != nil {
			c.errs = append(c.errs, err)
		}
		c.mu.Unlock()
	}
	return herr
}

// all returns the deliveries so far, and fails the test if a handler could
// not read the store's clock.
func (c *collector[T]) all() []seen[T] {
	c.l.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, err := range c.errs {
		c.l.t.Errorf("in a handler: %v", err)
	}
	c.errs = nil
	return append([]seen[T](nil), c.got...)
}

// of returns the deliveries of one id.
func (c *collector[T]) of(id string) []seen[T] {
	c.l.t.Helper()
	var out []seen[T]
	for _, s := range c.all() {
		if s.Msg.ID == id {
			out = append(out, s)
		}
	}
	return out
}

func (c *collector[T]) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func (c *collector[T]) countOf(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.got {
		if s.Msg.ID == id {
			n++
		}
	}
	return n
}

// wait waits until n deliveries were seen.
func (c *collector[T]) wait(n int, timeout time.Duration, what string) {
	c.l.t.Helper()
	WaitFor(c.l.t, timeout, func() bool { return c.count() >= n }, what)
}

// waitOf waits until id was delivered n times.
func (c *collector[T]) waitOf(id string, n int, timeout time.Duration, what string) {
	c.l.t.Helper()
	WaitFor(c.l.t, timeout, func() bool { return c.countOf(id) >= n }, what)
}

// publish publishes one timer and fails the test on an error.
func (l *lib) publish(c *ontime.Client, topic string, body any, opts ...ontime.PublishOption) string {
	l.t.Helper()
	id, err := c.Publish(l.ctx, topic, body, opts...)
	if err != nil {
		l.t.Fatalf("Publish(%q): %v", topic, err)
	}
	if id == "" {
		l.t.Fatalf("Publish(%q): empty id", topic)
	}
	return id
}

// publishAt publishes one timer through PublishBatch and returns its due
// time as the store reported it.
func (l *lib) publishDue(c *ontime.Client, topic string, tm ontime.Timer) (string, time.Time) {
	l.t.Helper()
	res, err := c.PublishBatch(l.ctx, topic, []ontime.Timer{tm})
	if err != nil {
		l.t.Fatalf("PublishBatch(%q): %v", topic, err)
	}
	if len(res) != 1 || res[0].Err != nil || res[0].ID == "" || res[0].Due.IsZero() {
		l.t.Fatalf("PublishBatch(%q): results %+v", topic, res)
	}
	return res[0].ID, res[0].Due
}

// wantGoneLib checks that the Client no longer finds the timer.
func (l *lib) wantAbsent(c *ontime.Client, topic, id string) {
	l.t.Helper()
	ti, err := c.Get(l.ctx, topic, id)
	if err == nil || !isNotFound(err) {
		l.t.Errorf("Get(%q, %q) = %+v, %v; want ErrNotFound", topic, id, ti, err)
	}
}

// waitAbsent waits until the Client no longer finds the timer (its ack
// reached the store).
func (l *lib) waitAbsent(c *ontime.Client, topic, id string) {
	l.t.Helper()
	WaitFor(l.t, waitTimeout, func() bool {
		_, err := c.Get(l.ctx, topic, id)
		return isNotFound(err)
	}, fmt.Sprintf("%s/%s to be gone", topic, id))
}

// waitEmpty waits until the topic has no scheduled or leased timers.
func (l *lib) waitEmpty(c *ontime.Client, topic string, timeout time.Duration) {
	l.t.Helper()
	WaitFor(l.t, timeout, func() bool {
		n, err := c.Count(l.ctx, topic)
		if err != nil {
			l.t.Fatalf("Count(%q): %v", topic, err)
		}
		return n.Scheduled+n.Leased == 0
	}, fmt.Sprintf("topic %q to be empty", topic))
}

// control publishes a timer due after d on topic and waits until the
// collector saw it: every timer due before it that was going to fire has
// fired by then (give or take the claim batch). The control's handler must
// ack it; controlPassed waits for that too.
func controlPassed[T any](l *lib, c *ontime.Client, col *collector[T], topic string, body T, d time.Duration) {
	l.t.Helper()
	id := l.publish(c, topic, body, ontime.In(d))
	col.waitOf(id, 1, waitTimeout+d, "the control timer "+id)
	l.waitAbsent(c, topic, id)
}

// gateDriver wraps a driver so that a test can hold one claim that leased
// timers between the store and the worker: the store has leased them, the
// worker has not seen them yet. It can also play a partial outage: while
// settleDown (subscribeDown) is set, Settle (Subscribe) fails without
// reaching the store, as it would with the store unreachable, and counts
// the calls it refused.
type gateDriver struct {
	ontimedriver.Driver
	mu      sync.Mutex
	armed   bool
	entered chan []string
	release chan struct{}
	once    sync.Once

	settleDown, subscribeDown       atomic.Bool
	settleRefused, subscribeRefused atomic.Int64
}

// errGateDown is what the gate's refused calls return.
var errGateDown = errors.New("drivertest: store unreachable (the test's gate is down)")

// Settle fails while settleDown is set.
func (g *gateDriver) Settle(ctx context.Context, topic string, ops []ontimedriver.Settlement) ([]error, error) {
	if g.settleDown.Load() {
		g.settleRefused.Add(1)
		return nil, errGateDown
	}
	return g.Driver.Settle(ctx, topic, ops)
}

// Subscribe fails while subscribeDown is set.
func (g *gateDriver) Subscribe(ctx context.Context, topic string) (<-chan time.Time, func(), error) {
	if g.subscribeDown.Load() {
		g.subscribeRefused.Add(1)
		return nil, nil, errGateDown
	}
	return g.Driver.Subscribe(ctx, topic)
}

func newGate(d ontimedriver.Driver) *gateDriver {
	return &gateDriver{Driver: d, entered: make(chan []string, 1), release: make(chan struct{})}
}

func (g *gateDriver) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *gateDriver) open() { g.once.Do(func() { close(g.release) }) }

func (g *gateDriver) Claim(ctx context.Context, topic string, max int, lease time.Duration) (*ontimedriver.ClaimResult, error) {
	res, err := g.Driver.Claim(ctx, topic, max, lease)
	if err != nil || len(res.Timers) == 0 {
		return res, err
	}
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		g.entered <- claimedIDs(res)
		<-g.release
	}
	return res, nil
}

// Unwrap returns the gated driver, whose optional interfaces the library
// finds through the gate (ontimedriver.As).
func (g *gateDriver) Unwrap() ontimedriver.Driver { return g.Driver }

// logRecorder is a slog.Handler that keeps every record (with its
// attributes as text) and passes it on to the case's log.
type logRecorder struct {
	next  slog.Handler
	attrs []slog.Attr // from WithAttrs, keys already qualified by group
	group string
	rec   *recorded
}

type recorded struct {
	mu   sync.Mutex
	recs []loggedRecord
}

// loggedRecord is one log record as a case sees it.
type loggedRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// recordLogs returns a logger for a Worker (or Client) whose records the
// case can inspect; they also go to the test log.
func (l *lib) recordLogs() (*slog.Logger, *logRecorder) {
	r := &logRecorder{next: l.log.Handler(), rec: &recorded{}}
	return slog.New(r), r
}

func (r *logRecorder) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= slog.LevelDebug
}

func (r *logRecorder) Handle(ctx context.Context, rec slog.Record) error {
	lr := loggedRecord{Level: rec.Level, Msg: rec.Message, Attrs: map[string]string{}}
	add := func(a slog.Attr) {
		k := a.Key
		if r.group != "" {
			k = r.group + "." + k
		}
		lr.Attrs[k] = a.Value.Resolve().String()
	}
	for _, a := range r.attrs {
		lr.Attrs[a.Key] = a.Value.Resolve().String()
	}
	rec.Attrs(func(a slog.Attr) bool { add(a); return true })
	r.rec.mu.Lock()
	r.rec.recs = append(r.rec.recs, lr)
	r.rec.mu.Unlock()
	if r.next.Enabled(ctx, rec.Level) {
		return r.next.Handle(ctx, rec)
	}
	return nil
}

func (r *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.next = r.next.WithAttrs(as)
	c.attrs = append([]slog.Attr(nil), r.attrs...)
	for _, a := range as {
		if r.group != "" {
			a.Key = r.group + "." + a.Key // keyed as they will print
		}
		c.attrs = append(c.attrs, a)
	}
	return &c
}

func (r *logRecorder) WithGroup(name string) slog.Handler {
	c := *r
	c.next = r.next.WithGroup(name)
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}

// matching returns the records whose message contains msg.
func (r *logRecorder) matching(msg string) []loggedRecord {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	var out []loggedRecord
	for _, lr := range r.rec.recs {
		if strings.Contains(lr.Msg, msg) {
			out = append(out, lr)
		}
	}
	return out
}
