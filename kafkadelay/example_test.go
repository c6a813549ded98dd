package kafkadelay_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

// A record published with a delay of 1.5 s reaches its destination topic
// when it is due, not before: it waits 1 s in the 1s bucket, and the
// republisher holds the remaining 500ms in memory.
func Example() {
	// A Kafka-protocol cluster on loopback, with the bucket topics, the
	// dead-letter topic and the destination. Use your brokers instead.
	ladder := kafkadelay.RecommendedLadder("ontime.delay.")
	topics := append(ladder.Topics(), kafkadelay.DefaultDeadLetterTopic, "invoices")
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := kgo.SeedBrokers(cluster.ListenAddrs()...)

	// The republisher: run as many as you like with the same group.
	rp, err := kafkadelay.NewRepublisher(kafkadelay.Config{
		Ladder:          ladder,
		Group:           "ontime-republisher",
		DeadLetterTopic: kafkadelay.DefaultDeadLetterTopic,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, brokers)
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- rp.Run(ctx) }()

	// The producer side: a franz-go client you own.
	cl, err := kgo.NewClient(brokers, kgo.ConsumeTopics("invoices"))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	producer, err := kafkadelay.NewProducer(cl, ladder)
	if err != nil {
		panic(err)
	}
	rec := &kgo.Record{Topic: "invoices", Key: []byte("inv-42"), Value: []byte("send the reminder")}
	if _, err := producer.PublishIn(ctx, rec, 1500*time.Millisecond); err != nil {
		panic(err)
	}

	// A consumer of the destination sees the record once it is due.
	fetches := cl.PollFetches(ctx)
	got := fetches.Records()[0]
	meta, _ := kafkadelay.ParseMeta(got.Headers)
	fmt.Printf("%s: %s\n", got.Key, got.Value)
	fmt.Println("early:", time.Now().Before(meta.Due))

	stop()
	fmt.Println("republisher stopped:", <-done)
	// Output:
	// inv-42: send the reminder
	// early: false
	// republisher stopped: <nil>
}
