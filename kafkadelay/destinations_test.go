package kafkadelay_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

// With CreateDestinations, records to a topic that does not exist create
// it (with the configured partitions and replication factor) and are
// delivered, none early, none dead-lettered; a creation the cluster
// refuses (a replication factor above its brokers) dead-letters them with
// the reason, as without the setting.
func TestCreateDestinations(t *testing.T) {
	c := newCluster(t) // no auto-creation: kfake answers UNKNOWN_TOPIC_OR_PARTITION
	s := c.sink(t)
	r := c.republisher(t, func(cfg *kafkadelay.Config) {
		cfg.CreateDestinations = true
		cfg.DestinationPartitions = 2
		cfg.DestinationReplicationFactor = 3
	})
	const topic = "brand.new.topic"
	if _, ok := listTopic(t, c, topic); ok {
		t.Fatalf("%s exists before the test", topic)
	}

	// A reader of the new topic: franz-go waits for it to exist.
	rd := c.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	var mu sync.Mutex
	got := map[string]time.Time{} // id -> received
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := rd.PollFetches(ctx)
			now := time.Now()
			mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) { got[headerValue(rec, kafkadelay.HeaderID)] = now })
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	p, err := kafkadelay.NewProducer(c.client(t), c.ladder)
	if err != nil {
		t.Fatal(err)
	}
	due := map[string]time.Time{}
	for i := range 20 {
		// From now, not from the start of the loop: a record already due
		// would go straight to the (missing) destination.
		d := time.Now().Add(500*time.Millisecond + time.Duration(i)*100*time.Millisecond)
		id, err := p.PublishAt(context.Background(), &kgo.Record{Topic: topic, Value: []byte("v")}, d)
		if err != nil {
			t.Fatal(err)
		}
		due[id] = time.UnixMilli(d.UnixMilli() + 1) // at most 1ms of rounding up
	}
	reached := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	waitUntil(t, 60*time.Second, func() bool { return reached() >= len(due) }, func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Sprintf("%d of %d records reached %s; dead letters: %d", reached(), len(due), topic, len(s.dead))
	})
	mu.Lock()
	for id, at := range got {
		d, ok := due[id]
		if !ok {
			t.Errorf("unknown record %q", id)
			continue
		}
		if at.Before(d.Add(-time.Millisecond)) {
			t.Errorf("record %s received %v before its due instant", id, d.Sub(at))
		}
	}
	mu.Unlock()
	td, ok := listTopic(t, c, topic)
	if !ok || len(td.Partitions) != 2 || len(td.Partitions[0].Replicas) != 3 {
		t.Errorf("%s: exists %v, %d partitions, want 2 partitions of 3 replicas: %+v", topic, ok, len(td.Partitions), td.Partitions)
	}

	// Refused: a replication factor above the cluster's 3 brokers.
	r.stop(t)
	r2 := c.republisher(t, func(cfg *kafkadelay.Config) {
		cfg.CreateDestinations = true
		cfg.DestinationReplicationFactor = 5
	})
	if _, err := p.PublishIn(context.Background(), &kgo.Record{Topic: "refused.topic", Value: []byte("v")}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, 60*time.Second, "the refused record dead-lettered", func(s *sink) bool { return len(s.dead) == 1 })
	s.mu.Lock()
	reason := headerValue(s.dead[0], kafkadelay.HeaderDeadReason)
	s.mu.Unlock()
	if !strings.Contains(reason, "refused.topic") || !strings.Contains(reason, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("dead-letter reason %q", reason)
	}
	if _, ok := listTopic(t, c, "refused.topic"); ok {
		t.Error("refused.topic was created")
	}
	r2.stop(t)
}

// listTopic describes topic, reporting whether it exists.
func listTopic(t *testing.T, c *cluster, topic string) (kadm.TopicDetail, bool) {
	t.Helper()
	tds, err := kadm.NewClient(c.client(t)).ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	td, ok := tds[topic]
	return td, ok && td.Err == nil
}
