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
	"github.com/ontime-go/ontime/internal/wait"
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

// next waits for w's next event.
func next(t *testing.T, w *delivery.Watcher, timeout time.Duration) delivery.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if ev, ok := w.Next(); ok {
			return ev
		}
		select {
		case <-w.Ready():
		case <-w.Gone():
			t.Fatalf("the watcher ended: %s", w.Reason())
		case <-deadline:
			t.Fatalf("no event within %s", timeout)
		}
	}
}

// TestWatchOrder: a backlog reaches a confirming watcher in due order,
// one event at a time until it confirms its first, and each timer is
// acked once its event is confirmed. The topic runs one handler at a time:
// with more, timers claimed together are sorted within a gathering pause
// (order.go), which a machine loaded enough to stall a goroutine for
// longer can defeat.
func TestWatchOrder(t *testing.T) {
	t.Parallel()
	d, client, _ := newDispatcherWith(t, &config.Config{Topics: map[string]config.Topic{"order": {Concurrency: 1}}}, nil)
	w, err := d.Watch("order", delivery.WatchOptions{Confirm: true})
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
	for len(got) < n {
		ev := next(t, w, 20*time.Second)
		got = append(got, ev.Msg.ID)
		if acked, unknown := d.Ack("order", []string{ev.ID}); acked != 1 || len(unknown) != 0 {
			t.Fatalf("Ack(%s): %d acked, unknown %v", ev.ID, acked, unknown)
		}
	}
	for i, id := range got {
		if id != fmt.Sprintf("t%02d", i) {
			t.Fatalf("watcher got %v, want t00..t%02d in order", got, n-1)
		}
	}
	waitCount(t, client, "order", 0)
	if acked, unknown := d.Ack("order", []string{"nope"}); acked != 0 || len(unknown) != 1 {
		t.Errorf("Ack of an unknown id: %d, %v", acked, unknown)
	}
}

// TestWatcherLeaves: a watcher that leaves gives its sent, unconfirmed
// timer back (due again at once, a failed attempt) and the timers it was
// not sent go to the topic's target (the log) instead; nothing is acked
// by being sent.
func TestWatcherLeaves(t *testing.T) {
	t.Parallel()
	d, client, logs := newDispatcher(t)
	w, err := d.Watch("leave", delivery.WatchOptions{Confirm: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := client.Publish(t.Context(), "leave", fmt.Sprintf("body-%d", i), ontime.WithID(fmt.Sprint("l", i))); err != nil {
			t.Fatal(err)
		}
	}
	// The first is sent (a new watcher holds one until it confirms); the
	// watcher leaves without confirming it.
	ev := next(t, w, 10*time.Second)
	if _, ok := w.Next(); ok {
		t.Error("a watcher that confirmed nothing was sent a second event")
	}
	w.Close()
	wait.For(t, 10*time.Second, func() bool { return strings.Count(logs.String(), `msg="timer fired"`) >= 3 },
		"the log target to take the 3 timers:\n%s", func() string { return logs.String() })
	if !strings.Contains(logs.String(), "id="+ev.Msg.ID+" due_at=") || !strings.Contains(logs.String(), "attempt=2") {
		t.Errorf("the unconfirmed timer %s did not come back as attempt 2:\n%s", ev.Msg.ID, logs.String())
	}
	waitCount(t, client, "leave", 0)
	if acked, _ := d.Ack("leave", []string{ev.ID}); acked != 0 {
		t.Error("a confirmation after the watcher left was taken")
	}
	if c := d.Counters(); c.Delivered != 3 || c.Watchers != 0 {
		t.Errorf("counters %+v", c)
	}
}

func waitCount(t *testing.T, c *ontime.Client, topic string, want int64) {
	t.Helper()
	var n ontime.Counts
	wait.For(t, 10*time.Second, func() bool {
		var err error
		if n, err = c.Count(t.Context(), topic); err != nil {
			t.Fatal(err)
		}
		return n.Scheduled+n.Leased == want
	}, "%s to hold %d timers: %s", topic, want, func() string { return fmt.Sprintf("%+v", n) })
}

// TestWatcherExpires: an event not confirmed within the topic's lease ends
// its watcher (Gone, with the reason) and its timer comes back, as a
// failed attempt, to another watcher, whose confirmation acks it.
func TestWatcherExpires(t *testing.T) {
	t.Parallel()
	d, client, _ := newDispatcherWith(t, &config.Config{Topics: map[string]config.Topic{
		"exp": {Lease: config.Duration(300 * time.Millisecond)},
	}}, nil)
	ended := make(chan struct{})
	slow, err := d.Watch("exp", delivery.WatchOptions{Confirm: true, OnEnd: func() { close(ended) }})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := client.Publish(t.Context(), "exp", "x", ontime.WithID("e1")); err != nil {
		t.Fatal(err)
	}
	first := next(t, slow, 10*time.Second)
	if first.Msg.ID != "e1" || first.Msg.Attempt != 1 {
		t.Fatalf("first event %+v", first.Msg)
	}
	select {
	case <-slow.Gone():
	case <-time.After(20 * time.Second):
		t.Fatal("the watcher that did not confirm was not ended")
	}
	<-ended
	if why := slow.Reason(); !strings.Contains(why, "was not confirmed within 300ms") || !strings.Contains(why, `"e1"`) {
		t.Errorf("reason %q", why)
	}
	other, err := d.Watch("exp", delivery.WatchOptions{Confirm: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	again := next(t, other, 10*time.Second)
	if again.Msg.ID != "e1" || again.Msg.Attempt != 2 || again.ID == first.ID {
		t.Errorf("came back as %+v (event %s), want e1, attempt 2, a new event id", again.Msg, again.ID)
	}
	if acked, _ := d.Ack("exp", []string{first.ID}); acked != 0 {
		t.Error("the expired event's confirmation was taken")
	}
	if acked, _ := d.Ack("exp", []string{again.ID}); acked != 1 {
		t.Error("the second event's confirmation was refused")
	}
	waitCount(t, client, "exp", 0)
}

// TestWatchTap: a watcher that does not confirm gets a copy of each
// delivery and takes nothing (the target delivers every timer); one that
// does not read keeps at most its buffer and counts what it missed.
func TestWatchTap(t *testing.T) {
	t.Parallel()
	d, client, logs := newDispatcher(t)
	tap, err := d.Watch("tap", delivery.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	const n = 100
	timers := make([]ontime.Timer, n)
	for i := range timers {
		timers[i] = ontime.Timer{ID: fmt.Sprintf("p%03d", i), Body: "x"}
	}
	if _, err := client.PublishBatch(t.Context(), "tap", timers); err != nil {
		t.Fatal(err)
	}
	waitCount(t, client, "tap", 0)
	if got := strings.Count(logs.String(), `msg="timer fired" topic=tap`); got != n {
		t.Errorf("the target delivered %d of %d timers", got, n)
	}
	var got, missed int
	for {
		ev, ok := tap.Next()
		if !ok {
			break
		}
		got++
		missed += ev.Missed
		if acked, _ := d.Ack("tap", []string{ev.ID}); acked != 0 {
			t.Error("a copy was confirmed")
		}
	}
	if got != 64 || missed != n-64 {
		t.Errorf("the tap that did not read got %d copies and missed %d; want 64 (its buffer) and %d", got, missed, n-64)
	}
}
