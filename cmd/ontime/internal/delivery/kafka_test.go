package delivery_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/delivery"
	"github.com/ontime-go/ontime/internal/wait"
)

// kafkaCluster is a kfake cluster on loopback with topics.
func kafkaCluster(t *testing.T, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// received is a record read from Kafka with the instant it arrived.
type received struct {
	rec *kgo.Record
	at  time.Time
}

// consume reads topics from the start until cleanup.
func consume(t *testing.T, c *kfake.Cluster, topics ...string) func() []received {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []received
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { got = append(got, received{r, now}) })
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

func kafkaTopic(brokers []string, kafkaTopic, key string) config.Topic {
	return config.Topic{
		Retry: config.Retry{
			MinDelay: config.Duration(50 * time.Millisecond), MaxDelay: config.Duration(50 * time.Millisecond), MaxAttempts: -1,
		},
		Target: &config.Target{Type: config.TargetKafka, Brokers: brokers, KafkaTopic: kafkaTopic, Key: key},
	}
}

func header(r *kgo.Record, k string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value), true
		}
	}
	return "", false
}

// A timer fired from the embedded store is produced to its Kafka topic at
// its due instant, body as the value, the key as configured, the timer's
// headers and ontime's.
func TestKafkaTargetDelivers(t *testing.T) {
	t.Parallel()
	c := kafkaCluster(t, "k-id", "k-corr", "k-header", "k-none")
	got := consume(t, c, "k-id", "k-corr", "k-header", "k-none")
	b := c.ListenAddrs()
	cfg := &config.Config{Topics: map[string]config.Topic{
		"invoices": kafkaTopic(b, "k-id", ""),
		"corr":     kafkaTopic(b, "k-corr", config.KafkaKeyCorrelationID),
		"hdr":      kafkaTopic(b, "k-header", "header:tenant"),
		"none":     kafkaTopic(b, "k-none", config.KafkaKeyNone),
	}}
	_, client, _ := newDispatcherWith(t, cfg, nil)
	ctx := t.Context()
	opts := func(id string) []ontime.PublishOption {
		return []ontime.PublishOption{ontime.WithID(id), ontime.In(300 * time.Millisecond), ontime.WithCorrelationID("c-" + id),
			ontime.WithHeaders(map[string]string{"tenant": "acme", "b": "2"})}
	}
	due := map[string]time.Time{}
	for topic, id := range map[string]string{"invoices": "i1", "corr": "c1", "hdr": "h1", "none": "n1"} {
		if _, err := client.Publish(ctx, topic, "body of "+id, opts(id)...); err != nil {
			t.Fatal(err)
		}
		ti, err := client.Get(ctx, topic, id)
		if err != nil {
			t.Fatal(err)
		}
		due[id] = ti.Due
	}
	_ = wait.Until(15*time.Second, func() bool { return len(got()) >= 4 }) // the count is checked below
	recs := got()
	if len(recs) != 4 {
		t.Fatalf("%d records in Kafka, want 4", len(recs))
	}
	wantKey := map[string]string{"k-id": "i1", "k-corr": "c-c1", "k-header": "acme", "k-none": ""}
	for _, r := range recs {
		id, _ := header(r.rec, delivery.KafkaHeaderID)
		if string(r.rec.Value) != "body of "+id {
			t.Errorf("%s: value %q", r.rec.Topic, r.rec.Value)
		}
		if string(r.rec.Key) != wantKey[r.rec.Topic] {
			t.Errorf("%s: key %q, want %q", r.rec.Topic, r.rec.Key, wantKey[r.rec.Topic])
		}
		if r.rec.Headers[0].Key != "b" || r.rec.Headers[1].Key != "tenant" {
			t.Errorf("%s: headers %v: the timer's, sorted, come first", r.rec.Topic, r.rec.Headers)
		}
		ms, _ := header(r.rec, delivery.KafkaHeaderDue)
		if ms != strconv.FormatInt(due[id].UnixMilli(), 10) {
			t.Errorf("%s: due header %s, timer due %v", r.rec.Topic, ms, due[id])
		}
		if r.at.Before(due[id]) {
			t.Errorf("%s: in Kafka %v before the timer was due", r.rec.Topic, due[id].Sub(r.at))
		}
		if a, _ := header(r.rec, delivery.KafkaHeaderAttempt); a != "1" {
			t.Errorf("%s: attempt %q", r.rec.Topic, a)
		}
		if ct, _ := header(r.rec, delivery.KafkaHeaderContentType); ct != "text/plain" {
			t.Errorf("%s: content type %q", r.rec.Topic, ct)
		}
	}
	for _, topic := range []string{"invoices", "corr", "hdr", "none"} {
		waitCount(t, client, topic, 0)
	}
}

// Produces that fail (kfake answers them with an error) are failed
// attempts: the timer is retried, never dropped, and delivered once the
// brokers take it again; an ack only follows a produce the brokers
// acknowledged.
func TestKafkaTargetProduceFails(t *testing.T) {
	t.Parallel()
	c := kafkaCluster(t, "events")
	got := consume(t, c, "events")
	fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "events", Err: kerr.UnknownServerError, Count: -1})
	cfg := &config.Config{Topics: map[string]config.Topic{"events": kafkaTopic(c.ListenAddrs(), "", "")}}
	_, client, logs := newDispatcherWith(t, cfg, nil)
	if _, err := client.Publish(t.Context(), "events", "payload", ontime.WithID("e1")); err != nil {
		t.Fatal(err)
	}
	waitAttempts(t, client, "events", "e1", 3, "UNKNOWN_SERVER_ERROR")
	if n := len(got()); n != 0 {
		t.Fatalf("%d records in Kafka while every produce failed", n)
	}
	fault.Remove()
	waitCount(t, client, "events", 0)
	recs := got()
	if len(recs) != 1 || string(recs[0].rec.Value) != "payload" {
		t.Fatalf("records %v, want the one payload", recs)
	}
	if a, _ := header(recs[0].rec, delivery.KafkaHeaderAttempt); atoi(a) < 4 {
		t.Errorf("delivered at attempt %s; want 4 or more, after at least 3 failures", a)
	}
	if !strings.Contains(logs.String(), `target=kafka`) {
		t.Errorf("the failures were not logged:\n%s", logs.String())
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
