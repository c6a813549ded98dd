package ontime_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"sync"

	"github.com/ontime-go/ontime"
)

// One worker serves a topic per tenant, however many tenants there are:
// HandleTopics finds the due topics in the store's topic index, so idle
// tenants cost nothing.
func ExampleHandleTopics() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	for _, tenant := range []string{"acme", "globex", "initech"} {
		client.Publish(ctx, "reminders:"+tenant, "renew the plan of "+tenant)
	}
	client.Publish(ctx, "audit", "not a tenant: another worker's topic")

	var (
		mu   sync.Mutex
		seen []string
		all  sync.WaitGroup
	)
	all.Add(3)
	worker := ontime.NewWorker(client, nil)
	err = ontime.HandleTopics(worker, "reminders:*", func(ctx context.Context, m *ontime.Message[string]) error {
		mu.Lock()
		seen = append(seen, m.Topic+": "+m.Body)
		mu.Unlock()
		all.Done()
		return nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	go worker.Run(ctx)
	all.Wait()
	worker.Stop(ctx)

	slices.Sort(seen)
	for _, s := range seen {
		fmt.Println(s)
	}
	n, _ := client.Count(ctx, "audit")
	fmt.Println("audit scheduled:", n.Scheduled)
	// Output:
	// reminders:acme: renew the plan of acme
	// reminders:globex: renew the plan of globex
	// reminders:initech: renew the plan of initech
	// audit scheduled: 1
}
