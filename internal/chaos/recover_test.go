//go:build linux

package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
)

// TestWorkerNoticesStoreBack: after a long outage (redis-server stopped for
// 8 s, long enough for any back-off to reach its cap), each of five workers
// notices the store is back within a bounded time — its poll interval or 1 s,
// whichever is shorter, plus the reconnect — and says so in Health.
// (With the former 5 s back-off cap and ±50 % jitter, a worker could keep
// reporting the store unreachable for up to 7.5 s after it had returned;
// make stress once ended that way.)
func TestWorkerNoticesStoreBack(t *testing.T) {
	srv := redistest.StartServer(t)
	const n = 5
	var workers []*ontime.Worker
	for i := range n {
		rdb := readmeClient(t, srv.Addr)
		c, _ := newStoreClient(t, rdb, redistest.Prefix(t), nil)
		w := ontime.NewWorker(c, &ontime.WorkerConfig{ShutdownTimeout: time.Second})
		if err := ontime.Handle(w, "t", func(context.Context, *ontime.Message[[]byte]) error { return nil },
			&ontime.TopicOptions{Lease: time.Second, PollInterval: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
		runErr := make(chan error, 1)
		go func() { runErr <- w.Run(context.WithoutCancel(t.Context())) }()
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = w.Stop(sctx)
			<-runErr
		})
		workers = append(workers, w)
		_ = i
	}
	time.Sleep(300 * time.Millisecond)
	srv.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for i, w := range workers {
		for w.Health().Healthy {
			if time.Now().After(deadline) {
				t.Fatalf("worker %d never noticed the store was gone", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(8 * time.Second)
	srv.Restart()
	back := time.Now()
	// The bound: 1 s of back-off (the poll interval is longer), plus the
	// reconnect and the claim; 2.5 s leaves room for a loaded machine and
	// is well below the 7.5 s the former back-off allowed.
	for i, w := range workers {
		for !w.Health().Healthy {
			if time.Since(back) > 2500*time.Millisecond {
				t.Fatalf("worker %d: Health %+v: still unhealthy %v after redis-server came back", i, w.Health(), time.Since(back).Round(time.Millisecond))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("all %d workers healthy again %v after redis-server came back", n, time.Since(back).Round(time.Millisecond))
}
