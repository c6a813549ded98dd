package delivery_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/delivery"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

func newDispatcher(t *testing.T) (*delivery.Dispatcher, *ontime.Client, *apitest.SyncBuffer) {
	t.Helper()
	return newDispatcherWith(t, &config.Config{}, nil)
}

// newDispatcherWith runs a dispatcher with cfg (filled and validated here)
// on a fresh embedded store; openRedis gives redis-stream targets their
// client.
func newDispatcherWith(t *testing.T, cfg *config.Config, openRedis delivery.RedisOpener) (*delivery.Dispatcher, *ontime.Client, *apitest.SyncBuffer) {
	t.Helper()
	logs := &apitest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	drv, err := ontimebolt.Open(filepath.Join(t.TempDir(), "ontime.db"), &ontimebolt.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Fill()
	cfg.DiscoverInterval = config.Duration(50 * time.Millisecond)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := delivery.New(delivery.Options{Client: client, Config: cfg, Logger: log, OpenRedis: openRedis})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		_ = drv.Close()
	})
	return d, client, logs
}

// TestWatchOrder: a backlog claimed by many concurrent handlers still
// reaches the watcher in due order.
func TestWatchOrder(t *testing.T) {
	t.Parallel()
	d, client, _ := newDispatcher(t)
	w, err := d.Watch("order")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const n = 60
	base := time.Now().Add(-time.Minute)
	timers := make([]ontime.Timer, n)
	for i, p := range rand.Perm(n) {
		timers[i] = ontime.Timer{ID: fmt.Sprintf("t%02d", p), Body: "x", At: base.Add(time.Duration(p) * time.Millisecond)}
	}
	if _, err := client.PublishBatch(t.Context(), "order", timers); err != nil {
		t.Fatal(err)
	}
	var got []string
	timeout := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case it := <-w.C():
			got = append(got, it.Msg.ID)
			it.Done(nil)
		case <-timeout:
			t.Fatalf("got %d of %d timers: %v", len(got), n, got)
		}
	}
	for i, id := range got {
		if id != fmt.Sprintf("t%02d", i) {
			t.Fatalf("watcher got %v, want t00..t%02d in order", got, n-1)
		}
	}
	waitCount(t, client, "order", 0)
}

// TestWatcherLeaves: timers queued for a watcher that leaves go to the
// topic's target (the log) instead, and one whose write failed is due again.
func TestWatcherLeaves(t *testing.T) {
	t.Parallel()
	d, client, logs := newDispatcher(t)
	w, err := d.Watch("leave")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := client.Publish(t.Context(), "leave", fmt.Sprintf("body-%d", i), ontime.WithID(fmt.Sprint("l", i))); err != nil {
			t.Fatal(err)
		}
	}
	// The first is handed out and its write "fails"; the watcher leaves
	// without taking the others.
	select {
	case it := <-w.C():
		it.Done(fmt.Errorf("connection reset"))
	case <-time.After(10 * time.Second):
		t.Fatal("no timer reached the watcher")
	}
	w.Close()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), `msg="timer fired"`) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the log target did not take the 3 timers:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitCount(t, client, "leave", 0)
	if c := d.Counters(); c.Delivered != 3 || c.Watchers != 0 {
		t.Errorf("counters %+v", c)
	}
}

func waitCount(t *testing.T, c *ontime.Client, topic string, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Count(t.Context(), topic)
		if err != nil {
			t.Fatal(err)
		}
		if n.Scheduled+n.Leased == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %+v, want %d", topic, n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
