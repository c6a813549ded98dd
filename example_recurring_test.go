package ontime_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/schedule"
)

// A recurring timer: one delivery per tick across every worker of the
// topic, each tick armed by the settlement of the one before, in the
// store (no leader, nothing in memory). The handler sees the tick's
// number and scheduled instant.
func ExampleClient_PublishRecurring() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()

	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	// every 50 ms; after an outage, fire each missed tick (at most 10)
	every := schedule.Every(50 * time.Millisecond)
	if _, err := client.PublishRecurring(ctx, "reports", "nightly-report", every, "build the report",
		ontime.OnMissed(ontime.FireEach(10))); err != nil {
		log.Fatal(err)
	}

	ticks := make(chan ontime.Tick, 10)
	worker := ontime.NewWorker(client, nil)
	err = ontime.Handle(worker, "reports", func(ctx context.Context, m *ontime.Message[string]) error {
		if m.Tick.At.After(m.Due) {
			return fmt.Errorf("tick %d fired before its instant", m.Tick.N) // never happens
		}
		ticks <- m.Tick
		return nil // ack: arms the next tick
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	go worker.Run(ctx)

	for range 3 {
		t := <-ticks
		fmt.Println("tick", t.N, t.Schedule)
	}
	if err := client.Pause(ctx, "reports", "nightly-report"); err != nil {
		log.Fatal(err)
	}
	if err := worker.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	info, err := client.Get(ctx, "reports", "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("paused:", info.Recurring.Paused, "missed policy:", info.Recurring.Missed)

	// Cancel ends the schedule.
	if err := client.Cancel(ctx, "reports", "nightly-report"); err != nil {
		log.Fatal(err)
	}
	// Output:
	// tick 1 every 50ms
	// tick 2 every 50ms
	// tick 3 every 50ms
	// paused: true missed policy: each:10
}
