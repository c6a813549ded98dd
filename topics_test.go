package ontime

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

type opRecorder struct {
	mu  sync.Mutex
	ops map[string]int
}

func (r *opRecorder) StoreCall(_ context.Context, c StoreCall) {
	r.mu.Lock()
	r.ops[c.Op]++
	r.mu.Unlock()
}

func (r *opRecorder) count(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ops[op]
}

// HandleTopics works on a Client whose store calls are observed (the
// Client wraps its driver), and reports its index look-ups as
// "due_topics".
func TestHandleTopicsObserved(t *testing.T) {
	drv, err := ontimebolt.Open(filepath.Join(t.TempDir(), "o.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	rec := &opRecorder{ops: map[string]int{}}
	c, err := NewClient(drv, &Config{Hooks: []any{rec}})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	w := NewWorker(c, nil)
	if err := HandleTopics(w, "t-*", func(_ context.Context, m *Message[string]) error {
		got <- m.Topic
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	runTopicsWorker(t, w)
	if _, err := c.Publish(context.Background(), "t-1", "x"); err != nil {
		t.Fatal(err)
	}
	select {
	case topic := <-got:
		if topic != "t-1" {
			t.Errorf("Message.Topic = %q", topic)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	if rec.count("due_topics") == 0 || rec.count("claim") == 0 {
		t.Errorf("store calls seen: %v, want due_topics and claim among them", rec.ops)
	}
}

// runTopicsWorker runs w until the end of the test, then stops it, which
// must succeed.
func runTopicsWorker(t *testing.T, w *Worker) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Error(err)
		}
		<-done
	})
}

// startTopicsWorker runs a worker with h for pattern on an embedded store
// and returns its client; the worker stops at the end of the test.
func startTopicsWorker(t *testing.T, pattern string, h HandlerFunc[string], opts *TopicOptions) *Client {
	t.Helper()
	drv, err := ontimebolt.Open(filepath.Join(t.TempDir(), "o.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	c, err := NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWorker(c, nil)
	if err := HandleTopics(w, pattern, h, opts); err != nil {
		t.Fatal(err)
	}
	runTopicsWorker(t, w)
	return c
}

// A topic served by HandleTopics whose timers are all handled costs no
// goroutine while it waits for its next timer (its claim loop ends; the
// pattern's one heartbeat and lease watch serve every topic), well before
// the topic is let go; and such an idle topic wakes on time for its next
// timer. Each started topic used to keep four goroutines until it had
// been idle for 10 s.
//
// In a bubble (testing/synctest), as the other time-based tests of
// HandleTopics: "on time", "within 3 s" and the linger are measured on the
// bubble's clock, which a loaded machine's pauses do not move.
func TestHandleTopicsIdleTopicsKeepNoGoroutines(t *testing.T) {
	synctest.Test(t, testHandleTopicsIdleTopicsKeepNoGoroutines)
}

func testHandleTopicsIdleTopicsKeepNoGoroutines(t *testing.T) {
	const topics = 300
	var mu sync.Mutex
	fired := map[string]time.Time{}
	got := make(chan string, 2*topics)
	c := startTopicsWorker(t, "idle-*", func(_ context.Context, m *Message[string]) error {
		mu.Lock()
		fired[m.ID] = time.Now()
		mu.Unlock()
		got <- m.ID
		return nil
	}, nil)
	synctest.Wait() // the worker started
	before := runtime.NumGoroutine()
	for i := range topics {
		if _, err := c.Publish(context.Background(), fmt.Sprintf("idle-%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	for range topics {
		select {
		case <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("not every timer was delivered")
		}
	}
	// The topics stay started for 10 s (the linger time); within 3 s
	// their goroutines must be gone.
	n := runtime.NumGoroutine()
	wait.For(t, 3*time.Second, func() bool { n = runtime.NumGoroutine(); return n <= before+20 },
		"at most 20 more goroutines with %d idle topics than the %d before they started: %s", topics, before,
		func() string { return fmt.Sprint(n) })

	// An idle topic's next timer, due in 400 ms, is delivered on time.
	due := time.Now().Add(400 * time.Millisecond)
	id, err := c.Publish(context.Background(), "idle-7", "y", At(due))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("an idle topic's next timer was not delivered")
	}
	mu.Lock()
	at := fired[id]
	mu.Unlock()
	if at.Before(due) {
		t.Errorf("delivered %v early", due.Sub(at))
	}
	if late := at.Sub(due); late > 500*time.Millisecond {
		t.Errorf("an idle topic's timer was delivered %v late", late)
	}
}

// The pattern's shared heartbeat extends the leases of handlers running on
// several topics at once past their lease (each delivered once, never
// cancelled); with the heartbeat disabled, the shared lease watch cancels
// each of them before its lease runs out.
func TestHandleTopicsSharedLeases(t *testing.T) {
	for _, disable := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableHeartbeat=%v", disable), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const topics, lease = 5, time.Second
				type run struct {
					id        string
					took      time.Duration
					cancelled bool
				}
				got := make(chan run, 4*topics)
				c := startTopicsWorker(t, "lease-*", func(ctx context.Context, m *Message[string]) error {
					start := time.Now()
					select {
					case <-time.After(3 * lease):
						got <- run{m.ID, time.Since(start), false}
						return nil
					case <-ctx.Done():
						got <- run{m.ID, time.Since(start), true}
						return ctx.Err()
					}
				}, &TopicOptions{Lease: lease, DisableHeartbeat: disable, PollInterval: 200 * time.Millisecond})
				for i := range topics {
					if _, err := c.Publish(context.Background(), fmt.Sprintf("lease-%d", i), "x"); err != nil {
						t.Fatal(err)
					}
				}
				seen := map[string]int{}
				for range topics {
					select {
					case r := <-got:
						seen[r.id]++
						switch {
						case !disable && r.cancelled:
							t.Errorf("%s: handler cancelled after %v although the heartbeat extends its lease", r.id, r.took)
						case disable && !r.cancelled:
							t.Errorf("%s: handler ran %v with its lease (%v) not extended and was not cancelled", r.id, r.took, lease)
						case disable && r.took >= lease:
							t.Errorf("%s: handler cancelled %v after it started, not before its lease (%v) ran out", r.id, r.took, lease)
						}
					case <-time.After(20 * time.Second):
						t.Fatal("handlers did not end")
					}
				}
				if disable {
					return // redelivered after the leases expire, as for any lost lease
				}
				// No second delivery: the leases the heartbeat extended, had it
				// not, would have run out by now and their timers been
				// claimed again (the poll interval is 200 ms).
				time.Sleep(2 * lease)
				synctest.Wait()
				for {
					select {
					case r := <-got:
						seen[r.id]++
						continue
					default:
					}
					break
				}
				for id, n := range seen {
					if n != 1 {
						t.Errorf("%s delivered %d times, want 1", id, n)
					}
				}
				if len(seen) != topics {
					t.Errorf("%d timers delivered, want %d", len(seen), topics)
				}
			})
		})
	}
}

// An idle topic's runner is let go after the linger time, and the topic's
// next timer starts it again, on time.
func TestHandleTopicsIdleTopicLetGo(t *testing.T) {
	synctest.Test(t, testHandleTopicsIdleTopicLetGo)
}

func testHandleTopicsIdleTopicLetGo(t *testing.T) {
	drv, err := ontimebolt.Open(filepath.Join(t.TempDir(), "o.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	c, err := NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWorker(c, nil)
	got := make(chan time.Time, 4)
	if err := HandleTopics(w, "go-*", func(context.Context, *Message[string]) error {
		got <- time.Now()
		return nil
	}, &TopicOptions{PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	retired := make(chan string, 4)
	w.patterns[0].linger = 200 * time.Millisecond
	w.patterns[0].onRetire = func(topic string) { retired <- topic }
	runTopicsWorker(t, w)
	if _, err := c.Publish(context.Background(), "go-a", "x"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	select {
	case topic := <-retired:
		if topic != "go-a" {
			t.Fatalf("let go of %q, want go-a", topic)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the idle topic was not let go")
	}
	due := time.Now().Add(300 * time.Millisecond)
	if _, err := c.Publish(context.Background(), "go-a", "y", At(due)); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if at.Before(due) {
			t.Errorf("delivered %v early", due.Sub(at))
		}
		if late := at.Sub(due); late > 500*time.Millisecond {
			t.Errorf("delivered %v late after its topic was let go", late)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next timer of a topic let go was not delivered")
	}
}
