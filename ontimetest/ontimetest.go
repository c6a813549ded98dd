// Package ontimetest helps test code that uses ontime, as
// riverqueue/river's rivertest helps test River workers: run a handler on
// a body and get its outcome, with no store and no worker running; build
// a Message to call a handler directly; and check what was published.
//
// # Running handlers
//
// A [Worker] is an [ontime.Registrar]: register handlers on it with
// ontime.Handle or ontime.HandleTopics, exactly as on an ontime.Worker
// (the same registration function serves both), then [Worker.Work]
// delivers a body to a topic's handler the way a worker would: the body is
// encoded as Publish encodes it and decoded into the handler's type, the
// delivery hooks and middleware run, and the handler's result becomes an
// outcome (acked, retried with its delay, snoozed, dropped,
// dead-lettered with its reason) by the topic's retry policy and timeout.
// Nothing is stored: the outcome is returned.
//
//	w, _ := ontimetest.NewWorker(nil)
//	ontime.Handle(w, "invoices", handleInvoice, nil)
//	res, err := w.Work(ctx, "invoices", Invoice{ID: 7}, &ontimetest.Delivery{Attempt: 3})
//	// res.Outcome == ontime.OutcomeRetried, res.Delay == ...
//
// [NewMessage] builds an [ontime.Message] for calling a handler function
// directly; its manual settles (Ack, Nack, Drop, DeadLetter, Snooze) are
// recorded rather than sent to a store. A Message built as a literal
// returns ontime.ErrNotDelivered from them instead.
//
// # Checking what was published
//
// [NewClient] returns a Client on a fresh embedded store in the test's
// temporary directory; [RequirePublished] and [RequireNotPublished] check
// what a topic holds, on that store or any other, and [Published] lists
// it.
package ontimetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/testkit"
)

// Config configures a Worker. The zero value (or nil) means the defaults.
type Config struct {
	// Middleware runs around every handler call, the first outermost, as
	// ontime.WorkerConfig.Middleware does.
	Middleware []ontime.Middleware
	// Hooks are delivery hooks (ontime.DeliveryStartHook,
	// ontime.DeliveryEndHook), as in ontime.Config.Hooks.
	Hooks []any
	// Defaults applies to every topic for the fields its TopicOptions
	// leave zero, as ontime.WorkerConfig.Defaults does: the retry policy
	// (which decides retry delays and when a failure is dead-lettered)
	// and the Timeout of each attempt.
	Defaults ontime.TopicOptions
	// Logger receives the library's logs. Default: none.
	Logger *slog.Logger
}

// Worker runs the handlers registered on it, one delivery at a time, with
// no store. Register handlers with ontime.Handle and ontime.HandleTopics
// (a Worker is an ontime.Registrar). A Worker is safe for concurrent use.
type Worker struct {
	ontime.Registrar // the test worker inside package ontime
	tk               testkit.Worker
}

// NewWorker returns a Worker. It fails only on a bad Config (a hook that
// is no hook).
func NewWorker(cfg *Config) (*Worker, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	tk, err := testkit.NewWorker(testkit.Config{Middleware: c.Middleware, Hooks: c.Hooks, Defaults: c.Defaults, Logger: c.Logger})
	if err != nil {
		return nil, err
	}
	return &Worker{Registrar: tk.(ontime.Registrar), tk: tk}, nil
}

// Delivery describes the delivery Work makes. The zero value (or nil)
// means a first delivery, due now, of a timer with id "ontimetest".
type Delivery struct {
	// Topic is the Message's topic, for NewMessage (Work is given its
	// topic). Default "ontimetest".
	Topic string
	// ID is the timer's id. Default "ontimetest".
	ID string
	// Attempt is the delivery's attempt number. Default 1. The retry
	// policy gives up on a failure at its MaxAttempts (the outcome is
	// then dead-lettered, reason "max_attempts").
	Attempt int
	// Due is the instant the timer was due. Default now.
	Due time.Time
	// Headers are the user headers the publisher set.
	Headers map[string]string
	// CorrelationID defaults to ID.
	CorrelationID string
	// Payload, if set, is the stored payload as is, instead of the body
	// encoded as Publish encodes it: to check what a handler does with
	// bad data (a payload that does not decode is dead-lettered,
	// reason "undecodable"). Lenient decodes it as a store with legacy
	// payloads would (the faststream-compatible Redis layout).
	Payload []byte
	Lenient bool
	// SettleErr is what the store answers a manual settle (Message.Ack,
	// ...): nil (applied), or ontime.ErrLeaseLost to check what a
	// handler does when its lease was lost.
	SettleErr error
}

func (d *Delivery) toKit(topic string, body any) testkit.Delivery {
	var o Delivery
	if d != nil {
		o = *d
	}
	if o.ID == "" {
		o.ID = "ontimetest"
	}
	return testkit.Delivery{
		Topic: topic, ID: o.ID, Attempt: o.Attempt, Due: o.Due, Headers: o.Headers,
		CorrelationID: o.CorrelationID, Body: body, Payload: o.Payload, Lenient: o.Lenient,
		SettleErr: o.SettleErr,
	}
}

// Result is how a delivery ended: what a worker would ask the store to do
// with the timer. Its fields are those of ontime.DeliveryResult.
type Result struct {
	// Outcome: acked, retried, snoozed, dropped or dead-lettered (or
	// lease lost, after a manual settle answered with ErrLeaseLost).
	Outcome ontime.Outcome
	// Err is the error that ended the attempt (the handler's, a panic as
	// a *ontime.PanicError, a timeout wrapping ontime.ErrTimeout, a
	// decoding error), or the error given to a manual Nack, Drop or
	// DeadLetter.
	Err error
	// Delay is how long until the timer is due again, for retried and
	// snoozed.
	Delay time.Duration
	// Reason is the dead-letter reason: "rejected" (DeadLetter),
	// "max_attempts" or "undecodable".
	Reason string
	// Duration is how long the middleware and the handler ran.
	Duration time.Duration
}

func resultOf(v any) Result {
	r, _ := v.(ontime.DeliveryResult)
	return Result{Outcome: r.Outcome, Err: r.Err, Delay: r.Delay, Reason: r.Reason, Duration: r.Duration}
}

// Work delivers body to topic's handler (its own, or that of the first
// pattern registered that matches it) as a worker would, and returns the
// outcome. ctx is the handler's context. The error is for a delivery that
// could not be made: no handler for topic, or a body Publish would refuse
// (an error wrapping ontime.ErrInvalid); what the handler returns is in
// the Result.
func (w *Worker) Work(ctx context.Context, topic string, body any, d *Delivery) (Result, error) {
	r, err := w.tk.Work(ctx, d.toKit(topic, body))
	if err != nil {
		return Result{}, err
	}
	return resultOf(r), nil
}

// Settled reports how a Message built by NewMessage was settled by hand.
type Settled struct {
	get func() (any, bool)
}

// Result returns the outcome of the message's last manual settle (Ack,
// Nack, Drop, DeadLetter, Snooze), and false if there was none.
func (s *Settled) Result() (Result, bool) {
	r, ok := s.get()
	return resultOf(r), ok
}

// NewMessage builds the Message a handler of T would get for body (encoded
// as Publish encodes it, then decoded into T as a worker decodes it), for
// a test that calls the handler function itself. The message's manual
// settles are recorded in the returned Settled (and answered with
// d.SettleErr). It returns an error if body does not decode into T.
func NewMessage[T any](ctx context.Context, body any, d *Delivery) (*ontime.Message[T], *Settled, error) {
	topic := "ontimetest"
	if d != nil && d.Topic != "" {
		topic = d.Topic
	}
	tk, err := testkit.NewWorker(testkit.Config{})
	if err != nil {
		return nil, nil, err
	}
	var m *ontime.Message[T]
	if err := ontime.Handle(tk.(ontime.Registrar), topic, func(_ context.Context, got *ontime.Message[T]) error {
		m = got
		return nil
	}, nil); err != nil {
		return nil, nil, err
	}
	get, err := tk.Build(ctx, d.toKit(topic, body))
	if err != nil {
		return nil, nil, err
	}
	if m == nil {
		return nil, nil, errors.New("ontimetest: the message was not built")
	}
	return m, &Settled{get: get}, nil
}

// encodeBody is ontime's body encoding (Publish's).
func encodeBody(body any) ([]byte, error) {
	b, _, err := testkit.EncodeBody(body)
	if err != nil {
		return nil, fmt.Errorf("ontimetest: %w", err)
	}
	return b, nil
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
