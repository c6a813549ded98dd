package ontime_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/schedule"
)

// missedLog is an UnfiredTicksHook: it hears of the ticks that passed
// without firing (ontimeprom counts them in ontime_recurring_ticks_total).
type missedLog chan *ontime.UnfiredTicks

func (m missedLog) UnfiredTicks(_ context.Context, u *ontime.UnfiredTicks) { m <- u }

// A tick that runs past the next instants makes them missed: with the
// default policy (FireOnce) the schedule goes on with its first tick after
// the slow one ends, and the hook hears how many instants passed unfired.
func ExampleUnfiredTicksHook() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()

	unfired := make(missedLog, 10)
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet, Hooks: []any{unfired}})
	if err != nil {
		log.Fatal(err)
	}
	const every = 50 * time.Millisecond
	if _, err := client.PublishRecurring(ctx, "jobs", "sync", schedule.Every(every), "sync"); err != nil {
		log.Fatal(err)
	}
	worker := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	err = ontime.Handle(worker, "jobs", func(ctx context.Context, m *ontime.Message[string]) error {
		if m.Tick.N == 1 {
			// a slow tick: runs past at least five instants
			for time.Now().Before(m.Tick.At.Add(5*every + every/2)) {
				time.Sleep(every / 10)
			}
		}
		return nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	go worker.Run(ctx)
	u := <-unfired
	if err := worker.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(u.Topic, u.ID, u.Schedule, "paused:", u.Paused)
	fmt.Println("at least 5 missed:", u.Count >= 5, "· From to To holds them:", int64(u.To.Sub(u.From)/every)+1 == u.Count)
	// Output:
	// jobs sync every 50ms paused: false
	// at least 5 missed: true · From to To holds them: true
}
