package ontime_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// quiet keeps the examples' output to what they print.
var quiet = slog.New(slog.DiscardHandler)

// openStore opens an embedded store in a fresh directory; close removes it.
// A real program opens one file and keeps it.
func openStore() (*ontimebolt.Driver, func()) {
	dir, err := os.MkdirTemp("", "ontime-example-")
	if err != nil {
		log.Fatal(err)
	}
	drv, err := ontimebolt.Open(filepath.Join(dir, "timers.db"), &ontimebolt.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	return drv, func() {
		drv.Close()
		os.RemoveAll(dir)
	}
}

// Publish a message due in 100ms and handle it in a worker.
func Example() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()

	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Publish(ctx, "greetings", "hello, world", ontime.In(100*time.Millisecond)); err != nil {
		log.Fatal(err)
	}

	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	err = ontime.Handle(worker, "greetings", func(ctx context.Context, m *ontime.Message[string]) error {
		fmt.Println("received:", m.Body)
		close(done)
		return nil // ack: the timer is deleted
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	go worker.Run(ctx)

	<-done
	if err := worker.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	n, _ := client.Count(ctx, "greetings")
	fmt.Println("left:", n.Scheduled+n.Leased)
	// Output:
	// received: hello, world
	// left: 0
}

// Invoice is a message body; it travels as JSON.
type Invoice struct {
	ID       int     `json:"id"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// A typed handler: the JSON body is decoded into the handler's type.
func ExampleHandle() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})

	_, err := client.Publish(ctx, "invoices", Invoice{ID: 42, Amount: 99.5, Currency: "EUR"},
		ontime.WithID("invoice-42"), ontime.WithHeader("tenant", "acme"))
	if err != nil {
		log.Fatal(err)
	}

	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "invoices", func(ctx context.Context, m *ontime.Message[Invoice]) error {
		fmt.Printf("%s (tenant %s): invoice %d, %.2f %s\n", m.ID, m.Headers["tenant"], m.Body.ID, m.Body.Amount, m.Body.Currency)
		close(done)
		return nil
	}, nil)
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)
	// Output:
	// invoice-42 (tenant acme): invoice 42, 99.50 EUR
}

// A handler that fails twice, then succeeds: each failure is retried after
// the policy's backoff, and Attempt counts the deliveries.
func ExampleRetryPolicy() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "flaky", "charge card")

	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "flaky", func(ctx context.Context, m *ontime.Message[string]) error {
		if m.Attempt < 3 {
			fmt.Printf("attempt %d: failing\n", m.Attempt)
			return fmt.Errorf("gateway timeout")
		}
		fmt.Printf("attempt %d: %s done\n", m.Attempt, m.Body)
		close(done)
		return nil
	}, &ontime.TopicOptions{
		Retry: ontime.RetryPolicy{
			MinDelay:    20 * time.Millisecond, // then 40ms, 80ms, ...
			MaxDelay:    time.Second,
			MaxAttempts: 5, // then the timer is dead-lettered
		},
	})
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)
	// Output:
	// attempt 1: failing
	// attempt 2: failing
	// attempt 3: charge card done
}
