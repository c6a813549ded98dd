package ontime

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Errors callers branch on with errors.Is.
var (
	// ErrNotFound means there is no timer (or dead letter) with that id in
	// that topic.
	ErrNotFound = ontimedriver.ErrNotFound
	// ErrExists means a publish with IfAbsent found the id already
	// scheduled or leased; nothing was written.
	ErrExists = ontimedriver.ErrExists
	// ErrLeaseLost means a manual Ack/Nack/Reject came too late: the lease
	// expired and another worker holds the timer, or the timer was
	// re-published or cancelled meanwhile. Nothing was changed.
	ErrLeaseLost = ontimedriver.ErrLeaseLost
	// ErrLeased means FireNow found the timer being delivered (a worker
	// holds it under a live lease); nothing was changed.
	ErrLeased = ontimedriver.ErrLeased
	// ErrInvalid is wrapped by every error about a bad argument (empty topic,
	// empty id, negative delay, both a delay and an instant, ...).
	ErrInvalid = ontimedriver.ErrInvalid
	// ErrStopped means the worker was stopped, or Run was called twice.
	ErrStopped = errors.New("ontime: worker stopped")
	// ErrAlreadySettled means a manual settle on a message that was settled
	// already.
	ErrAlreadySettled = errors.New("ontime: message already settled")
	// ErrNotDelivered means a manual settle (Ack, Nack, Drop, DeadLetter,
	// Snooze) on a Message that no worker delivered, such as one built as
	// a literal in a test: there is no timer to settle. Build test
	// messages with ontimetest.NewMessage.
	ErrNotDelivered = errors.New("ontime: the message was not delivered by a worker: nothing to settle")
)

// BatchError is the error of PublishBatch, and of Publish (a batch of
// one), when the store failed. The batch was sent in chunks of
// BatchChunkSize timers, in order; the store failed on the chunk of timers
// [Written, Written+Failed):
//
//   - timers [0, Written) are written; PublishBatch returns their results;
//   - timers [Written, Written+Failed) are all written or none is (one
//     chunk is atomic); usually none, but a store error such as a timeout
//     after the request was sent leaves it unknown which;
//   - timers [Written+Failed, Total) were not sent.
//
// errors.Is and errors.As see the store's error through it (Unwrap).
type BatchError struct {
	// Topic is the full topic (with the Client's prefix).
	Topic string
	// Written is how many timers, from the start of the batch, are
	// written. It is a multiple of BatchChunkSize.
	Written int
	// Failed is how many timers the failed store call carried.
	Failed int
	// Total is the number of timers in the batch.
	Total int
	// IDs are the ids of timers [Written, Total), in batch order, random
	// ones included: publish them again with these ids to finish the batch
	// without duplicates.
	IDs []string
	// Err is the store's error.
	Err error
}

// Error says which timers were written, which failed and which were not
// sent.
func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ontime: publish to %q: ", e.Topic)
	if e.Total == 1 {
		// Publish, or a batch of one: nothing to tell apart.
		if e.Err != nil {
			b.WriteString(e.Err.Error())
		}
		return b.String()
	}
	if e.Written > 0 {
		fmt.Fprintf(&b, "timers [0, %d) written, ", e.Written)
	}
	fmt.Fprintf(&b, "timers [%d, %d) failed (all or none written; none unless the store failed after receiving them)",
		e.Written, e.Written+e.Failed)
	if e.Written+e.Failed < e.Total {
		fmt.Fprintf(&b, ", timers [%d, %d) not sent", e.Written+e.Failed, e.Total)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the store's error.
func (e *BatchError) Unwrap() error { return e.Err }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// isLeaseLost reports whether err is the store refusing a fenced call.
func isLeaseLost(err error) bool { return errors.Is(err, ontimedriver.ErrLeaseLost) }
