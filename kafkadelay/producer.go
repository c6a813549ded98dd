package kafkadelay

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer publishes records with a delay. It wraps a franz-go client the
// caller owns (and closes): the client must reach the cluster that holds
// the bucket topics. Producer is safe for concurrent use.
//
// A record's Topic is its destination; its key, value and headers are
// delivered as they are. A record already due goes straight to its
// destination; any other goes to a bucket topic of the ladder with
// ontime's headers added (see [HeaderDue]), and the [Republisher] moves
// it on.
type Producer struct {
	cl     *kgo.Client
	ladder *Ladder
	now    func() time.Time
	up     bool
}

// ProducerOption changes how a [Producer] routes records.
type ProducerOption func(*Producer)

// RoundUp makes the Producer choose buckets like the reference design:
// the smallest bucket whose delay is at least the remaining delay
// ([Ladder.RouteUp]) rather than the largest one at most the remaining
// delay. Records are delivered at the same instants (the republisher moves
// such a record on as soon as it reads it); each costs one more hop. Use it
// to test consumers of both conventions, or to share bucket topics with
// producers that round up.
func RoundUp() ProducerOption { return func(p *Producer) { p.up = true } }

// NewProducer returns a Producer that routes through ladder and produces
// with cl. The client should keep franz-go's defaults of an idempotent
// producer with acks from all in-sync replicas: a Publish that returned
// nil is then on every replica.
func NewProducer(cl *kgo.Client, ladder *Ladder, opts ...ProducerOption) (*Producer, error) {
	if cl == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalid)
	}
	if ladder == nil {
		return nil, fmt.Errorf("%w: nil ladder", ErrInvalid)
	}
	p := &Producer{cl: cl, ladder: ladder, now: time.Now}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

// PublishIn publishes rec to be delivered to rec.Topic after delay (a
// delay of zero or less delivers at once). It returns the delivery id.
func (p *Producer) PublishIn(ctx context.Context, rec *kgo.Record, delay time.Duration) (string, error) {
	now := p.now()
	return p.publish(ctx, rec, now.Add(delay), now)
}

// PublishAt publishes rec to be delivered to rec.Topic at due (rounded up
// to the millisecond); a due instant that has passed delivers at once. It
// returns the delivery id.
func (p *Producer) PublishAt(ctx context.Context, rec *kgo.Record, due time.Time) (string, error) {
	return p.publish(ctx, rec, due, p.now())
}

func (p *Producer) publish(ctx context.Context, rec *kgo.Record, due, now time.Time) (string, error) {
	out, meta, err := p.route(rec, due, now)
	if err != nil {
		return "", err
	}
	if err := p.cl.ProduceSync(ctx, out).FirstErr(); err != nil {
		return "", fmt.Errorf("kafkadelay: produce %s to %q: %w", meta.ID, out.Topic, err)
	}
	return meta.ID, nil
}

// Route returns the record to produce for rec to reach rec.Topic at due,
// without producing it, for callers that produce themselves (with
// Produce's callback, or in a transaction): a copy of rec addressed to a
// bucket topic with ontime's headers, or, for a due instant that has
// passed, a copy addressed to the destination. rec is not modified. The
// delivery id is in the copy's [HeaderID] header.
func (p *Producer) Route(rec *kgo.Record, due time.Time) (*kgo.Record, error) {
	out, _, err := p.route(rec, due, p.now())
	return out, err
}

func (p *Producer) route(rec *kgo.Record, due, now time.Time) (*kgo.Record, Meta, error) {
	var m Meta
	if rec == nil {
		return nil, m, fmt.Errorf("%w: nil record", ErrInvalid)
	}
	if err := ValidTopic(rec.Topic); err != nil {
		return nil, m, fmt.Errorf("destination: %w", err)
	}
	if _, isBucket := p.ladder.Bucket(rec.Topic); isBucket {
		return nil, m, fmt.Errorf("%w: destination %q is a bucket topic", ErrInvalid, rec.Topic)
	}
	if due.Before(time.UnixMilli(minMillis)) || due.After(MaxDue) {
		return nil, m, fmt.Errorf("%w: due instant %v is out of range (years 1970 to 9999)", ErrInvalid, due)
	}
	ts := rec.Timestamp
	if ts.IsZero() {
		ts = now
	}
	if ts.Before(time.UnixMilli(minMillis)) || ts.After(MaxDue) {
		return nil, m, fmt.Errorf("%w: record timestamp %v is out of range (years 1970 to 9999)", ErrInvalid, ts)
	}
	m = Meta{
		Due:         time.UnixMilli(ceilMillis(due)),
		Destination: rec.Topic,
		ID:          uuid.NewString(),
		Timestamp:   time.UnixMilli(ts.UnixMilli()),
	}
	out := &kgo.Record{
		Key:       rec.Key,
		Value:     rec.Value,
		Headers:   appendMeta(rec.Headers, &m),
		Timestamp: now,
		Topic:     rec.Topic,
	}
	if rem := m.Due.Sub(now); rem > 0 {
		b, _ := p.ladder.Route(rem)
		if p.up {
			b = p.ladder.RouteUp(rem)
		}
		out.Topic = b.Topic
	}
	return out, m, nil
}
