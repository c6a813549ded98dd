package ontime_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ontime-go/ontime"
)

// Stop stops claiming and waits for running handlers; their timers are
// acked as usual.
func ExampleWorker_Stop() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "exports", "export 7")

	started := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "exports", func(ctx context.Context, m *ontime.Message[string]) error {
		close(started)
		time.Sleep(100 * time.Millisecond) // work that Stop waits for
		fmt.Println("finished", m.Body)
		return nil
	}, nil)
	go worker.Run(ctx)

	<-started
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fmt.Println("stop:", worker.Stop(sctx))
	n, _ := client.Count(ctx, "exports")
	fmt.Println("left:", n.Scheduled+n.Leased)
	// Output:
	// finished export 7
	// stop: <nil>
	// left: 0
}

// When Stop's context ends first, running handlers' contexts are
// cancelled. A handler that then returns leaves its timer due again at
// once, without counting a failed attempt: nothing is lost.
func ExampleWorker_Stop_deadline() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "exports", "export 8", ontime.WithID("export-8"))

	started := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "exports", func(ctx context.Context, m *ontime.Message[string]) error {
		close(started)
		<-ctx.Done() // a long job that honours its context
		return ctx.Err()
	}, nil)
	go worker.Run(ctx)

	<-started
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	fmt.Println("stop:", worker.Stop(sctx))
	t, err := client.Get(ctx, "exports", "export-8")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("timer: %s, due now: %v, attempt %d, last error %q\n", t.State, !t.Due.After(time.Now()), t.Attempt, t.LastError)
	// Output:
	// stop: context deadline exceeded
	// timer: scheduled, due now: true, attempt 0, last error ""
}
