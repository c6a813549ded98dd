package ontime_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ontime-go/ontime"
)

// A handler may run longer than its lease: while it runs, the worker
// extends the lease every Lease/3 (the heartbeat), so the timer is not
// delivered again elsewhere, and the handler's context stays alive.
func ExampleTopicOptions_lease() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "reports", "yearly report", ontime.WithID("report-2029"))

	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "reports", func(ctx context.Context, m *ontime.Message[string]) error {
		defer close(done)
		// A long job: it runs past the lease deadline it was claimed
		// with, until the store shows the lease pushed beyond it.
		extended := false
		for !extended || time.Now().Before(m.LeaseUntil) {
			select {
			case <-ctx.Done(): // the lease was lost
				fmt.Println("lease lost:", ctx.Err())
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			t, err := client.Get(ctx, "reports", m.ID)
			if err != nil {
				log.Fatal(err)
			}
			extended = t.LeaseUntil.After(m.LeaseUntil)
		}
		fmt.Println("ran past its first lease deadline, lease extended:", extended)
		return nil
	}, &ontime.TopicOptions{Lease: 300 * time.Millisecond, MaxConcurrency: 1})
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)
	n, _ := client.Count(ctx, "reports")
	fmt.Println("left:", n.Scheduled+n.Leased)
	// Output:
	// ran past its first lease deadline, lease extended: true
	// left: 0
}

// Timeout bounds each attempt: the handler's context ends after it, and an
// attempt that runs past it has failed and is retried.
func ExampleTopicOptions_timeout() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "exports", "invoices.csv")

	done := make(chan struct{})
	worker := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	ontime.Handle(worker, "exports", func(ctx context.Context, m *ontime.Message[string]) error {
		if m.Attempt == 1 {
			<-ctx.Done() // a stuck export
			fmt.Println("attempt 1:", context.Cause(ctx))
			return ctx.Err()
		}
		fmt.Println("attempt 2: exported", m.Body)
		close(done)
		return nil
	}, &ontime.TopicOptions{
		Timeout: 50 * time.Millisecond,
		Retry:   ontime.RetryPolicy{MinDelay: 10 * time.Millisecond},
	})
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)
	// Output:
	// attempt 1: ontime: handler timed out
	// attempt 2: exported invoices.csv
}
