package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ontime-go/ontime"
)

// Ack deletes the timer at once, before the handler returns; the handler's
// return value is then ignored, and a second settle is refused.
func ExampleMessage_Ack() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "webhooks", "order shipped")

	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "webhooks", func(ctx context.Context, m *ontime.Message[string]) error {
		defer close(done)
		// At most once from here on: the timer is gone before the call.
		fmt.Println("ack:", m.Ack(ctx))
		fmt.Println("second ack refused:", errors.Is(m.Ack(ctx), ontime.ErrAlreadySettled))
		return errors.New("post failed") // ignored: already acked
	}, nil)
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)
	n, _ := client.Count(ctx, "webhooks")
	fmt.Println("left:", n.Scheduled+n.Leased)
	// Output:
	// ack: <nil>
	// second ack refused: true
	// left: 0
}

// Nack counts a failed attempt at once: the timer is retried after the
// retry policy's backoff.
func ExampleMessage_Nack() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "sync", "sync account 9")

	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "sync", func(ctx context.Context, m *ontime.Message[string]) error {
		if m.Attempt == 1 {
			fmt.Println("attempt 1 nack:", m.Nack(ctx, errors.New("upstream busy")))
			return nil // ignored: already settled
		}
		fmt.Printf("attempt %d ack: %v\n", m.Attempt, m.Ack(ctx))
		close(done)
		return nil
	}, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MinDelay: 20 * time.Millisecond}})
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)
	// Output:
	// attempt 1 nack: <nil>
	// attempt 2 ack: <nil>
}

// Drop drops the timer at once: deleted, never retried, not
// dead-lettered.
func ExampleMessage_Drop() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "coupons", "coupon X1", ontime.WithHeader("expired", "yes"))

	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "coupons", func(ctx context.Context, m *ontime.Message[string]) error {
		defer close(done)
		if m.Headers["expired"] == "yes" {
			fmt.Println("drop:", m.Drop(ctx, errors.New("coupon expired")))
		}
		return nil
	}, nil)
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)
	n, _ := client.Count(ctx, "coupons")
	dead, _ := client.DeadLetters(ctx, "coupons", ontime.ListOptions{})
	fmt.Println("left:", n.Scheduled+n.Leased, "dead:", len(dead.Dead))
	// Output:
	// drop: <nil>
	// left: 0 dead: 0
}
