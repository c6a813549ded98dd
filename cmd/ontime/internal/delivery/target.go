// Package delivery runs the server's workers: one ontime.Worker per topic,
// discovered at runtime, that delivers each fired timer to the topic's
// target (a webhook, a Redis stream, the log) or, while someone watches the
// topic, to the watchers.
package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/kafkadelay"
)

// Message is a fired timer on its way to a target.
type Message struct {
	ID            string
	Topic         string
	Due           time.Time
	Attempt       int
	Headers       map[string]string
	CorrelationID string
	ContentType   string
	Body          []byte
}

// Target delivers fired timers. Deliver returns nil when the target has the
// message (the timer is then acked) and an error otherwise (the timer is
// retried by the topic's retry policy, then dead-lettered). A Target is used
// concurrently.
type Target interface {
	Deliver(ctx context.Context, m *Message) error
	// Kind is the target type: log, http, redis-stream or kafka.
	Kind() string
}

// RedisOpener returns a Redis client for a URL ("" means the store's
// Redis). Clients are shared and closed by the opener's owner.
type RedisOpener func(url string) (redis.UniversalClient, error)

// NewTarget builds the target of a topic from its configuration. kafka
// gives kafka targets their clients; nil means no kafka targets.
func NewTarget(topic string, tc *config.Target, log *slog.Logger, openRedis RedisOpener, kafka *KafkaClients) (Target, error) {
	switch tc.Type {
	case config.TargetLog, "":
		return &LogTarget{Log: log}, nil
	case config.TargetHTTP:
		keys, err := tc.WebhookKeys()
		if err != nil {
			return nil, fmt.Errorf("topic %q: %w", topic, err)
		}
		return NewHTTPTarget(HTTPOptions{
			URL: tc.URL, Keys: keys, Payload: tc.Payload, Forward: tc.ForwardHeaders,
			LegacySignature: tc.LegacySignature, Headers: tc.Headers, Timeout: tc.Timeout.D(), Log: log,
		}), nil
	case config.TargetRedisStream:
		if openRedis == nil {
			return nil, fmt.Errorf("topic %q: redis-stream target: no Redis available", topic)
		}
		rdb, err := openRedis(tc.Redis)
		if err != nil {
			return nil, fmt.Errorf("topic %q: redis-stream target: %w", topic, err)
		}
		stream := tc.Stream
		if stream == "" {
			stream = topic
		}
		return &StreamTarget{Redis: rdb, Stream: stream, MaxLen: tc.MaxLen}, nil
	case config.TargetKafka:
		if kafka == nil {
			return nil, fmt.Errorf("topic %q: kafka target: no Kafka clients available", topic)
		}
		cl, err := kafka.For(tc.Brokers)
		if err != nil {
			return nil, fmt.Errorf("topic %q: kafka target: %w", topic, err)
		}
		kt := tc.KafkaTopic
		if kt == "" {
			kt = topic
		}
		if err := kafkadelay.ValidTopic(kt); err != nil {
			return nil, fmt.Errorf("topic %q: kafka target: %w (set kafka_topic)", topic, err)
		}
		return &KafkaTarget{cl: cl, topic: kt, key: tc.Key}, nil
	}
	return nil, fmt.Errorf("topic %q: unknown target type %q", topic, tc.Type)
}
