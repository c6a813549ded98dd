package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimetest"
)

// Snooze puts a timer back for later without counting a failed attempt.
func ExampleSnooze() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "reports", "daily report")

	var ready atomic.Bool // the report's data
	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "reports", func(ctx context.Context, m *ontime.Message[string]) error {
		if !ready.Load() {
			fmt.Printf("attempt %d: data not ready, snoozing\n", m.Attempt)
			ready.Store(true)
			return ontime.Snooze(50 * time.Millisecond)
		}
		fmt.Printf("attempt %d: sending %s\n", m.Attempt, m.Body)
		close(done)
		return nil
	}, &ontime.TopicOptions{MaxConcurrency: 1})
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)
	// Output:
	// attempt 1: data not ready, snoozing
	// attempt 1: sending daily report
}

// Order is a message body.
type Order struct {
	ID  int `json:"id"`
	Qty int `json:"qty"`
}

// Drop drops a message that can never succeed: it is deleted, not
// retried and not dead-lettered.
func ExampleDrop() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "orders", Order{ID: 1, Qty: -3})

	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "orders", func(ctx context.Context, m *ontime.Message[Order]) error {
		defer close(done)
		if m.Body.Qty <= 0 {
			fmt.Printf("order %d: quantity %d, dropping\n", m.Body.ID, m.Body.Qty)
			return ontime.Drop(errors.New("quantity must be positive"))
		}
		return nil
	}, nil)
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)
	n, _ := client.Count(ctx, "orders")
	dead, _ := client.DeadLetters(ctx, "orders", ontime.ListOptions{})
	fmt.Println("left:", n.Scheduled+n.Leased, "dead:", len(dead.Dead))
	// Output:
	// order 1: quantity -3, dropping
	// left: 0 dead: 0
}

// DeadLetter sets a message aside at once, for an operator to look at,
// replay or purge (see Client.DeadLetters).
func ExampleDeadLetter() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "orders", Order{ID: 2, Qty: 1000000}, ontime.WithID("order-2"))

	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "orders", func(ctx context.Context, m *ontime.Message[Order]) error {
		defer close(done)
		return ontime.DeadLetter(fmt.Errorf("quantity %d needs a human", m.Body.Qty))
	}, nil)
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx) // waits for the dead-lettering to reach the store

	dead, _ := client.DeadLetters(ctx, "orders", ontime.ListOptions{})
	for _, d := range dead.Dead {
		fmt.Printf("%s %s reason=%s error=%q\n", d.ID, d.Body, d.Reason, d.LastError)
	}
	// Output:
	// order-2 {"id":2,"qty":1000000} reason=rejected error="quantity 1000000 needs a human"
}

// OutcomeOf tells what an error a handler returned asks for; the outcome
// errors are exported types, for errors.As.
func ExampleOutcomeOf() {
	for _, err := range []error{
		nil,
		errors.New("mail server busy"),
		ontime.Snooze(time.Minute),
		fmt.Errorf("order 7: %w", ontime.Drop(errors.New("cancelled"))),
		ontime.DeadLetter(errors.New("poison")),
		ontime.RetryAfter(time.Hour, errors.New("rate limited")),
	} {
		fmt.Printf("%v -> %v\n", err, ontime.OutcomeOf(err))
	}
	var ra *ontime.RetryAfterError
	if errors.As(ontime.RetryAfter(time.Hour, errors.New("rate limited")), &ra) {
		fmt.Println("retry in", ra.Delay)
	}
	// Output:
	// <nil> -> acked
	// mail server busy -> retried
	// ontime: snooze 1m0s -> snoozed
	// order 7: ontime: dropped: cancelled -> dropped
	// ontime: dead-lettered: poison -> dead_lettered
	// ontime: retry after 1h0m0s: rate limited -> retried
	// retry in 1h0m0s
}

// A middleware that tells a snooze from a failure: it counts failures
// only, and turns the third failure in a row into a dead letter. It runs
// here on ontimetest's worker, with no store.
func ExampleOutcomeOf_middleware() {
	failures := 0
	mw := func(ctx context.Context, d *ontime.Delivery, next func(context.Context) error) error {
		err := next(ctx)
		switch ontime.OutcomeOf(err) {
		case ontime.OutcomeRetried:
			if failures++; failures >= 3 {
				return ontime.DeadLetter(err)
			}
		case ontime.OutcomeAcked:
			failures = 0
		}
		return err
	}
	w, err := ontimetest.NewWorker(&ontimetest.Config{Middleware: []ontime.Middleware{mw}})
	if err != nil {
		log.Fatal(err)
	}
	ontime.Handle(w, "sync", func(ctx context.Context, m *ontime.Message[string]) error {
		if m.Body == "wait" {
			return ontime.Snooze(time.Second)
		}
		return errors.New("upstream down")
	}, nil)
	for _, body := range []string{"go", "wait", "go", "go"} {
		res, _ := w.Work(context.Background(), "sync", body, nil)
		fmt.Println(body, "->", res.Outcome)
	}
	// Output:
	// go -> retried
	// wait -> snoozed
	// go -> retried
	// go -> dead_lettered
}
