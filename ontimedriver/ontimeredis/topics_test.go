package ontimeredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// Timers written before the store kept a topic index (an upgrade: here,
// the index key deleted) are delivered by a HandleTopics worker, which
// repairs the index when it starts.
func TestHandleTopicsFindsTopicsWrittenBeforeTheIndex(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	d := newDriver(t, ontimeredis.Options{Prefix: prefix})
	c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := map[string]bool{}
	for _, topic := range []string{"old-1", "old-2", "old-3"} {
		id, err := c.Publish(ctx, topic, "x")
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	rdb := redistest.NewClient(t)
	if n, err := rdb.Del(ctx, prefix+"{topics}:next").Result(); err != nil || n != 1 {
		t.Fatalf("deleting the index: %d, %v", n, err)
	}
	got := make(chan string, 10)
	w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.HandleTopics(w, "old-*", func(_ context.Context, m *ontime.Message[string]) error {
		got <- m.ID
		return nil
	}, &ontime.TopicOptions{PollInterval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := w.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		<-done
	}()
	deadline := time.After(10 * time.Second)
	for len(ids) > 0 {
		select {
		case id := <-got:
			if !ids[id] {
				t.Fatalf("unexpected or repeated delivery %s", id)
			}
			delete(ids, id)
		case <-deadline:
			t.Fatalf("%d timers of topics written before the index were not delivered (poll interval 1m)", len(ids))
		}
	}
}
