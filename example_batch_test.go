package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/ontime-go/ontime"
)

// PublishBatch writes many timers in one store round trip per
// ontime.BatchChunkSize timers. A batch up to that size is atomic; a larger
// one that fails part-way returns the results of what was written and a
// *BatchError naming the rest.
func ExampleClient_PublishBatch() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})

	start := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	timers := []ontime.Timer{
		{ID: "remind-1", Body: "first reminder", At: start},
		{ID: "remind-2", Body: "second reminder", At: start.Add(24 * time.Hour)},
		{ID: "remind-3", Body: "last call", At: start.Add(48 * time.Hour), Headers: map[string]string{"tone": "firm"}},
	}
	res, err := client.PublishBatch(ctx, "reminders", timers)
	var be *ontime.BatchError
	if errors.As(err, &be) {
		// The store failed part-way: res holds the timers [0, be.Written)
		// that were written; publish be.IDs again to finish the batch.
		log.Fatalf("%d of %d written: %v", be.Written, be.Total, err)
	} else if err != nil {
		log.Fatal(err) // an invalid timer: nothing was written
	}
	for _, r := range res {
		fmt.Println(r.ID, r.Due.UTC().Format(time.DateTime), r.Err)
	}

	// A producer that restarts publishes its batch again; BatchIfAbsent
	// leaves the timers that exist untouched and reports them.
	timers = append(timers, ontime.Timer{ID: "remind-4", Body: "overdue", At: start.Add(72 * time.Hour)})
	res, err = client.PublishBatch(ctx, "reminders", timers, ontime.BatchIfAbsent())
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		fmt.Println(r.ID, "exists:", errors.Is(r.Err, ontime.ErrExists))
	}
	n, _ := client.Count(ctx, "reminders")
	fmt.Println("scheduled:", n.Scheduled)
	// Output:
	// remind-1 2030-01-01 09:00:00 <nil>
	// remind-2 2030-01-02 09:00:00 <nil>
	// remind-3 2030-01-03 09:00:00 <nil>
	// remind-1 exists: true
	// remind-2 exists: true
	// remind-3 exists: true
	// remind-4 exists: false
	// scheduled: 4
}

// Publish is safe for concurrent use, and concurrent calls to one topic
// share store calls: while one call is at the store, the calls that arrive
// queue, and then go together in one script or transaction, each with its
// own result (here IfAbsent refuses only the id that exists). A call that
// finds none under way goes at once.
func ExampleClient_Publish_concurrent() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if _, err := client.Publish(ctx, "orders", "first", ontime.WithID("order-7"), ontime.In(time.Hour)); err != nil {
		log.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = client.Publish(ctx, "orders", "order", ontime.WithID(fmt.Sprintf("order-%d", i)),
				ontime.In(time.Hour), ontime.IfAbsent())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			fmt.Printf("order-%d: %v\n", i, errors.Is(err, ontime.ErrExists))
		}
	}
	n, _ := client.Count(ctx, "orders")
	fmt.Println("scheduled:", n.Scheduled)
	// Output:
	// order-7: true
	// scheduled: 10
}
