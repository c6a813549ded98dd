package ontime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
)

// TestClaimAhead: on a store that reports slow claims (the embedded
// store), a worker holds up to MaxConcurrency + ClaimAhead timers claimed
// but runs at most MaxConcurrency handlers; a stop hands the timers
// claimed ahead back unstarted, without counting the attempt.
func TestClaimAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openBolt(t)
	c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	const conc, batch = 2, 3 // ClaimAhead defaults to ClaimBatch
	batchTimers := make([]ontime.Timer, 12)
	if _, err := c.PublishBatch(ctx, "ahead", batchTimers); err != nil {
		t.Fatal(err)
	}
	var running, most atomic.Int64
	release := make(chan struct{})
	w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.Handle(w, "ahead", func(ctx context.Context, m *ontime.Message[[]byte]) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			if m := most.Load(); n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, &ontime.TopicOptions{MaxConcurrency: conc, ClaimBatch: batch}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	deadline := time.Now().Add(5 * time.Second)
	for {
		cnt, err := c.Count(ctx, "ahead")
		if err != nil {
			t.Fatal(err)
		}
		if cnt.Leased == conc+batch && running.Load() == conc {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leased %d, running %d; want %d leased, %d running", cnt.Leased, running.Load(), conc+batch, conc)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // no more claims while nothing frees up
	if cnt, _ := c.Count(ctx, "ahead"); cnt.Leased != conc+batch {
		t.Fatalf("leased %d, want %d", cnt.Leased, conc+batch)
	}

	// Stop while handlers run: the timers claimed ahead go back unstarted.
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(ctx) }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m > conc {
		t.Errorf("%d handlers ran at once, MaxConcurrency %d", m, conc)
	}
	page, err := c.List(ctx, "ahead", ontime.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Timers) != 12-conc {
		t.Fatalf("%d timers left, want %d", len(page.Timers), 12-conc)
	}
	for _, ti := range page.Timers {
		if ti.Attempt != 0 || ti.State != ontime.StateScheduled {
			t.Errorf("timer %s: attempt %d, state %s; want 0, scheduled", ti.ID, ti.Attempt, ti.State)
		}
	}
}
