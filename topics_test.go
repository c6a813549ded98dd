package ontime

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

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
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Error(err)
		}
		<-done
	}()
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
