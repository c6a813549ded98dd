package ontime_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ontime-go/ontime"
)

// A Client with a prefix names topics without it; the store (its Driver)
// sees the full topic, Prefix() + topic: what a caller needs to use an
// optional capability of the Driver, such as
// ontimedriver.TopicCounter, for the Client's topics.
func ExampleClient_Prefix() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, err := ontime.NewClient(drv, &ontime.Config{Prefix: "billing:", Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Publish(ctx, "invoices", "invoice 42"); err != nil {
		log.Fatal(err)
	}
	topics, _ := client.Topics(ctx)
	full, _ := client.Driver().Topics(ctx)
	fmt.Println(topics, full, client.Prefix()+topics[0] == full[0])
	// Output: [invoices] [billing:invoices] true
}
