package ontime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontime-go/ontime"
)

// TestClaimAhead: on a store that reports slow claims (the embedded
// store), a worker holds up to MaxConcurrency + ClaimAhead timers claimed
// but runs at most MaxConcurrency handlers; a stop hands the timers
// claimed ahead back unstarted, without counting the attempt.
func TestClaimAhead(t *testing.T) {
	t.Parallel()
	// In a bubble (testing/synctest): synctest.Wait returns once every
	// goroutine of the worker is blocked, which is the event that shows
	// the claim loop had its chance to claim more, and a stop its chance
	// to begin, however busy the machine.
	synctest.Test(t, testClaimAhead)
}

func testClaimAhead(t *testing.T) {
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

	synctest.Wait()
	cnt, err := c.Count(ctx, "ahead")
	if err != nil {
		t.Fatal(err)
	}
	if cnt.Leased != conc+batch || running.Load() != conc {
		t.Fatalf("leased %d, running %d; want %d leased, %d running", cnt.Leased, running.Load(), conc+batch, conc)
	}
	// Nothing frees up: no more claims, however long the worker waits.
	time.Sleep(time.Minute)
	synctest.Wait()
	if cnt, _ := c.Count(ctx, "ahead"); cnt.Leased != conc+batch {
		t.Fatalf("leased %d, want %d", cnt.Leased, conc+batch)
	}

	// Stop while handlers run: the timers claimed ahead go back unstarted.
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(ctx) }()
	synctest.Wait() // the stop has begun and waits for the handlers
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v while handlers run", err)
	default:
	}
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
