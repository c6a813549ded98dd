package ontime

import (
	"context"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Message is what a handler receives: one due timer, its body decoded into
// T.
type Message[T any] struct {
	// ID is the timer id.
	ID string
	// Topic is the full topic (Client prefix and Router prefixes applied).
	Topic string
	// Body is the decoded body: for T = []byte the raw bytes, for T =
	// string the text, otherwise the body unmarshalled from JSON.
	Body T
	// Raw is the body as stored.
	Raw []byte
	// Headers are the user headers (not correlation_id or content-type).
	Headers map[string]string
	// CorrelationID is the envelope's correlation id: the publisher's
	// WithCorrelationID, else the timer id.
	CorrelationID string
	// ContentType is the envelope's content type (ontime writes
	// "text/plain" for text, "application/json" for JSON, none for bytes).
	ContentType string
	// Due is the time the timer was scheduled for.
	Due time.Time
	// Attempt is 1 on the first delivery and grows with each retry.
	Attempt int
	// LeaseUntil is the lease deadline at claim time (the heartbeat extends
	// it while the handler runs).
	LeaseUntil time.Time
	// Tick is a recurring timer's tick: its number and scheduled instant
	// (see PublishRecurring). The zero Tick for a plain timer.
	Tick Tick

	d *delivery
}

// The manual settles below decide the timer's outcome while the handler
// runs (the handler's return value is then ignored) and wait for the
// store's answer. On a Message the worker did not deliver (a literal built
// in a test) they return ErrNotDelivered: there is no timer to settle.
// ontimetest.NewMessage builds one that records them.

// Ack deletes the timer now. It returns ErrLeaseLost if another worker
// holds the timer or it was re-published meanwhile (the new timer is
// kept), and ErrAlreadySettled on a second call.
func (m *Message[T]) Ack(ctx context.Context) error {
	if m.d == nil {
		return ErrNotDelivered
	}
	return m.d.settleNow(ctx, ontimedriver.Settlement{Kind: ontimedriver.Ack}, false, nil)
}

// Nack counts a failed attempt now: the timer is retried after the retry
// policy's backoff, or dead-lettered past MaxAttempts.
func (m *Message[T]) Nack(ctx context.Context, err error) error {
	if m.d == nil {
		return ErrNotDelivered
	}
	return m.d.nack(ctx, err)
}

// Drop drops the timer now: it is deleted, never retried, and kept
// nowhere (DeadLetter keeps it).
func (m *Message[T]) Drop(ctx context.Context, err error) error {
	if m.d == nil {
		return ErrNotDelivered
	}
	return m.d.drop(ctx, err)
}

// Reject is Drop's former name: it drops the timer.
//
// Deprecated: use Drop; the dead-letter reason "rejected" belongs to
// DeadLetter.
func (m *Message[T]) Reject(ctx context.Context, err error) error { return m.Drop(ctx, err) }

// DeadLetter moves the timer to the topic's dead letters now (reason
// "rejected").
func (m *Message[T]) DeadLetter(ctx context.Context, err error) error {
	if m.d == nil {
		return ErrNotDelivered
	}
	return m.d.settleNow(ctx, deadSettlement(ontimedriver.ReasonRejected, err), false, err)
}

// Snooze reschedules the timer to now + d without counting a failure.
func (m *Message[T]) Snooze(ctx context.Context, d time.Duration) error {
	if m.d == nil {
		return ErrNotDelivered
	}
	return m.d.settleNow(ctx, ontimedriver.Settlement{Kind: ontimedriver.Snooze, Delay: max(d, 0)}, false, nil)
}
