package ontime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// gatedDriver records every Schedule call (the ids it carried) and holds
// the calls while the gate is shut, so that publishes queue behind them.
type gatedDriver struct {
	ontimedriver.Driver
	mu      sync.Mutex
	calls   [][]string
	ctxs    []context.Context
	shut    bool
	opened  chan struct{}
	entered chan struct{}
	panicOn string // a call carrying this id panics (after the gate)
}

func (g *gatedDriver) Unwrap() ontimedriver.Driver { return g.Driver }

func newGatedDriver(t *testing.T) *gatedDriver {
	d, err := ontimebolt.Open(filepath.Join(t.TempDir(), "timers.db"), &ontimebolt.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return &gatedDriver{Driver: d, entered: make(chan struct{}, 100)}
}

// shutGate makes the next Schedule calls wait until openGate; entered is
// emptied, so that the next receive from it sees the next call.
func (g *gatedDriver) shutGate() {
	for len(g.entered) > 0 {
		<-g.entered
	}
	g.mu.Lock()
	g.shut, g.opened = true, make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedDriver) openGate() {
	g.mu.Lock()
	g.shut = false
	close(g.opened)
	g.mu.Unlock()
}

func (g *gatedDriver) Schedule(ctx context.Context, topic string, ts []ontimedriver.NewTimer, m ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	g.mu.Lock()
	g.calls = append(g.calls, ids)
	g.ctxs = append(g.ctxs, ctx)
	shut, opened := g.shut, g.opened
	g.mu.Unlock()
	g.entered <- struct{}{}
	if shut {
		<-opened
	}
	for _, id := range ids {
		if g.panicOn != "" && id == g.panicOn {
			panic("driver bug")
		}
	}
	return g.Driver.Schedule(ctx, topic, ts, m)
}

// holdCall shuts the gate and publishes id to topic "t" (with opts) in a
// goroutine, returning once that Publish's store call is held at the gate;
// the Publish's error goes to out when the gate opens.
func (g *gatedDriver) holdCall(c *Client, id string, out chan<- error, opts ...PublishOption) {
	g.shutGate()
	go func() {
		_, err := c.Publish(context.Background(), "t", "held", append(opts, WithID(id))...)
		out <- err
	}()
	<-g.entered
}

func (g *gatedDriver) callIDs() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]string(nil), g.calls...)
}

// queuedLen counts the requests waiting in the coalescer's lanes.
func (c *coalescer[K, Req, Res, B]) queuedLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.lanes {
		n += len(l.queue)
	}
	return n
}

// queued waits until n publishes wait in the client's queues.
func queued(t *testing.T, c *Client, n int) {
	t.Helper()
	waitQueued(t, "publishes", n, c.pub.queuedLen)
}

// waitQueued waits until count reports n requests queued.
func waitQueued(t *testing.T, what string, n int, count func() int) {
	t.Helper()
	got := 0
	wait.For(t, 20*time.Second, func() bool { got = count(); return got == n },
		"%d %s queued: %s", n, what, func() string { return fmt.Sprint(got) })
}

// realStores opens each real store the coalescing tests run on: a Redis
// server of the test's own and an embedded store in a temporary directory.
func realStores() map[string]func(t *testing.T) ontimedriver.Driver {
	return map[string]func(t *testing.T) ontimedriver.Driver{
		"redis": func(t *testing.T) ontimedriver.Driver {
			srv := redistest.StartServer(t)
			d, err := ontimeredis.New(srv.NewClient(t), &ontimeredis.Options{Logger: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		"bolt": func(t *testing.T) ontimedriver.Driver {
			d, err := ontimebolt.Open(filepath.Join(t.TempDir(), "timers.db"), &ontimebolt.Options{Logger: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
	}
}

type ctxMark struct{}

// TestPublishCoalescing: a lone Publish makes its own store call with its
// own context; publishes that arrive while a call is under way share the
// next call, each with its own result.
func TestPublishCoalescing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGatedDriver(t)
	c, err := NewClient(g, &Config{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}

	// Alone: one call, one timer, the caller's own context.
	mctx := context.WithValue(ctx, ctxMark{}, "mine")
	if _, err := c.Publish(mctx, "t", "x", WithID("lone")); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	if calls := g.callIDs(); len(calls) != 1 || len(calls[0]) != 1 || g.ctxs[0] != mctx {
		t.Fatalf("lone publish: calls %v, ctx passed as is: %v", calls, g.ctxs[0] == mctx)
	}

	// Busy: 20 publishes queue behind a held call and go in one call.
	first := make(chan error, 1)
	g.holdCall(c, "first", first)
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := c.Publish(ctx, "t", "x", WithID(fmt.Sprintf("q%02d", i)))
			errs <- err
		}()
	}
	queued(t, c, n)
	g.openGate()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	calls := g.callIDs()
	if len(calls) != 3 || len(calls[2]) != n {
		t.Fatalf("calls = %v, want the lone one, the held one, then one call of %d", calls, n)
	}
	for i := range n {
		if _, err := c.Get(ctx, "t", fmt.Sprintf("q%02d", i)); err != nil {
			t.Errorf("q%02d: %v", i, err)
		}
	}

	// A PublishBatch of one timer (the server's single-timer endpoint)
	// shares calls the same way, with its result and due time.
	g.holdCall(c, "first2", first)
	type batchOut struct {
		res []PublishResult
		err error
	}
	bouts := make(chan batchOut, 5)
	for i := range 5 {
		go func() {
			res, err := c.PublishBatch(ctx, "t", []Timer{{ID: fmt.Sprintf("b%d", i), Delay: time.Hour}})
			bouts <- batchOut{res, err}
		}()
	}
	queued(t, c, 5)
	g.openGate()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range 5 {
		o := <-bouts
		if o.err != nil || len(o.res) != 1 || o.res[0].Err != nil || o.res[0].Due.Before(time.Now().Add(50*time.Minute)) {
			t.Fatalf("PublishBatch of one: %+v, %v", o.res, o.err)
		}
	}
	if calls := g.callIDs(); len(calls) != 5 || len(calls[4]) != 5 {
		t.Fatalf("calls = %v, want the five single-timer batches in one call", calls)
	}
}

// TestPublishCoalescingPerTimerErrors: in a shared call, IfAbsent refuses
// only the timer whose id exists; a caller that gives up while queued gets
// its context's error and its timer is not written; two publishes of one
// id go in separate calls, in order.
func TestPublishCoalescingPerTimerErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGatedDriver(t)
	c, err := NewClient(g, &Config{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "t", "old", WithID("x"), IfAbsent()); err != nil {
		t.Fatal(err)
	}
	<-g.entered

	held := make(chan error, 1)
	g.holdCall(c, "h", held, IfAbsent())
	type out struct {
		id  string
		err error
	}
	outs := make(chan out, 4)
	pub := func(ctx context.Context, id, body string) {
		_, err := c.Publish(ctx, "t", body, WithID(id), IfAbsent())
		outs <- out{id, err}
	}
	go pub(ctx, "x", "new")
	go pub(ctx, "z", "z")
	gone, giveUp := context.WithCancel(ctx)
	go pub(gone, "gone", "gone")
	queued(t, c, 3)
	giveUp()
	if o := <-outs; o.id != "gone" || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("first answer %s: %v, want gone: context canceled", o.id, o.err)
	}
	queued(t, c, 2)
	g.openGate()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		o := <-outs
		switch {
		case o.id == "x" && !errors.Is(o.err, ErrExists):
			t.Errorf("x: %v, want ErrExists", o.err)
		case o.id == "z" && o.err != nil:
			t.Errorf("z: %v", o.err)
		}
	}
	if ti, err := c.Get(ctx, "t", "x"); err != nil || string(ti.Body) != "old" {
		t.Errorf("x = %v, %v; want the old body kept", ti, err)
	}
	if _, err := c.Get(ctx, "t", "gone"); !errors.Is(err, ErrNotFound) {
		t.Errorf("gone: %v, want ErrNotFound", err)
	}

	// The same id twice while a call is held: two calls, the later body
	// wins.
	g.holdCall(c, "h2", held)
	go func() {
		_, err := c.Publish(ctx, "t", "one", WithID("same"))
		outs <- out{"same1", err}
	}()
	queued(t, c, 1)
	go func() {
		_, err := c.Publish(ctx, "t", "two", WithID("same"))
		outs <- out{"same2", err}
	}()
	queued(t, c, 2)
	before := len(g.callIDs())
	g.openGate()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if o := <-outs; o.err != nil {
			t.Fatalf("%s: %v", o.id, o.err)
		}
	}
	if calls := g.callIDs()[before:]; len(calls) != 2 || len(calls[0]) != 1 || len(calls[1]) != 1 {
		t.Errorf("calls for the same id twice = %v, want two calls of one", calls)
	}
	if ti, err := c.Get(ctx, "t", "same"); err != nil || string(ti.Body) != "two" {
		t.Errorf("same = %v, %v; want body two", ti, err)
	}
}

// TestPublishCoalescingDriverPanic: a driver that panics fails the shared
// call for every caller in it (none is told its timer was written), the
// panic reaches the caller that made the call, and the topic's later
// publishes are not stuck behind it.
func TestPublishCoalescingDriverPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGatedDriver(t)
	g.panicOn = "boom"
	c, err := NewClient(g, &Config{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(id string) (panicked any, err error) {
		defer func() { panicked = recover() }()
		_, err = c.Publish(ctx, "t", "x", WithID(id))
		return nil, err
	}
	if p, _ := publish("boom"); p == nil {
		t.Fatal("a lone call: the driver's panic did not reach the caller")
	}
	<-g.entered
	if p, err := publish("after"); err != nil || p != nil {
		t.Fatalf("publish after the panic: %v, %v", err, p)
	}
	<-g.entered

	g.shutGate()
	held := make(chan error, 1)
	go func() {
		_, err := publish("held")
		held <- err
	}()
	<-g.entered
	type out struct {
		err      error
		panicked any
	}
	outs := make(chan out, 2)
	go func() {
		p, err := publish("boom")
		outs <- out{err, p}
	}()
	queued(t, c, 1)
	go func() {
		p, err := publish("fine")
		outs <- out{err, p}
	}()
	queued(t, c, 2)
	g.openGate()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	panics, errs := 0, 0
	for range 2 {
		o := <-outs
		switch {
		case o.panicked != nil:
			panics++
		case o.err != nil:
			errs++
		}
	}
	if panics != 1 || errs != 1 {
		t.Errorf("shared call that panicked: %d callers panicked, %d got an error; want 1 and 1", panics, errs)
	}
	if _, err := c.Get(ctx, "t", "fine"); !errors.Is(err, ErrNotFound) {
		t.Errorf("fine: %v, want not written", err)
	}
	if p, err := publish("last"); err != nil || p != nil {
		t.Fatalf("publish after the shared panic: %v, %v", err, p)
	}
}

// TestPublishCoalescedConcurrentPerTimer: many callers publish at once to
// one topic on a real store, with IfAbsent and without, some ids existing
// and some not. Every caller gets its own timer's result (ErrExists only
// for the ids that existed, with IfAbsent), and the store holds exactly
// what the results say, however the calls were shared.
func TestPublishCoalescedConcurrentPerTimer(t *testing.T) {
	t.Parallel()
	for name, open := range realStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			drv := open(t)
			t.Cleanup(func() { _ = drv.Close() })
			cd := &countingDriver{Driver: drv}
			c, err := NewClient(cd, &Config{Logger: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			const callers, each = 32, 30
			// Ids e-<caller>-<i> with i%3 == 0 exist beforehand.
			var old []Timer
			for g := range callers {
				for i := 0; i < each; i += 3 {
					old = append(old, Timer{ID: fmt.Sprintf("e-%d-%d", g, i), Body: "old", Delay: time.Hour})
				}
			}
			if _, err := c.PublishBatch(ctx, "t", old); err != nil {
				t.Fatal(err)
			}
			cd.calls.Store(0)
			cd.timers.Store(0)
			var wg sync.WaitGroup
			errs := make(chan error, callers*each)
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						id := fmt.Sprintf("e-%d-%d", g, i)
						ifAbsent := i%2 == 0 // odd i: upserts
						opts := []PublishOption{WithID(id), In(time.Hour)}
						if ifAbsent {
							opts = append(opts, IfAbsent())
						}
						got, err := c.Publish(ctx, "t", "new", opts...)
						existed := i%3 == 0
						switch {
						case ifAbsent && existed:
							if !errors.Is(err, ErrExists) {
								errs <- fmt.Errorf("%s: %v, want ErrExists", id, err)
							}
						case err != nil:
							errs <- fmt.Errorf("%s: %v", id, err)
						case got != id:
							errs <- fmt.Errorf("%s: returned id %q", id, got)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for g := range callers {
				for i := range each {
					id := fmt.Sprintf("e-%d-%d", g, i)
					want := "new"
					if i%3 == 0 && i%2 == 0 {
						want = "old" // IfAbsent left it
					}
					ti, err := c.Get(ctx, "t", id)
					if err != nil || string(ti.Body) != want {
						t.Errorf("%s: %v, %v; want body %q", id, ti, err, want)
					}
				}
			}
			if n := cd.calls.Load(); n > 0 {
				t.Logf("%d publishes in %d store calls", cd.timers.Load(), n)
			}
		})
	}
}

// TestPublishLoneCallerOwnCall: publishes one after another (no other
// caller) each make their own store call at once, carrying only their
// timer, with the caller's own context: no wait and no shared call, also
// right after the topic was busy.
func TestPublishLoneCallerOwnCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGatedDriver(t)
	c, err := NewClient(g, &Config{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	// Make the topic busy once: a held call, 5 queued behind it.
	held := make(chan error, 6)
	g.holdCall(c, "held", held)
	for i := range 5 {
		go func() {
			_, err := c.Publish(ctx, "t", "x", WithID(fmt.Sprintf("q%d", i)))
			held <- err
		}()
	}
	queued(t, c, 5)
	g.openGate()
	for range 6 {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the topic is idle again (the flusher's wait for its
	// callers is over).
	wait.For(t, 10*time.Second, func() bool {
		c.pub.mu.Lock()
		defer c.pub.mu.Unlock()
		return len(c.pub.lanes) == 0
	}, "the topic idle after its callers were answered")
	before := len(g.callIDs())
	for i := range 20 {
		mctx := context.WithValue(ctx, ctxMark{}, i)
		if _, err := c.Publish(mctx, "t", "x", WithID(fmt.Sprintf("lone%d", i))); err != nil {
			t.Fatal(err)
		}
		g.mu.Lock()
		last := g.ctxs[len(g.ctxs)-1]
		g.mu.Unlock()
		if last != mctx {
			t.Fatalf("lone publish %d: the store call did not get the caller's own context", i)
		}
	}
	calls := g.callIDs()[before:]
	if len(calls) != 20 {
		t.Fatalf("20 lone publishes made %d store calls, want 20", len(calls))
	}
	for i, ids := range calls {
		if len(ids) != 1 || ids[0] != fmt.Sprintf("lone%d", i) {
			t.Fatalf("lone call %d carried %v", i, ids)
		}
	}
}

// holdShared holds every Schedule call that carries more than one timer
// until release is closed, and sends its context on entered.
type holdShared struct {
	ontimedriver.Driver
	entered chan context.Context
	release chan struct{}
}

func (h *holdShared) Unwrap() ontimedriver.Driver { return h.Driver }

func (h *holdShared) Schedule(ctx context.Context, topic string, ts []ontimedriver.NewTimer, m ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	if len(ts) > 1 {
		h.entered <- ctx
		<-h.release
	}
	return h.Driver.Schedule(ctx, topic, ts, m)
}

// TestPublishCoalescingCallersGone: callers whose timers are in a held
// shared call and who give up get their context's error at once; the call
// itself goes on (it is not cut short by their contexts) and lands, and
// the topic's next publishes are not stuck.
func TestPublishCoalescingCallersGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGatedDriver(t)
	h := &holdShared{Driver: g, entered: make(chan context.Context, 1), release: make(chan struct{})}
	c, err := NewClient(h, &Config{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	g.holdCall(c, "held", held)
	gone, giveUp := context.WithCancel(ctx)
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := c.Publish(gone, "t", "x", WithID(fmt.Sprintf("g%d", i)))
			errs <- err
		}()
	}
	queued(t, c, 3)
	g.openGate()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	// The three are now in one shared call, held.
	shared := <-h.entered
	giveUp()
	for range 3 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("a caller that gave up: %v, want context canceled", err)
		}
	}
	if shared.Err() != nil {
		t.Fatalf("the shared call's context ended with its callers': %v", shared.Err())
	}
	close(h.release)
	if _, err := c.Publish(ctx, "t", "x", WithID("after")); err != nil {
		t.Fatal(err)
	}
	// The shared call landed (it went before "after", which waited for it
	// or came after it).
	for _, id := range []string{"g0", "g1", "g2", "after"} {
		if _, err := c.Get(ctx, "t", id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}
