package ontimebolt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

const envPoisonFile = "ONTIMEBOLT_TEST_POISON_FILE"

// TestPoisonChild is the child of TestPoisonMessageDeadLettered: a Worker
// (MaxAttempts 3) whose handler kills the process on the body "poison"
// and acks anything else. It exits 0 once the topic holds no timer.
func TestPoisonChild(t *testing.T) {
	path := os.Getenv(envPoisonFile)
	if path == "" {
		t.Skip("child process of TestPoisonMessageDeadLettered")
	}
	d, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(5)
	}
	c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
	if err != nil {
		os.Exit(5)
	}
	w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
	err = ontime.Handle(w, "poison", func(_ context.Context, m *ontime.Message[string]) error {
		if m.Body == "poison" {
			os.Exit(3) // the handler takes the process down, before any outcome
		}
		return nil
	}, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MaxAttempts: 3}})
	if err != nil {
		os.Exit(5)
	}
	go func() { _ = w.Run(context.Background()) }()
	for {
		cnt, err := d.Count(context.Background(), "poison")
		if err == nil && cnt.Scheduled+cnt.Leased == 0 {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = w.Stop(sctx)
			cancel()
			_ = d.Close()
			os.Exit(0)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPoisonMessageDeadLettered: a message whose handler kills the process
// every time is dead-lettered after MaxAttempts deliveries, without waiting
// for leases, and a timer published next to it is delivered: each restart finds the dead process's leases dropped and the
// attempt its claim counted kept on disk; the delivery past MaxAttempts
// dead-letters it without calling the handler.
func TestPoisonMessageDeadLettered(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	path := t.TempDir() + "/poison.db"
	d, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ontime.NewClient(d, &ontime.Config{Logger: quiet})
	if _, err := c.Publish(ctx, "poison", "poison", ontime.WithID("bad")); err != nil {
		t.Fatal(err)
	}
	// Due once the crashes are over: a timer in flight at a crash counts
	// the crash as an attempt too (see docs/guarantees.md).
	if _, err := c.Publish(ctx, "poison", "fine", ontime.WithID("good"), ontime.In(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	crashes := 0
	for run := 0; ; run++ {
		if run == 6 {
			t.Fatalf("not done after %d runs (%d crashes)", run, crashes)
		}
		start := time.Now()
		err := child(t, "TestPoisonChild", envPoisonFile, path).Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 3 {
			crashes++
			t.Logf("run %d: the handler crashed the process after %v", run, time.Since(start).Round(time.Millisecond))
			continue
		}
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		break
	}
	if crashes != 3 {
		t.Errorf("%d crashes, want 3 (MaxAttempts)", crashes)
	}
	d = reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
	page, err := d.ListDead(ctx, "poison", ontimedriver.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Dead) != 1 || page.Dead[0].ID != "bad" || page.Dead[0].Reason != ontimedriver.ReasonMaxAttempts || page.Dead[0].Attempt != 4 {
		t.Fatalf("dead letters = %+v; want bad, max_attempts, attempt 4", page.Dead)
	}
	if _, err := d.Get(ctx, "poison", "good"); !errors.Is(err, ontimedriver.ErrNotFound) {
		t.Errorf("good: %v, want acked", err)
	}
}
