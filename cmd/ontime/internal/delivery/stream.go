package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
)

// StreamTarget appends each message to a Redis stream with XADD. Entry
// fields: id, topic, due_at (RFC 3339, UTC), attempt, correlation_id,
// content_type, headers (a JSON object; omitted when empty) and body (the
// raw bytes).
type StreamTarget struct {
	Redis  redis.UniversalClient
	Stream string
	// MaxLen > 0 trims the stream to about that many entries (MAXLEN ~).
	MaxLen int64
}

// Kind implements Target.
func (t *StreamTarget) Kind() string { return config.TargetRedisStream }

// Deliver implements Target.
func (t *StreamTarget) Deliver(ctx context.Context, m *Message) error {
	vals := []any{
		"id", m.ID,
		"topic", m.Topic,
		"due_at", m.Due.UTC().Format(time.RFC3339Nano),
		"attempt", strconv.Itoa(m.Attempt),
		"correlation_id", m.CorrelationID,
		"content_type", m.ContentType,
	}
	if len(m.Headers) > 0 {
		hs, err := json.Marshal(m.Headers)
		if err != nil {
			return err
		}
		vals = append(vals, "headers", string(hs))
	}
	vals = append(vals, "body", m.Body)
	args := &redis.XAddArgs{Stream: t.Stream, Values: vals}
	if t.MaxLen > 0 {
		args.MaxLen = t.MaxLen
		args.Approx = true
	}
	if err := t.Redis.XAdd(ctx, args).Err(); err != nil {
		return fmt.Errorf("XADD %s: %w", t.Stream, err)
	}
	return nil
}
