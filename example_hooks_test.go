package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ontime-go/ontime"
)

// A middleware runs around every handler call of a worker: here one logs
// each delivery with its outcome as the handler returned it, and another
// turns a handler's panic into a dead letter instead of a retry.
func ExampleMiddleware() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})

	logging := func(ctx context.Context, d *ontime.Delivery, next func(context.Context) error) error {
		err := next(ctx)
		fmt.Printf("%s %s attempt %d: %v\n", d.Topic, d.ID, d.Attempt, err)
		return err
	}
	deadLetterPanics := func(ctx context.Context, d *ontime.Delivery, next func(context.Context) error) error {
		err := next(ctx)
		var pe *ontime.PanicError
		if errors.As(err, &pe) {
			return ontime.DeadLetter(fmt.Errorf("panicked: %v", pe.Value))
		}
		return err
	}

	worker := ontime.NewWorker(client, &ontime.WorkerConfig{
		Logger:     quiet,
		Middleware: []ontime.Middleware{logging, deadLetterPanics}, // outermost first
	})
	done := make(chan struct{}, 2)
	ontime.Handle(worker, "jobs", func(ctx context.Context, m *ontime.Message[string]) error {
		defer func() { done <- struct{}{} }()
		if m.Body == "bad" {
			panic("cannot handle " + m.Body)
		}
		return nil
	}, &ontime.TopicOptions{MaxConcurrency: 1})
	client.Publish(ctx, "jobs", "good", ontime.WithID("job-1"))
	go worker.Run(ctx)
	<-done
	client.Publish(ctx, "jobs", "bad", ontime.WithID("job-2"))
	<-done
	worker.Stop(ctx)
	page, _ := client.DeadLetters(ctx, "jobs", ontime.ListOptions{})
	for _, d := range page.Dead {
		fmt.Printf("dead letter %s: %s\n", d.ID, d.LastError)
	}
	// Output:
	// jobs job-1 attempt 1: <nil>
	// jobs job-2 attempt 1: ontime: dead-lettered: panicked: cannot handle bad
	// dead letter job-2: panicked: cannot handle bad
}

// metrics is what a metrics module would build on the hooks: counts of
// published timers and of deliveries by outcome, lateness and handler
// durations (a real one would feed Prometheus histograms).
type metrics struct {
	mu        sync.Mutex
	published int
	outcomes  map[string]int
	early     int
}

// AfterPublish counts the timers written.
func (m *metrics) AfterPublish(ctx context.Context, p *ontime.PublishEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range p.Results {
		if r.Err == nil {
			m.published++
		}
	}
}

// DeliveryEnd counts outcomes, and timers fired before their due time.
func (m *metrics) DeliveryEnd(ctx context.Context, d *ontime.Delivery, r ontime.DeliveryResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outcomes[d.Topic+" "+r.Outcome.String()]++
	if d.FiredAt.Before(d.Due) { // lateness = d.FiredAt.Sub(d.Due)
		m.early++
	}
	_ = r.Duration // the handler's run time
}

// tracing is what a tracing module would build on the hooks: it writes a
// trace context into every published timer's headers and reads it back
// when the timer is delivered, into the handler's context.
type tracing struct{}

type traceKey struct{}

// BeforePublish injects a traceparent header into each timer.
func (tracing) BeforePublish(ctx context.Context, p *ontime.PublishEvent) context.Context {
	for i := range p.Timers {
		if p.Timers[i].Headers == nil {
			p.Timers[i].Headers = map[string]string{}
		}
		p.Timers[i].Headers["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	}
	return ctx
}

// DeliveryStart puts the publisher's trace context into the handler's.
func (tracing) DeliveryStart(ctx context.Context, d *ontime.Delivery) context.Context {
	return context.WithValue(ctx, traceKey{}, d.Headers["traceparent"])
}

// Hooks let modules observe publishes and deliveries without the library
// importing them: here a metrics hook and a tracing hook, set on the
// Client, so its workers use them too.
func ExampleDeliveryEndHook() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	m := &metrics{outcomes: map[string]int{}}
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet, Hooks: []any{m, tracing{}}})

	worker := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	done := make(chan struct{}, 3)
	ontime.Handle(worker, "emails", func(ctx context.Context, msg *ontime.Message[string]) error {
		defer func() { done <- struct{}{} }()
		if msg.Attempt == 1 && msg.Body == "flaky" {
			return errors.New("smtp timeout")
		}
		fmt.Println("trace of", msg.Body+":", ctx.Value(traceKey{}))
		return nil
	}, &ontime.TopicOptions{MaxConcurrency: 1, Retry: ontime.RetryPolicy{MinDelay: 10 * time.Millisecond}})
	client.Publish(ctx, "emails", "welcome")
	client.Publish(ctx, "emails", "flaky", ontime.In(20*time.Millisecond))
	go worker.Run(ctx)
	for range 3 {
		<-done
	}
	worker.Stop(ctx)

	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Println("published:", m.published)
	fmt.Println("acked:", m.outcomes["emails acked"], "retried:", m.outcomes["emails retried"], "fired early:", m.early)
	// Output:
	// trace of welcome: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// trace of flaky: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// published: 2
	// acked: 2 retried: 1 fired early: 0
}
