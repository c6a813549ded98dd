package ontimeredis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
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

// TestRegistryPruned: topics that emptied out leave the topic registry
// (the set Topics lists) when Topics finds them empty, and one that gets a
// timer again is listed again. (The conformance case Topics/Relisted
// checks the same under concurrent writes, on a Cluster too.)
func TestRegistryPruned(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	d := newDriver(t, ontimeredis.Options{Prefix: prefix})
	ctx := t.Context()
	rdb := redistest.NewClient(t)
	for i := range 500 {
		topic := fmt.Sprintf("junk-%d", i)
		if _, err := d.Schedule(ctx, topic, []ontimedriver.NewTimer{{ID: "x", Delay: time.Hour}}, ontimedriver.Upsert); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Schedule(ctx, "keep", []ontimedriver.NewTimer{{ID: "x", Delay: time.Hour}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.SCard(ctx, prefix+"topics").Result(); err != nil || n != 501 {
		t.Fatalf("registry: %d members, %v; want 501", n, err)
	}
	for i := range 500 {
		if err := d.Cancel(ctx, fmt.Sprintf("junk-%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	topics, err := d.Topics(ctx)
	if err != nil || len(topics) != 1 || topics[0] != "keep" {
		t.Fatalf("Topics = %q, %v; want [keep]", topics, err)
	}
	if members, err := rdb.SMembers(ctx, prefix+"topics").Result(); err != nil || len(members) != 1 || members[0] != "keep" {
		t.Errorf("registry after the topics emptied: %d members (%v), want only keep", len(members), err)
	}
	if _, err := d.Schedule(ctx, "junk-7", []ontimedriver.NewTimer{{ID: "y", Delay: time.Hour}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	if topics, err := d.Topics(ctx); err != nil || len(topics) != 2 {
		t.Errorf("Topics after junk-7 got a timer again: %q, %v", topics, err)
	}
}
