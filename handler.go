package ontime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ontime-go/ontime/envelope"
)

// HandlerFunc handles one due timer. It returns nil to ack (delete) the
// timer, an error to retry it later by the topic's RetryPolicy, or one of
// Snooze, Reject, DeadLetter and RetryAfter. A panic counts as an error. ctx
// is cancelled when the worker's lease on the timer is lost, when the lease
// is about to run out without an extension (at 90% of Lease since the claim
// or the last successful extension was sent: the store is unreachable, or
// the heartbeat is disabled), or when a shutdown runs out of time. After a
// lost or run-out lease the handler's result is not acked, and the timer is
// delivered again: a handler must return when ctx ends, or it may run
// alongside that next delivery.
type HandlerFunc[T any] func(ctx context.Context, m *Message[T]) error

// TopicOptions tunes the handling of one topic. Zero fields take the
// Worker's defaults (WorkerConfig.Defaults), whose zero fields take the
// values given here. Retry is merged field by field: a zero field of the
// topic's RetryPolicy takes the Worker's, so a topic can change MinDelay
// and keep the Worker's MaxAttempts. DisableHeartbeat is a bool, whose zero
// value (false) cannot be told from "not set": the heartbeat is off for a
// topic when its own options or the Worker's defaults set DisableHeartbeat,
// so a Worker that disables it for all topics cannot re-enable it for one.
type TopicOptions struct {
	// MaxConcurrency is the most handlers of this topic running at once in
	// this worker. Default 10.
	MaxConcurrency int
	// Lease is how long a claimed timer is held before another worker may
	// take it. The heartbeat extends it while the handler runs. Default 30s.
	Lease time.Duration
	// PollInterval is the longest a worker sleeps without asking the store,
	// as a fallback to wake-up notifications. Default 1s. Publishers that do
	// not notify (faststream-redis-timers) are seen within this interval.
	PollInterval time.Duration
	// Retry is the retry policy for failed handlers.
	Retry RetryPolicy
	// DisableHeartbeat turns off lease extension: a handler still running
	// at 90% of its lease has its context cancelled and its result is not
	// acked; the timer is delivered again when the lease expires.
	DisableHeartbeat bool
	// ClaimBatch caps how many timers one claim takes. Default 256 (never
	// more than the free handler slots, ClaimAhead included).
	ClaimBatch int
	// ClaimAhead is how many timers this worker may hold claimed beyond
	// MaxConcurrency, waiting for a handler to finish: the next claim then
	// runs while the current handlers do, and carries more timers. It
	// pays where a claim is slow next to a handler, as on a store that
	// waits for a disk sync before it answers. A timer claimed ahead is
	// leased (and its lease extended) while it waits; a stop hands it
	// back unstarted, without counting the attempt. Default: ClaimBatch on
	// a store that reports slow claims (ontimedriver.SlowClaims: the
	// embedded store), else none. Negative: none.
	ClaimAhead int
	// Timeout bounds each attempt: the handler's context (and its
	// middleware's) ends Timeout after the attempt starts, with
	// context.Cause ErrTimeout, and an attempt that has not returned by
	// then has failed, whatever the handler returns: it is retried per
	// Retry (dead-lettered past MaxAttempts), with an error wrapping
	// ErrTimeout. Default 0: no timeout (the lease and the heartbeat still
	// apply). Must not be negative.
	Timeout time.Duration
}

func (o TopicOptions) merge(def TopicOptions) TopicOptions {
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = def.MaxConcurrency
	}
	if o.Lease == 0 {
		o.Lease = def.Lease
	}
	if o.PollInterval == 0 {
		o.PollInterval = def.PollInterval
	}
	o.Retry = o.Retry.merge(def.Retry)
	if o.ClaimBatch == 0 {
		o.ClaimBatch = def.ClaimBatch
	}
	if o.Timeout == 0 {
		o.Timeout = def.Timeout
	}
	if o.ClaimAhead == 0 {
		o.ClaimAhead = def.ClaimAhead
	}
	// A false DisableHeartbeat is the zero value: it takes the default's.
	o.DisableHeartbeat = o.DisableHeartbeat || def.DisableHeartbeat
	return o
}

// resolveOptions merges a topic's opts with def (a worker's defaults,
// which have theirs) and checks them; name (a topic or a pattern) is for
// the error. The retry policy comes with its defaults filled in.
func resolveOptions(name string, opts *TopicOptions, def TopicOptions) (TopicOptions, error) {
	var o TopicOptions
	if opts != nil {
		o = *opts
	}
	o = o.merge(def)
	if err := o.validate(); err != nil {
		return o, fmt.Errorf("Handle %q: %w", name, err)
	}
	o.Retry = o.Retry.withDefaults()
	return o, nil
}

func (o TopicOptions) withDefaults() TopicOptions {
	return o.merge(TopicOptions{MaxConcurrency: 10, Lease: 30 * time.Second, PollInterval: time.Second, ClaimBatch: 256})
}

func (o TopicOptions) validate() error {
	switch {
	case o.MaxConcurrency < 0:
		return invalidf("TopicOptions.MaxConcurrency is %d; it must be > 0", o.MaxConcurrency)
	case o.Lease < 10*time.Millisecond:
		return invalidf("TopicOptions.Lease is %s; it must be >= 10ms", o.Lease)
	case o.PollInterval < time.Millisecond:
		return invalidf("TopicOptions.PollInterval is %s; it must be >= 1ms", o.PollInterval)
	case o.ClaimBatch < 0:
		return invalidf("TopicOptions.ClaimBatch is %d; it must be > 0", o.ClaimBatch)
	case o.Timeout < 0:
		return invalidf("TopicOptions.Timeout is %s; it must not be negative (0 means none)", o.Timeout)
	}
	o.Retry = o.Retry.withDefaults()
	return o.Retry.validate()
}

// Registrar is where handlers are registered: a *Worker or a *Router.
type Registrar interface {
	register(topic string, h rawHandler, opts *TopicOptions) error
	registerPattern(pattern string, h rawHandler, opts *TopicOptions) error
}

// rawHandler runs the user's handler for one delivery. It returns
// errUndecodable (wrapped) when the body does not decode into T.
type rawHandler func(ctx context.Context, d *delivery, env *envelope.Message) error

type undecodableError struct{ err error }

func (e *undecodableError) Error() string { return "body does not decode: " + e.err.Error() }
func (e *undecodableError) Unwrap() error { return e.err }

// Handle registers h for topic on r. Bodies are decoded into T: []byte
// gets the raw body, string the text, json.RawMessage the JSON as is; any
// (the empty interface) follows the content type as the Python library's
// reader does: a string for "text/plain", the JSON value (map[string]any,
// []any, float64, ...) for "application/json", the raw []byte for another
// content type, and for none the JSON value if the body is JSON, else the
// raw []byte (an empty body is nil). Any other type is unmarshalled from
// JSON (an empty body leaves T's zero value). A body that does not decode into T is dead-lettered with reason
// "undecodable" without calling h. opts may be nil.
//
// Handle must be called before the Worker runs. Registering a topic twice
// is an error.
func Handle[T any](r Registrar, topic string, h HandlerFunc[T], opts *TopicOptions) error {
	if h == nil {
		return invalidf("Handle %q: handler is nil", topic)
	}
	return r.register(topic, typedRaw(h), opts)
}

// typedRaw wraps a typed handler: it decodes the body into T and builds
// the Message.
func typedRaw[T any](h HandlerFunc[T]) rawHandler {
	decode := bodyDecoder[T]()
	return func(ctx context.Context, d *delivery, env *envelope.Message) error {
		m := &Message[T]{
			ID: d.t.ID, Topic: d.ex.topic, Raw: env.Body, Due: d.t.Due,
			Attempt: d.t.Attempt, LeaseUntil: d.t.LeaseUntil, Tick: d.info.Tick, d: d,
			CorrelationID: d.info.CorrelationID, ContentType: d.info.ContentType, Headers: d.info.Headers,
		}
		if err := decode(env.Body, d.info.ContentType, &m.Body); err != nil {
			return &undecodableError{err}
		}
		return h(ctx, m)
	}
}

// bodyDecoder returns the decoder of bodies into T. It gets the body and
// the envelope's content type.
func bodyDecoder[T any]() func(b []byte, contentType string, out *T) error {
	var zero T
	switch any(&zero).(type) {
	case *[]byte:
		return func(b []byte, _ string, out *T) error { *any(out).(*[]byte) = b; return nil }
	case *string:
		return func(b []byte, _ string, out *T) error { *any(out).(*string) = string(b); return nil }
	case *json.RawMessage:
		return func(b []byte, _ string, out *T) error { *any(out).(*json.RawMessage) = b; return nil }
	case *any:
		return func(b []byte, ct string, out *T) error { *any(out).(*any) = decodeAny(b, ct); return nil }
	}
	return func(b []byte, _ string, out *T) error {
		if len(b) == 0 {
			return nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("into %T: %w", *out, err)
		}
		return nil
	}
}

// decodeAny reads a body by its content type, as the faststream reader
// does: text/plain → string, application/json* → the JSON value, another
// content type → []byte, none → the JSON value if it parses, else []byte.
func decodeAny(b []byte, ct string) any {
	switch {
	case len(b) == 0:
		return nil
	case ct == envelope.ContentTypeText:
		return string(b)
	case strings.HasPrefix(ct, envelope.ContentTypeJSON):
		var v any
		if err := json.Unmarshal(b, &v); err == nil {
			return v
		}
		return b
	case ct != "":
		return b
	}
	var v any
	if err := json.Unmarshal(b, &v); err == nil {
		return v
	}
	return b
}
