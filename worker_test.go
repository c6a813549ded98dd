package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
)

// TestStopRightAfterRun: Stop called while Run is starting the topics
// (a Handle topic and a HandleTopics pattern, each with a lease keeper)
// stops them cleanly: Run and Stop both return nil, and nothing starts
// after the stop. Under -race this caught the lease keeper's
// WaitGroup.Add (Run) racing its Wait (Stop).
func TestStopRightAfterRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, *ontime.Message[[]byte]) error { return nil }
	for range 300 {
		w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
		for i := range 20 {
			if err := ontime.Handle(w, fmt.Sprintf("run-stop.%d", i), nop, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := ontime.HandleTopics(w, "run-stop-*", nop, nil); err != nil {
			t.Fatal(err)
		}
		ran := make(chan error, 1)
		go func() { ran <- w.Run(ctx) }()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := w.Stop(sctx)
		cancel()
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
		select {
		case err := <-ran:
			// Stop may come before Run marks the worker running: then
			// Run refuses to start (ErrStopped), which is as clean.
			if err != nil && !errors.Is(err, ontime.ErrStopped) {
				t.Fatalf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after Stop")
		}
	}
}
