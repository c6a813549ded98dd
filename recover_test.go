package ontime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// outageDriver forwards to a real embedded store, except that while down
// every Claim fails at once, as a store that refuses connections does.
type outageDriver struct {
	*ontimebolt.Driver
	down atomic.Bool
}

var errRefused = errors.New("connection refused (test outage)")

func (d *outageDriver) Claim(ctx context.Context, topic string, max int, lease time.Duration) (*ontimedriver.ClaimResult, error) {
	if d.down.Load() {
		return nil, errRefused
	}
	return d.Driver.Claim(ctx, topic, max, lease)
}

// After an outage long enough for every back-off to reach its cap, each of
// five workers (poll interval 2 s) notices the store is back within its
// poll interval or 1 s, whichever is shorter, and says so in Health. With the former 5 s cap
// (±50 % jitter) a worker could report the store unreachable for up to
// 7.5 s after it had returned; make stress once ended that way.
//
// In a bubble (testing/synctest): the time it measures is the worker's
// own, so a loaded machine's pauses do not count against it.
func TestWorkersNoticeStoreBack(t *testing.T) {
	synctest.Test(t, testWorkersNoticeStoreBack)
}

func testWorkersNoticeStoreBack(t *testing.T) {
	bolt, err := ontimebolt.Open(filepath.Join(t.TempDir(), "o.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	drv := &outageDriver{Driver: bolt}
	t.Cleanup(func() { _ = bolt.Close() })
	c, err := NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	var workers []*Worker
	for range n {
		w := NewWorker(c, &WorkerConfig{ShutdownTimeout: time.Second})
		if err := Handle(w, "t", func(context.Context, *Message[[]byte]) error { return nil },
			&TopicOptions{PollInterval: 2 * time.Second, DisableHeartbeat: true}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Run(context.Background()) }()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = w.Stop(ctx)
			<-done
		})
		workers = append(workers, w)
	}
	synctest.Wait() // every worker started and claimed
	drv.down.Store(true)
	for i, w := range workers {
		wait.For(t, 5*time.Second, func() bool { return !w.Health().Healthy }, "worker %d to notice the outage", i)
	}
	time.Sleep(8 * time.Second) // every back-off reaches its cap
	drv.down.Store(false)
	back := time.Now()
	for i, w := range workers {
		wait.For(t, 1500*time.Millisecond, func() bool { return w.Health().Healthy }, "worker %d to be healthy after the store came back: %s", i,
			func() string { return fmt.Sprintf("%+v", w.Health()) })
	}
	t.Logf("all %d workers healthy %v after the store came back", n, time.Since(back).Round(time.Millisecond))
}
