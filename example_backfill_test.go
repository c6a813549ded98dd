package ontime_test

import (
	"context"
	"fmt"
	"log"
	"sort"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/schedule"
)

// Backfill runs the ticks of a past range again, each once: an hourly
// report that did not run on the afternoon of 1 March 2026 is built for
// 13:00, 14:00 and 15:00 now, while the schedule's own next tick stays
// armed.
func ExampleClient_Backfill() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()

	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	hourly := schedule.Every(time.Hour)
	if _, err := client.PublishRecurring(ctx, "reports", "hourly-report", hourly, "build the report"); err != nil {
		log.Fatal(err)
	}

	from := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	to := time.Date(2026, 3, 1, 15, 0, 0, 0, time.UTC) // (from, to]: 13:00, 14:00, 15:00
	res, err := client.Backfill(ctx, "reports", "hourly-report", from, to)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ticks", len(res.Ticks), "published", res.Published)
	// again while they are pending: none twice
	res, err = client.Backfill(ctx, "reports", "hourly-report", from, to)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("again: published", res.Published, "existing", res.Existing)

	ticks := make(chan string, 3)
	worker := ontime.NewWorker(client, nil)
	err = ontime.Handle(worker, "reports", func(ctx context.Context, m *ontime.Message[string]) error {
		ticks <- m.Headers[ontime.TickHeader] // a backfilled tick is a one-shot timer
		return nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	go worker.Run(ctx)
	got := []string{<-ticks, <-ticks, <-ticks}
	if err := worker.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	sort.Strings(got)
	for _, t := range got {
		fmt.Println("ran the tick of", t)
	}
	// Output:
	// ticks 3 published 3
	// again: published 0 existing 3
	// ran the tick of 2026-03-01T13:00:00Z
	// ran the tick of 2026-03-01T14:00:00Z
	// ran the tick of 2026-03-01T15:00:00Z
}
