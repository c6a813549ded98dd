package delivery

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/kafkadelay"
)

// Headers of a record produced by a kafka target, after the timer's own
// headers (sorted by name). The id and due headers are the ones the Kafka
// delay topics use, so consumers of both read the same names.
const (
	KafkaHeaderID            = kafkadelay.HeaderID  // the timer id
	KafkaHeaderDue           = kafkadelay.HeaderDue // due instant, ms since the epoch
	KafkaHeaderTopic         = "ontime-topic"
	KafkaHeaderAttempt       = "ontime-attempt"
	KafkaHeaderCorrelationID = "ontime-correlation-id"
	KafkaHeaderContentType   = "content-type"
)

// KafkaTarget produces each fired timer to a Kafka topic: the body as the
// value, a key chosen by the configuration, the timer's headers and
// ontime's. Deliver returns once the brokers acknowledged the record (acks
// from all in-sync replicas, idempotent producer): at least once, since a
// timer whose ack is lost after a successful produce is delivered again.
type KafkaTarget struct {
	cl    *kgo.Client
	topic string
	key   string // config.KafkaKey* or "header:NAME"
}

// Kind implements Target.
func (t *KafkaTarget) Kind() string { return config.TargetKafka }

// Deliver implements Target.
func (t *KafkaTarget) Deliver(ctx context.Context, m *Message) error {
	rec := &kgo.Record{Topic: t.topic, Value: m.Body}
	switch {
	case t.key == config.KafkaKeyID || t.key == "":
		rec.Key = []byte(m.ID)
	case t.key == config.KafkaKeyCorrelationID:
		rec.Key = []byte(m.CorrelationID)
	case strings.HasPrefix(t.key, config.KafkaKeyHeaderPrefix):
		if v, ok := m.Headers[strings.TrimPrefix(t.key, config.KafkaKeyHeaderPrefix)]; ok {
			rec.Key = []byte(v)
		}
	}
	names := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(m.Headers[k])})
	}
	rec.Headers = append(rec.Headers,
		kgo.RecordHeader{Key: KafkaHeaderID, Value: []byte(m.ID)},
		kgo.RecordHeader{Key: KafkaHeaderTopic, Value: []byte(m.Topic)},
		kgo.RecordHeader{Key: KafkaHeaderDue, Value: []byte(strconv.FormatInt(m.Due.UnixMilli(), 10))},
		kgo.RecordHeader{Key: KafkaHeaderAttempt, Value: []byte(strconv.Itoa(m.Attempt))},
	)
	if m.CorrelationID != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: KafkaHeaderCorrelationID, Value: []byte(m.CorrelationID)})
	}
	if m.ContentType != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: KafkaHeaderContentType, Value: []byte(m.ContentType)})
	}
	if err := t.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("produce to kafka topic %s: %w", t.topic, err)
	}
	return nil
}

// KafkaClients shares one franz-go client per set of brokers among the
// kafka targets; Close closes them.
type KafkaClients struct {
	mu      sync.Mutex
	clients map[string]*kgo.Client
}

// For returns the client of brokers, creating it (it connects on first
// use).
func (k *KafkaClients) For(brokers []string) (*kgo.Client, error) {
	key := strings.Join(slices.Sorted(slices.Values(brokers)), ",")
	k.mu.Lock()
	defer k.mu.Unlock()
	if c, ok := k.clients[key]; ok {
		return c, nil
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID("ontime-serve"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		return nil, err
	}
	if k.clients == nil {
		k.clients = map[string]*kgo.Client{}
	}
	k.clients[key] = c
	return c, nil
}

// Close closes every client.
func (k *KafkaClients) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.clients {
		c.Close()
	}
	k.clients = nil
}
