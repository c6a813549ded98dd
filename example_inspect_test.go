package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ontime-go/ontime"
)

// Get shows one timer: where it is, when it is due, its envelope.
func ExampleClient_Get() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})

	due := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	client.Publish(ctx, "reminders", "renew the certificate",
		ontime.WithID("cert-renewal"), ontime.At(due), ontime.WithHeader("owner", "ops"))

	t, err := client.Get(ctx, "reminders", "cert-renewal")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.ID, t.State, t.Due.Equal(due), t.Attempt)
	fmt.Printf("%s %q owner=%s\n", t.ContentType, t.Body, t.Headers["owner"])

	_, err = client.Get(ctx, "reminders", "no-such-timer")
	fmt.Println(errors.Is(err, ontime.ErrNotFound))
	// Output:
	// cert-renewal scheduled true 0
	// text/plain "renew the certificate" owner=ops
	// true
}

// List pages through a topic's timers in due order; Count counts them.
func ExampleClient_List() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})

	for i, d := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
		client.Publish(ctx, "jobs", fmt.Sprintf("job %d", i), ontime.WithID(fmt.Sprintf("job-%d", i)), ontime.In(d))
	}

	opts := ontime.ListOptions{Limit: 2}
	for page := 1; ; page++ {
		p, err := client.List(ctx, "jobs", opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, t := range p.Timers {
			fmt.Printf("page %d: %s %s\n", page, t.ID, t.Body)
		}
		if p.NextCursor == "" {
			break
		}
		opts.Cursor = p.NextCursor
	}
	n, _ := client.Count(ctx, "jobs")
	fmt.Println("scheduled:", n.Scheduled)
	// Output:
	// page 1: job-1 job 1
	// page 1: job-2 job 2
	// page 2: job-0 job 0
	// scheduled: 3
}

// Cancel deletes a timer before it fires; publishing the same id again
// reschedules it instead.
func ExampleClient_Cancel() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})

	client.Publish(ctx, "trials", "trial ends", ontime.WithID("user-7"), ontime.In(14*24*time.Hour))
	client.Publish(ctx, "trials", "trial ends", ontime.WithID("user-8"), ontime.In(14*24*time.Hour))

	// User 7 subscribed: the trial-end message must not go out.
	fmt.Println(client.Cancel(ctx, "trials", "user-7"))
	fmt.Println(errors.Is(client.Cancel(ctx, "trials", "user-7"), ontime.ErrNotFound))

	// User 8 got a week more: same id, new due time.
	client.Publish(ctx, "trials", "trial ends", ontime.WithID("user-8"), ontime.In(21*24*time.Hour))
	// IfAbsent never overwrites.
	_, err := client.Publish(ctx, "trials", "trial ends", ontime.WithID("user-8"), ontime.IfAbsent())
	fmt.Println(errors.Is(err, ontime.ErrExists))

	n, _ := client.Count(ctx, "trials")
	fmt.Println("scheduled:", n.Scheduled)
	// Output:
	// <nil>
	// true
	// true
	// scheduled: 1
}

// CountDue counts timers per due-time bucket from the store's index (a
// dashboard's timeline); FireNow makes one timer due at once.
func ExampleClient_CountDue() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})

	start := time.Now().Truncate(time.Hour).Add(time.Hour)
	for i, d := range []time.Duration{0, 10 * time.Minute, 70 * time.Minute, 200 * time.Minute} {
		client.Publish(ctx, "jobs", "work", ontime.WithID(fmt.Sprintf("job-%d", i)), ontime.At(start.Add(d)))
	}
	// before the first hour, then one count per hour, then after the third
	bounds := []time.Time{start, start.Add(time.Hour), start.Add(2 * time.Hour), start.Add(3 * time.Hour)}
	counts, err := client.CountDue(ctx, "jobs", bounds)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(counts)

	due, _ := client.FireNow(ctx, "jobs", "job-3")
	fmt.Println(due.Before(start))
	counts, _ = client.CountDue(ctx, "jobs", bounds)
	fmt.Println(counts)
	// Output:
	// [0 2 1 0 1]
	// true
	// [1 2 1 0 0]
}
