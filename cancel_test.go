package ontime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// gatedCancels holds the store's Cancel calls while its gate is shut, so
// that cancels queue behind them, and records the ids of every Cancel and
// CancelBatch call. failBatch, when set, fails the CancelBatch call of that
// number (1 the first) before it reaches the store.
type gatedCancels struct {
	ontimedriver.Driver
	mu        sync.Mutex
	calls     [][]string
	gate      chan struct{} // nil: open
	entered   chan struct{}
	batches   int
	failBatch int
}

var errStoreDown = errors.New("store down")

func (g *gatedCancels) Unwrap() ontimedriver.Driver { return g.Driver }

func (g *gatedCancels) Cancel(ctx context.Context, topic, id string) error {
	g.mu.Lock()
	g.calls = append(g.calls, []string{id})
	gate := g.gate
	g.mu.Unlock()
	g.entered <- struct{}{}
	if gate != nil {
		<-gate
	}
	return g.Driver.Cancel(ctx, topic, id)
}

func (g *gatedCancels) CancelBatch(ctx context.Context, topic string, ids []string) ([]error, error) {
	g.mu.Lock()
	g.calls = append(g.calls, slices.Clone(ids))
	g.batches++
	fail := g.batches == g.failBatch
	g.mu.Unlock()
	if fail {
		return nil, errStoreDown
	}
	return g.Driver.CancelBatch(ctx, topic, ids)
}

func (g *gatedCancels) callIDs() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls)
}

func newGatedCancels(t *testing.T) *gatedCancels {
	d, err := ontimebolt.Open(filepath.Join(t.TempDir(), "timers.db"), &ontimebolt.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return &gatedCancels{Driver: d, entered: make(chan struct{}, 1000)}
}

// cancelsQueued waits until n cancels wait in the client's queues.
func cancelsQueued(t *testing.T, c *Client, n int) {
	t.Helper()
	waitQueued(t, "cancels", n, c.can.queuedLen)
}

// TestCancelCoalescing: a lone Cancel makes its own store call; the
// Cancels that arrive while it is under way share the next store call,
// one CancelBatch, and each caller gets its own answer: nil for a timer it
// deleted, ErrNotFound for an id that has none (absent, or cancelled by
// an earlier caller of the same call), its context's error for a caller
// that gave up while queued (and its timer stays). The StoreCall hook sees
// two store calls for 1+9 cancels.
func TestCancelCoalescing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGatedCancels(t)
	rec := &opRecorder{ops: map[string]int{}}
	c, err := NewClient(g, &Config{Logger: quietLog, Hooks: []any{rec}})
	if err != nil {
		t.Fatal(err)
	}
	var timers []Timer
	for _, id := range []string{"held", "a", "b", "c", "d", "gone"} {
		timers = append(timers, Timer{ID: id, Delay: time.Hour})
	}
	if _, err := c.PublishBatch(ctx, "t", timers); err != nil {
		t.Fatal(err)
	}

	g.mu.Lock()
	g.gate = make(chan struct{})
	gate := g.gate
	g.mu.Unlock()
	held := make(chan error, 1)
	go func() { held <- c.Cancel(ctx, "t", "held") }()
	<-g.entered

	// Queued meanwhile, in this order: "b" twice (the second finds it
	// cancelled by the first), two absent ids, and a caller that gives up.
	ids := []string{"a", "b", "x", "b", "c", "y", "d"}
	want := []error{nil, nil, ErrNotFound, ErrNotFound, nil, ErrNotFound, nil}
	got := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = c.Cancel(ctx, "t", id)
		}()
		cancelsQueued(t, c, i+1)
	}
	gctx, giveUp := context.WithCancel(ctx)
	gave := make(chan error, 1)
	go func() { gave <- c.Cancel(gctx, "t", "gone") }()
	cancelsQueued(t, c, len(ids)+1)
	giveUp()
	if err := <-gave; !errors.Is(err, context.Canceled) {
		t.Errorf("caller that gave up: %v, want context.Canceled", err)
	}
	cancelsQueued(t, c, len(ids))

	g.mu.Lock()
	g.gate = nil
	g.mu.Unlock()
	close(gate)
	if err := <-held; err != nil {
		t.Errorf("held cancel: %v", err)
	}
	wg.Wait()
	for i, id := range ids {
		if !errors.Is(got[i], want[i]) || (want[i] == nil) != (got[i] == nil) {
			t.Errorf("cancel %d (%s): %v, want %v", i, id, got[i], want[i])
		}
	}
	calls := g.callIDs()
	wantCalls := [][]string{{"held"}, ids}
	if !slices.EqualFunc(calls, wantCalls, slices.Equal[[]string]) {
		t.Errorf("store calls %q, want %q (a lone call, then one shared call)", calls, wantCalls)
	}
	if n, nb := rec.count("cancel"), rec.count("cancel_batch"); n != 1 || nb != 1 {
		t.Errorf("StoreCall hook saw %d cancel and %d cancel_batch calls, want 1 and 1", n, nb)
	}
	if _, err := c.Get(ctx, "t", "gone"); err != nil {
		t.Errorf("the timer of the caller that gave up: %v, want it kept", err)
	}
	n, err := c.Count(ctx, "t")
	if err != nil || n.Scheduled != 1 {
		t.Errorf("Count = %+v, %v; want 1 scheduled (gone)", n, err)
	}

	// Alone again: the next Cancel makes its own call at once.
	if err := c.Cancel(ctx, "t", "gone"); err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, "t", "gone"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second cancel of gone: %v, want ErrNotFound", err)
	}
	if n := rec.count("cancel"); n != 3 {
		t.Errorf("%d cancel calls, want 3 (each lone Cancel its own)", n)
	}
}

// TestCancelCoalescedConcurrentPerID: many callers cancel ids of one topic
// on real stores at once, half of which exist; each gets its own answer,
// the store holds what the answers say, and the cancels went in fewer
// store calls than there were callers' cancels.
func TestCancelCoalescedConcurrentPerID(t *testing.T) {
	t.Parallel()
	for name, open := range realStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			drv := open(t)
			t.Cleanup(func() { _ = drv.Close() })
			rec := &opRecorder{ops: map[string]int{}}
			c, err := NewClient(drv, &Config{Logger: quietLog, Hooks: []any{rec}})
			if err != nil {
				t.Fatal(err)
			}
			const callers, each = 32, 40
			var timers []Timer
			for g := range callers {
				for i := 0; i < each; i += 2 {
					timers = append(timers, Timer{ID: fmt.Sprintf("c-%d-%d", g, i), Delay: time.Hour})
				}
			}
			if _, err := c.PublishBatch(ctx, "t", timers); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var bad atomic.Int64
			errs := make(chan error, callers*each)
			start := make(chan struct{})
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := range each {
						id := fmt.Sprintf("c-%d-%d", g, i)
						err := c.Cancel(ctx, "t", id)
						if i%2 == 0 && err != nil || i%2 == 1 && !errors.Is(err, ErrNotFound) {
							bad.Add(1)
							errs <- fmt.Errorf("%s: %v", id, err)
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			n, err := c.Count(ctx, "t")
			if err != nil || n.Scheduled != 0 || n.Leased != 0 {
				t.Errorf("Count after the cancels = %+v, %v; want none left", n, err)
			}
			single, batches := rec.count("cancel"), rec.count("cancel_batch")
			t.Logf("%d cancels in %d Cancel and %d CancelBatch calls", callers*each, single, batches)
			if single+batches >= callers*each {
				t.Errorf("%d cancels in %d store calls: no call was shared", callers*each, single+batches)
			}
		})
	}
}

// TestCancelBatch: CancelBatch answers per id in order, in one store call
// per CancelChunkSize ids; invalid ids cancel nothing; empty ids do
// nothing; and a store failure on a later chunk returns the results of
// the chunks before it with an error that unwraps to the store's.
func TestCancelBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGatedCancels(t)
	rec := &opRecorder{ops: map[string]int{}}
	c, err := NewClient(g, &Config{Logger: quietLog, Prefix: "p:", Hooks: []any{rec}})
	if err != nil {
		t.Fatal(err)
	}
	const total = 2*CancelChunkSize + 3
	var timers []Timer
	var ids []string
	for i := range total {
		id := fmt.Sprintf("id-%04d", i)
		ids = append(ids, id)
		if i%3 != 0 {
			timers = append(timers, Timer{ID: id, Delay: time.Hour})
		}
	}
	if _, err := c.PublishBatch(ctx, "t", timers); err != nil {
		t.Fatal(err)
	}

	if res, err := c.CancelBatch(ctx, "t", []string{"id-0001", ""}); err == nil || !errors.Is(err, ErrInvalid) || res != nil {
		t.Errorf("CancelBatch with an empty id = %v, %v; want ErrInvalid", res, err)
	}
	if _, err := c.Get(ctx, "t", "id-0001"); err != nil {
		t.Errorf("after a refused batch: %v, want id-0001 kept", err)
	}
	for _, empty := range [][]string{nil, {}} {
		if res, err := c.CancelBatch(ctx, "t", empty); err != nil || len(res) != 0 {
			t.Errorf("CancelBatch(%#v) = %v, %v; want nothing", empty, res, err)
		}
	}
	if calls := g.callIDs(); len(calls) != 0 {
		t.Fatalf("store calls %q for refused and empty batches, want none", calls)
	}

	// The second chunk fails: the first stays cancelled.
	g.failBatch = 2
	res, err := c.CancelBatch(ctx, "t", ids)
	if !errors.Is(err, errStoreDown) || len(res) != CancelChunkSize {
		t.Fatalf("CancelBatch with the store failing on chunk 2 = %d results, %v; want %d, store down", len(res), err, CancelChunkSize)
	}
	t.Logf("error: %v", err)
	for i, r := range res {
		if want := i%3 == 0; errors.Is(r, ErrNotFound) != want || !want && r != nil {
			t.Errorf("result %d: %v", i, r)
		}
	}

	g.failBatch = 0
	before := len(g.callIDs())
	res, err = c.CancelBatch(ctx, "t", append(ids, "id-0002"))
	if err != nil || len(res) != total+1 {
		t.Fatalf("CancelBatch = %d results, %v; want %d", len(res), err, total+1)
	}
	for i, r := range res {
		// The first chunk is cancelled already; id-0002 is cancelled again
		// at the end.
		wantNF := i < CancelChunkSize || i%3 == 0 || i == total
		if errors.Is(r, ErrNotFound) != wantNF || !wantNF && r != nil {
			t.Errorf("result %d: %v (want not found: %v)", i, r, wantNF)
		}
	}
	calls := g.callIDs()[before:]
	if len(calls) != 3 || len(calls[0]) != CancelChunkSize || len(calls[2]) != 4 {
		t.Errorf("%d store calls, want 3 of %d, %d and 4 ids", len(calls), CancelChunkSize, CancelChunkSize)
	}
	n, err := c.Count(ctx, "t")
	if err != nil || n.Scheduled != 0 {
		t.Errorf("Count = %+v, %v; want none left", n, err)
	}

	// One id goes the way of Cancel (a lone call: the driver's Cancel).
	res, err = c.CancelBatch(ctx, "t", []string{"id-0001"})
	if err != nil || len(res) != 1 || !errors.Is(res[0], ErrNotFound) {
		t.Errorf("CancelBatch of one absent id = %v, %v; want [ErrNotFound]", res, err)
	}
	if n := rec.count("cancel"); n != 1 {
		t.Errorf("%d cancel calls, want 1", n)
	}
}
