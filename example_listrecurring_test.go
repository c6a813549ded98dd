package ontime_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/schedule"
)

// List a topic's recurring timers, page by page, without reading its
// plain timers: a topic with a million one-shot reminders and a few
// schedules lists the schedules in one store call.
func ExampleClient_ListRecurring() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()

	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	// plain timers, all due before any tick
	reminders := make([]ontime.Timer, 500)
	for i := range reminders {
		reminders[i] = ontime.Timer{Delay: time.Minute, Body: "remind"}
	}
	if _, err := client.PublishBatch(ctx, "billing", reminders); err != nil {
		log.Fatal(err)
	}
	daily, err := schedule.Cron("0 6 * * *", "Europe/Paris")
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"invoices", "dunning", "reports"} {
		if _, err := client.PublishRecurring(ctx, "billing", id, daily, "run "+id); err != nil {
			log.Fatal(err)
		}
	}
	if err := client.Pause(ctx, "billing", "dunning"); err != nil {
		log.Fatal(err)
	}

	opts := ontime.ListOptions{Limit: 2}
	for {
		page, err := client.ListRecurring(ctx, "billing", opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, t := range page.Timers {
			fmt.Printf("%s: %s, paused %v, body %q\n", t.ID, t.Recurring.Schedule, t.Recurring.Paused, t.Body)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	// Output:
	// dunning: cron 0 6 * * * Europe/Paris, paused true, body "run dunning"
	// invoices: cron 0 6 * * * Europe/Paris, paused false, body "run invoices"
	// reports: cron 0 6 * * * Europe/Paris, paused false, body "run reports"
}
