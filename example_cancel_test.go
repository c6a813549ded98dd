package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ontime-go/ontime"
)

// CancelBatch deletes many timers of one topic in one store round trip
// per ontime.CancelChunkSize ids, each chunk atomic, and answers for each id:
// nil when its timer was deleted, ErrNotFound when there was none.
// Concurrent Cancel calls to one topic are merged into such calls on
// their own.
func ExampleClient_CancelBatch() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})

	var timers []ontime.Timer
	for i := range 3 {
		timers = append(timers, ontime.Timer{ID: fmt.Sprintf("trial-%d", i), Body: "trial ends", Delay: 30 * 24 * time.Hour})
	}
	if _, err := client.PublishBatch(ctx, "trials", timers); err != nil {
		log.Fatal(err)
	}

	// The customers converted: their trial-end timers go, in one call.
	res, err := client.CancelBatch(ctx, "trials", []string{"trial-0", "trial-2", "trial-9"})
	if err != nil {
		log.Fatal(err) // an invalid id (nothing cancelled) or the store failed
	}
	for i, id := range []string{"trial-0", "trial-2", "trial-9"} {
		switch {
		case res[i] == nil:
			fmt.Println(id, "cancelled")
		case errors.Is(res[i], ontime.ErrNotFound):
			fmt.Println(id, "not found")
		}
	}
	n, _ := client.Count(ctx, "trials")
	fmt.Println("scheduled:", n.Scheduled)
	// Output:
	// trial-0 cancelled
	// trial-2 cancelled
	// trial-9 not found
	// scheduled: 1
}
