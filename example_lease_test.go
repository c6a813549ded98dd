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
