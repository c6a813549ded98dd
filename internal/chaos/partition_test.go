//go:build linux

package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
)

// overlapTracker records handler starts and ends per timer id, and every
// moment two handlers of one id ran at once.
type overlapTracker struct {
	mu       sync.Mutex
	running  map[string]int
	starts   map[string][]string // worker names, in start order
	ends     map[string]time.Time
	overlaps []string
	changed  chan struct{}
}

func newOverlapTracker() *overlapTracker {
	return &overlapTracker{running: map[string]int{}, starts: map[string][]string{}, ends: map[string]time.Time{}, changed: make(chan struct{}, 1)}
}

// handler returns a handler that runs until its context ends (or a minute
// passes) and reports its start and its end to the tracker.
func (o *overlapTracker) handler(worker string) ontime.HandlerFunc[[]byte] {
	return func(ctx context.Context, m *ontime.Message[[]byte]) error {
		o.mu.Lock()
		o.running[m.ID]++
		if o.running[m.ID] > 1 {
			o.overlaps = append(o.overlaps, fmt.Sprintf("%s started on %s (attempt %d) while %d other handler(s) of it ran", m.ID, worker, m.Attempt, o.running[m.ID]-1))
		}
		o.starts[m.ID] = append(o.starts[m.ID], worker)
		o.mu.Unlock()
		o.notify()
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
		o.mu.Lock()
		o.running[m.ID]--
		o.ends[m.ID+"/"+worker] = time.Now()
		o.mu.Unlock()
		o.notify()
		return ctx.Err()
	}
}

func (o *overlapTracker) notify() {
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// waitStarts waits until every id has at least n starts.
func (o *overlapTracker) waitStarts(t *testing.T, ids []string, n int, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		o.mu.Lock()
		ok := true
		for _, id := range ids {
			if len(o.starts[id]) < n {
				ok = false
			}
		}
		state := fmt.Sprint(o.starts)
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-o.changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: not after %v (starts: %s)", what, timeout, state)
		}
	}
}

func (o *overlapTracker) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.overlaps {
		t.Errorf("two handlers of one timer ran at once: %s", s)
	}
}

// startWorker runs a worker for topic on c until the test ends.
func startWorker(t *testing.T, c *ontime.Client, topic string, h ontime.HandlerFunc[[]byte], opts *ontime.TopicOptions) {
	t.Helper()
	w := ontime.NewWorker(c, &ontime.WorkerConfig{ShutdownTimeout: time.Second})
	if err := ontime.Handle(w, topic, h, opts); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(context.WithoutCancel(t.Context()))
	}()
	t.Cleanup(func() {
		// Handlers run until cancelled, so the stop is never clean: it
		// cancels them when this context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = w.Stop(ctx)
		<-done
	})
}

// TestPartitionedWorkerNoOverlap cuts a worker off from Redis (a TCP proxy
// that stops forwarding; both stay up) while its handlers run. Its lease
// extensions cannot reach the store, so its leases run out and another
// worker claims the timers: the partitioned worker must have cancelled its
// handlers before then, so that two handlers of one timer never run at
// once. Both workers' clients are built as the README shows.
//
// The handlers run until their context ends. Without the cancellation at
// the lease deadline, the partitioned worker's handlers ran on (the
// heartbeat only retried its extension) while the other worker ran the
// same timers.
func TestPartitionedWorkerNoOverlap(t *testing.T) {
	srv := redistest.StartServer(t)
	opts := &ontime.TopicOptions{Lease: time.Second, PollInterval: 100 * time.Millisecond}
	ids := []string{"t1", "t2", "t3"}

	t.Run("another worker takes over", func(t *testing.T) {
		proxy := redistest.StartProxy(t, srv.Addr)
		prefix := redistest.Prefix(t)
		const topic = "partition"
		cutOff, _ := newStoreClient(t, readmeClient(t, proxy.Addr), prefix, nil)
		other, _ := newStoreClient(t, readmeClient(t, srv.Addr), prefix, nil)
		o := newOverlapTracker()
		startWorker(t, cutOff, topic, o.handler("cut-off"), opts)
		for _, id := range ids {
			if _, err := other.Publish(t.Context(), topic, []byte("x"), ontime.WithID(id)); err != nil {
				t.Fatal(err)
			}
		}
		o.waitStarts(t, ids, 1, 5*time.Second, "the cut-off worker to start every handler")
		startWorker(t, other, topic, o.handler("other"), opts)
		proxy.Partition()
		partitioned := time.Now()
		o.waitStarts(t, ids, 2, 10*time.Second, "the other worker to take every timer over")
		took := time.Since(partitioned)
		proxy.Heal()
		o.check(t)
		o.mu.Lock()
		var gaps []string
		for _, id := range ids {
			if got := o.starts[id]; got[0] != "cut-off" || got[1] != "other" {
				t.Errorf("%s started on %v, want the cut-off worker, then the other", id, got)
			}
			gaps = append(gaps, fmt.Sprintf("%s: cut-off handler ended %s after the partition began", id, fmtDur(o.ends[id+"/cut-off"].Sub(partitioned))))
		}
		o.mu.Unlock()
		// The cancelled handlers' results were not acked: the other worker
		// still holds every timer.
		time.Sleep(300 * time.Millisecond)
		n, err := other.Count(t.Context(), topic)
		if err != nil {
			t.Fatal(err)
		}
		if n.Leased != int64(len(ids)) {
			t.Errorf("after the partition healed: %+v, want the %d timers leased by the other worker", n, len(ids))
		}
		o.check(t)
		t.Logf("taken over %v after the partition began (lease %v); %v", fmtDur(took), opts.Lease, gaps)
	})

	t.Run("the worker takes its own timers back", func(t *testing.T) {
		// One worker alone: when the partition heals, it claims its own
		// expired timers again, while (without the cancellation) the
		// handlers of its first claim still ran. The partition lasts
		// longer than the lease but less than the bound of the claim that
		// hangs in it (2 s), so that claim reaches Redis when the partition
		// heals, finds the leases expired and brings the timers back.
		// (Extensions that hung in the partition may reach Redis first and
		// extend the leases instead: then, without the cancellation, the
		// first handlers run on and the timers never come back.)
		proxy := redistest.StartProxy(t, srv.Addr)
		prefix := redistest.Prefix(t)
		const topic = "partition-self"
		cutOff, _ := newStoreClient(t, readmeClient(t, proxy.Addr), prefix, nil)
		pub, _ := newStoreClient(t, readmeClient(t, srv.Addr), prefix, nil)
		o := newOverlapTracker()
		startWorker(t, cutOff, topic, o.handler("cut-off"), opts)
		for _, id := range ids {
			if _, err := pub.Publish(t.Context(), topic, []byte("x"), ontime.WithID(id)); err != nil {
				t.Fatal(err)
			}
		}
		o.waitStarts(t, ids, 1, 5*time.Second, "the worker to start every handler")
		proxy.Partition()
		time.Sleep(opts.Lease * 3 / 2)
		proxy.Heal()
		o.waitStarts(t, ids, 2, 10*time.Second, "the worker to claim its expired timers again")
		o.check(t)
	})

	t.Run("a slow claim costs its handlers nothing", func(t *testing.T) {
		// The worker's claim is held in the partition for about a lease
		// (under the claim's own 2 s bound) and reaches Redis when it
		// heals. Its lease deadline, counted from when the claim was sent,
		// has then (nearly) passed: the worker must extend the leases at
		// once instead of cancelling a handler the store still leases to
		// it.
		proxy := redistest.StartProxy(t, srv.Addr)
		prefix := redistest.Prefix(t)
		const topic = "partition-slow-claim"
		_, d := newStoreClient(t, readmeClient(t, proxy.Addr), prefix, nil)
		var claims atomic.Int64
		c, err := ontime.NewClient(d, &ontime.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Hooks: []any{claimHook(func() { claims.Add(1) })}})
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := newStoreClient(t, readmeClient(t, srv.Addr), prefix, nil)
		type run struct {
			attempt   int
			cancelled bool
		}
		runs := make(chan run, 10)
		startWorker(t, c, topic, func(ctx context.Context, m *ontime.Message[[]byte]) error {
			select {
			case <-time.After(1500 * time.Millisecond): // past the first lease
				runs <- run{m.Attempt, false}
				return nil
			case <-ctx.Done():
				runs <- run{m.Attempt, true}
				return ctx.Err()
			}
		}, opts)
		// The worker is idle, polling: its claims come and find nothing.
		wait.For(t, 20*time.Second, func() bool { return claims.Load() >= 2 }, "two claims of the idle worker")
		proxy.Partition()
		if _, err := pub.Publish(t.Context(), topic, []byte("x"), ontime.WithID("slow")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(opts.Lease)
		proxy.Heal()
		select {
		case r := <-runs:
			if r.cancelled || r.attempt != 1 {
				t.Errorf("the handler of a slowly claimed timer: attempt %d, cancelled %v; want attempt 1, run to its end", r.attempt, r.cancelled)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the handler did not end")
		}
		waitEmpty(t, pub, topic, 5*time.Second)
	})
}

// claimHook is a StoreCallHook calling itself after each claim that
// returned.
type claimHook func()

func (h claimHook) StoreCall(_ context.Context, c ontime.StoreCall) {
	if c.Op == "claim" {
		h()
	}
}
