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

// A producer that rounds up, as the reference design does, picks the
// smallest bucket at least the delay; the ladder's own rule picks the
// largest bucket at most the delay. The republisher delivers both at the
// due instant.
func ExampleLadder_RouteUp() {
	ladder := kafkadelay.RecommendedLadder("ontime.delay.")
	for _, d := range []time.Duration{500 * time.Millisecond, 61 * time.Second, 299 * time.Second} {
		down, _ := ladder.Route(d)
		fmt.Printf("%v: round down %s, round up %s\n", d, down.Topic, ladder.RouteUp(d).Topic)
	}
	// Output:
	// 500ms: round down ontime.delay.1s, round up ontime.delay.1s
	// 1m1s: round down ontime.delay.1m, round up ontime.delay.5m
	// 4m59s: round down ontime.delay.1m, round up ontime.delay.5m
}

// RoundUp makes a Producer write records the way producers that follow
// the reference design do. Route builds the record without producing it
// (the client connects only when it produces).
func ExampleRoundUp() {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	ladder := kafkadelay.RecommendedLadder("ontime.delay.")
	p, err := kafkadelay.NewProducer(cl, ladder, kafkadelay.RoundUp())
	if err != nil {
		panic(err)
	}
	rec, err := p.Route(&kgo.Record{Topic: "invoices", Value: []byte("hi")}, time.Now().Add(90*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Topic)
	// Output: ontime.delay.5m
}
