package ontime_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/schedule"
)

// storeCalls records the store calls it is told of.
type storeCalls struct {
	mu    sync.Mutex
	calls []ontime.StoreCall
}

func (s *storeCalls) StoreCall(ctx context.Context, c ontime.StoreCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *storeCalls) ops(topic string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		if c.Topic == topic && !slices.Contains(out, c.Op) {
			out = append(out, c.Op)
		}
	}
	slices.Sort(out)
	return out
}

func (s *storeCalls) find(op string) (ontime.StoreCall, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.calls) - 1; i >= 0; i-- {
		if s.calls[i].Op == op {
			return s.calls[i], true
		}
	}
	return ontime.StoreCall{}, false
}

// TestStoreCallHook: the Client's and the Worker's store calls reach a
// StoreCallHook with their op, full topic, duration and error; the
// store's definite answers (not found) and failures (closed) come as Err;
// Client.Driver still returns the driver the Client was built on.
func TestStoreCallHook(t *testing.T) {
	t.Parallel()
	h := &storeCalls{}
	drv := openBolt(t)
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet, Prefix: "app:", Hooks: []any{h}})
	if err != nil {
		t.Fatal(err)
	}
	if client.Driver() != ontimedriver.Driver(drv) {
		t.Errorf("Client.Driver() = %T, want the driver given to NewClient", client.Driver())
	}
	done := make(chan struct{}, 1)
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.Handle(w, "jobs", func(context.Context, *ontime.Message[string]) error {
		done <- struct{}{}
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID("a")); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w, ctx)
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(h.ops("app:jobs"), "settle") {
		if time.Now().After(deadline) {
			t.Fatalf("no settle reported; ops %v", h.ops("app:jobs"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := client.Get(ctx, "jobs", "nope"); !errors.Is(err, ontime.ErrNotFound) {
		t.Fatalf("Get: %v", err)
	}
	_, _ = client.Count(ctx, "jobs")
	_, _ = client.List(ctx, "jobs", ontime.ListOptions{})
	_, _ = client.DeadLetters(ctx, "jobs", ontime.ListOptions{})
	_ = client.Cancel(ctx, "jobs", "nope")
	_, _ = client.ReplayDeadLetters(ctx, "jobs", "x")
	_, _ = client.ReplayAllDeadLetters(ctx, "jobs")
	_, _ = client.PurgeDeadLetters(ctx, "jobs", "x")
	_, _ = client.PurgeAllDeadLetters(ctx, "jobs")
	_, _ = client.Topics(ctx)
	_ = client.Ping(ctx)

	want := []string{"cancel", "claim", "count", "get", "list", "list_dead", "purge_all_dead", "purge_dead",
		"replay_all_dead", "replay_dead", "schedule", "settle", "subscribe"}
	if got := h.ops("app:jobs"); !slices.Equal(got, want) {
		t.Errorf("ops on app:jobs = %v, want %v", got, want)
	}
	if got := h.ops(""); !slices.Equal(got, []string{"ping", "topics"}) {
		t.Errorf("ops without a topic = %v", got)
	}
	if c, _ := h.find("get"); !errors.Is(c.Err, ontime.ErrNotFound) || c.Duration <= 0 {
		t.Errorf("get reported %+v, want ErrNotFound and a duration", c)
	}
	if c, _ := h.find("schedule"); c.Err != nil || c.Duration <= 0 {
		t.Errorf("schedule reported %+v", c)
	}

	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Count(ctx, "jobs"); err == nil {
		t.Fatal("Count on a closed store succeeded")
	}
	if c, _ := h.find("count"); c.Err == nil {
		t.Errorf("count on a closed store reported no error: %+v", c)
	}
}

type panicStoreHook struct{}

func (panicStoreHook) StoreCall(context.Context, ontime.StoreCall) { panic("store hook") }

// TestPanickingStoreCallHook: a StoreCallHook's panic is logged; the call's
// result reaches the caller.
func TestPanickingStoreCallHook(t *testing.T) {
	t.Parallel()
	client, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet, Hooks: []any{panicStoreHook{}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID("a")); err != nil {
		t.Fatal(err)
	}
	if got, err := client.Get(ctx, "jobs", "a"); err != nil || got.ID != "a" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}

// TestStoreCallHookRecurring: the recurring timers' store calls reach a
// StoreCallHook too.
func TestStoreCallHookRecurring(t *testing.T) {
	t.Parallel()
	h := &storeCalls{}
	client, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet, Hooks: []any{h}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.PublishRecurring(ctx, "rec", "r", schedule.Every(time.Hour), "x"); err != nil {
		t.Fatal(err)
	}
	if err := client.Pause(ctx, "rec", "r"); err != nil {
		t.Fatal(err)
	}
	if err := client.Resume(ctx, "rec", "r"); err != nil {
		t.Fatal(err)
	}
	if err := client.Pause(ctx, "rec", "absent"); !errors.Is(err, ontime.ErrNotFound) {
		t.Fatalf("Pause of an absent id: %v", err)
	}
	want := []string{"get", "pause_recurring", "resume_recurring", "schedule_recurring"}
	if got := h.ops("rec"); !slices.Equal(got, want) {
		t.Errorf("ops on rec = %v, want %v", got, want)
	}
	if c, _ := h.find("pause_recurring"); !errors.Is(c.Err, ontime.ErrNotFound) {
		t.Errorf("the last pause_recurring reported %+v, want ErrNotFound", c)
	}
}
