//go:build linux

package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
)

// TestRedisPauseHealth: a worker whose store stops answering (redis-server
// SIGSTOPped) should report itself unhealthy within a bounded time, as it
// does when the store refuses connections.
//
// Each Claim and Settle call is bounded by storeCallTimeout (a third of the
// lease, 2 s to 5 s; claimloop.go), so a hung store turns the worker
// unhealthy within that bound even when the Redis client's own read timeout
// (5 s, with retries) is much longer, and even when the client does not
// honour context deadlines itself (ContextTimeoutEnabled off, as in the
// README's client): the driver enforces them. (Before that bound, a 6 s
// pause passed with Health() true throughout; before the driver enforced
// it, with the README's client, too.)
func TestRedisPauseHealth(t *testing.T) {
	srv := redistest.StartServer(t)
	// Built as the README shows: go-redis then ignores context deadlines
	// (no ContextTimeoutEnabled) and waits for its own 5 s read timeout,
	// with retries; the bound must be ontime's own.
	rdb := readmeClient(t, srv.Addr)
	c, _ := newStoreClient(t, rdb, redistest.Prefix(t), nil)
	w := ontime.NewWorker(c, &ontime.WorkerConfig{ShutdownTimeout: time.Second})
	if err := ontime.Handle(w, "idle", func(context.Context, *ontime.Message[[]byte]) error { return nil },
		&ontime.TopicOptions{Lease: time.Second, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(context.WithoutCancel(t.Context())) }()
	t.Cleanup(func() {
		srv.Resume()
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
		<-runErr
	})
	// The worker runs: redis-server has seen two of its claims (a claim
	// every 100 ms), so the pause catches its claim loop, not its start.
	wait.For(t, 20*time.Second, func() bool {
		info, err := rdb.Info(t.Context(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			var n int
			if _, err := fmt.Sscanf(line, "cmdstat_evalsha:calls=%d,", &n); err == nil {
				return n >= 2
			}
		}
		return false
	}, "two claims of the worker")
	srv.Pause()
	start := time.Now()
	// The bound is 2 s (storeCallTimeout of a 1 s lease) after the claim
	// in flight began, plus up to one PollInterval before it; 4 s leaves
	// room for a loaded machine and stays below go-redis's own 5 s read
	// timeout, so a client that ignores context deadlines fails here.
	err := wait.Until(4*time.Second, func() bool { return !w.Health().Healthy })
	srv.Resume()
	if err == nil {
		t.Logf("unhealthy %v after the pause began", time.Since(start).Round(time.Millisecond))
		return
	}
	t.Errorf("Health() stayed true through a %v pause of redis-server (lease 1s): a Claim or Settle should have timed out after storeCallTimeout (2 s for this lease) and turned the worker unhealthy", time.Since(start).Round(time.Millisecond))
}
