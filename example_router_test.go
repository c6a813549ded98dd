package ontime_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ontime-go/ontime"
)

// A service namespaces its topics: Config.Prefix for everything the Client
// touches, and a Router per part of the service for its handlers.
func ExampleWorker_Router() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, err := ontime.NewClient(drv, &ontime.Config{Prefix: "shop:", Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	client.Publish(ctx, "billing:invoices", "invoice 42")
	client.Publish(ctx, "shipping:invoices", "packing list 42")

	topics, _ := client.Topics(ctx) // without the Client's prefix
	fmt.Println("client topics:", topics)
	stored, _ := drv.Topics(ctx) // as the store names them
	fmt.Println("store topics:", stored)

	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	billing := worker.Router("billing:")
	err = ontime.Handle(billing, "invoices", func(ctx context.Context, m *ontime.Message[string]) error {
		fmt.Printf("handled %q from %s\n", m.Body, m.Topic)
		close(done)
		return nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)

	// Topics do not cross: this worker has no handler for shipping's.
	n, _ := client.Count(ctx, "shipping:invoices")
	fmt.Println("shipping:invoices scheduled:", n.Scheduled)
	// Output:
	// client topics: [billing:invoices shipping:invoices]
	// store topics: [shop:billing:invoices shop:shipping:invoices]
	// handled "invoice 42" from shop:billing:invoices
	// shipping:invoices scheduled: 1
}
