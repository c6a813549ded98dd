package ontimeredis_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// UnavailableTopics lists the topics whose calls fail because their Redis
// node cannot be reached (here a port nobody listens on; on a Cluster, a
// dead master until its replica is promoted). A readiness probe or a
// metric can show them.
func ExampleDriver_UnavailableTopics() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = d.Schedule(ctx, "orders", []ontimedriver.NewTimer{{ID: "a", Payload: []byte("x")}}, ontimedriver.Upsert)
	fmt.Println("schedule failed:", err != nil)
	for _, f := range d.UnavailableTopics() {
		fmt.Println("unavailable:", f.Topic)
	}
	// Output:
	// schedule failed: true
	// unavailable: orders
}
