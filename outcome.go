package ontime

import (
	"errors"
	"fmt"
	"time"
)

// Outcome is what became of a delivery: what the worker asked the store to
// do with the timer once the handler (and its middleware) returned.
type Outcome int

// Outcomes of a delivery.
const (
	// OutcomeAcked: the handler succeeded (or called Message.Ack); the
	// timer is deleted.
	OutcomeAcked Outcome = iota + 1
	// OutcomeRetried: the attempt failed (an error, a panic, RetryAfter, or
	// TopicOptions.Timeout ran out); the timer is due again after
	// DeliveryResult.Delay.
	OutcomeRetried
	// OutcomeSnoozed: the handler returned Snooze (or called
	// Message.Snooze); the timer is due again after DeliveryResult.Delay,
	// and the attempt does not count.
	OutcomeSnoozed
	// OutcomeDropped: the handler returned Drop (or called Message.Drop);
	// the timer is deleted, never retried, and kept nowhere.
	OutcomeDropped
	// OutcomeDeadLettered: the timer moved to the topic's dead letters
	// (DeliveryResult.Reason says why: "rejected" when the handler
	// returned DeadLetter or called Message.DeadLetter, "max_attempts" or
	// "undecodable").
	OutcomeDeadLettered
	// OutcomeLeaseLost: the worker lost the lease while the handler ran (the
	// store refused an extension, or the lease ran out unextended), so the
	// result was not acked; the timer is delivered again.
	OutcomeLeaseLost
	// OutcomeReleased: a shutdown ran out of time and cancelled the
	// handler; the timer is due again at once, and the attempt does not
	// count.
	OutcomeReleased
)

// OutcomeRejected is OutcomeDropped's former name.
//
// Deprecated: use OutcomeDropped. "Rejected" also named the dead-letter
// reason of DeadLetter, which keeps the timer; Drop does not.
const OutcomeRejected = OutcomeDropped

// String returns the outcome's name: "acked", "retried", "snoozed",
// "dropped", "dead_lettered", "lease_lost" or "released".
func (o Outcome) String() string {
	switch o {
	case OutcomeAcked:
		return "acked"
	case OutcomeRetried:
		return "retried"
	case OutcomeSnoozed:
		return "snoozed"
	case OutcomeDropped:
		return "dropped"
	case OutcomeDeadLettered:
		return "dead_lettered"
	case OutcomeLeaseLost:
		return "lease_lost"
	case OutcomeReleased:
		return "released"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// A handler says what becomes of its timer with the error it returns: nil
// acks it, an outcome error below asks for something else, and any other
// error is a failed attempt (retried by the topic's RetryPolicy). The
// outcome errors are exported so that middleware can tell them apart
// (errors.As, or OutcomeOf) and pass them on, wrap them or replace them.
// The worker acts on the first outcome error in an error's chain
// (errors.As), so fmt.Errorf("...: %w", Snooze(d)) snoozes.

// SnoozeError asks for the timer to be due again after Delay without
// counting a failed attempt. Snooze returns one.
type SnoozeError struct {
	// Delay is how long until the timer is due again; a negative one
	// counts as zero.
	Delay time.Duration
}

// Error returns "ontime: snooze " and the delay.
func (e *SnoozeError) Error() string { return fmt.Sprintf("ontime: snooze %s", e.Delay) }

// DropError asks for the timer to be deleted and never retried: the
// message is dropped, kept nowhere (DeadLetter keeps it aside instead).
// Drop returns one.
type DropError struct {
	// Err is why (may be nil); it is logged.
	Err error
}

// Error returns "ontime: dropped: " and the reason.
func (e *DropError) Error() string { return fmt.Sprintf("ontime: dropped: %v", e.Err) }

// Unwrap returns the reason.
func (e *DropError) Unwrap() error { return e.Err }

// DeadLetterError asks for the timer to be moved to the topic's dead
// letters at once, with the reason "rejected" (the handler rejected it),
// where it can be listed, replayed or purged. DeadLetter returns one.
type DeadLetterError struct {
	// Err is why (may be nil); it is kept as the dead letter's last
	// error.
	Err error
}

// Error returns "ontime: dead-lettered: " and the reason.
func (e *DeadLetterError) Error() string { return fmt.Sprintf("ontime: dead-lettered: %v", e.Err) }

// Unwrap returns the reason.
func (e *DeadLetterError) Unwrap() error { return e.Err }

// RetryAfterError is a failed attempt, counted like any error, whose retry
// comes after Delay instead of the retry policy's backoff (past the
// policy's MaxAttempts the timer is dead-lettered as usual). RetryAfter
// returns one.
type RetryAfterError struct {
	// Delay is how long until the retry; a negative one counts as zero.
	Delay time.Duration
	// Err is the attempt's error (may be nil).
	Err error
}

// Error returns "ontime: retry after ", the delay and the error.
func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("ontime: retry after %s: %v", e.Delay, e.Err)
}

// Unwrap returns the attempt's error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// outcomeError is implemented by the outcome errors.
type outcomeError interface {
	error
	asks() Outcome
}

func (*SnoozeError) asks() Outcome     { return OutcomeSnoozed }
func (*DropError) asks() Outcome       { return OutcomeDropped }
func (*DeadLetterError) asks() Outcome { return OutcomeDeadLettered }
func (*RetryAfterError) asks() Outcome { return OutcomeRetried }

// outcomeIn returns the first outcome error in err's chain, or nil.
func outcomeIn(err error) outcomeError {
	var oe outcomeError
	if errors.As(err, &oe) {
		return oe
	}
	return nil
}

// OutcomeOf returns the outcome a handler's (or middleware's) returned
// error asks for: OutcomeAcked for nil, OutcomeSnoozed, OutcomeDropped,
// OutcomeDeadLettered or OutcomeRetried for the first outcome error in
// its chain, OutcomeDeadLettered for a body that does not decode into the
// handler's type, and OutcomeRetried for any other error (a failed
// attempt, a panic). It is what the error asks for: the worker may still
// decide otherwise (a failed last attempt is dead-lettered, with reason
// "max_attempts"; an attempt that ran past TopicOptions.Timeout is
// retried; a handler cancelled by a stop that ran out of time is
// released; a lease lost while it ran is not settled at all), as
// DeliveryResult.Outcome then reports.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return OutcomeAcked
	}
	if oe := outcomeIn(err); oe != nil {
		return oe.asks()
	}
	var ue *undecodableError
	if errors.As(err, &ue) {
		return OutcomeDeadLettered
	}
	return OutcomeRetried
}

// Snooze makes the handler that returns it reschedule its timer to now + d
// without counting a failed attempt. The body and id are kept. It returns
// a *SnoozeError.
func Snooze(d time.Duration) error { return &SnoozeError{Delay: max(d, 0)} }

// Drop makes the handler that returns it drop its timer: it is deleted,
// never retried, and kept nowhere (DeadLetter keeps it). err (may be nil)
// is logged. It returns a *DropError.
func Drop(err error) error { return &DropError{Err: err} }

// Reject is Drop's former name: it drops the timer (it does not
// dead-letter it).
//
// Deprecated: use Drop, whose name says what it does; the dead-letter
// reason "rejected" belongs to DeadLetter.
func Reject(err error) error { return Drop(err) }

// DeadLetter makes the handler that returns it move its timer to the
// topic's dead-letter set at once (reason "rejected"), where it can be
// listed, replayed or purged. err (may be nil) is kept as the last error.
// It returns a *DeadLetterError.
func DeadLetter(err error) error { return &DeadLetterError{Err: err} }

// RetryAfter makes the handler that returns it count a failed attempt like
// any error, but retry after d instead of the retry policy's backoff. Past
// the policy's MaxAttempts the timer is dead-lettered as usual. It returns
// a *RetryAfterError.
func RetryAfter(d time.Duration, err error) error {
	return &RetryAfterError{Delay: max(d, 0), Err: err}
}
