package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// observed passes every call through to the real driver and logs what the
// store answered for this worker's leases, which the handler alone cannot
// see: the library acks the outcome of a handler that returns nil later,
// in a batch, in its settle goroutine.
//
//	S <id> <attempt> <pid> <kind>          Settle applied this outcome (the store replied nil for it)
//	R <id> <attempt> <pid> <kind> <error>  Settle refused it (lease lost: fencing)
//	E <id> <attempt> <pid> <kind> <error>  the Settle call carrying it failed as a whole (it may have been applied)
//	X <id> <attempt> <pid>                 Extend (the heartbeat) found the lease lost
//
// An S line is written after the store's reply arrived, so a worker killed
// between the two leaves an applied ack without its S line; never the
// reverse. The attempt comes from the Claim reply, looked up by lease
// token.
type observed struct {
	ontimedriver.Driver
	logLine func(kind, id string, attempt int, extra string)

	mu       sync.Mutex
	attempts map[string]int // topic and lease token -> attempt of the claim (tokens count per topic)
}

func newObserved(d ontimedriver.Driver, logLine func(kind, id string, attempt int, extra string)) *observed {
	return &observed{Driver: d, logLine: logLine, attempts: map[string]int{}}
}

// Unwrap returns the observed driver: the library finds its optional
// interfaces (the topic index for HandleTopics, legacy payloads) through
// the wrapper (ontimedriver.As), so it decodes and serves exactly as it
// would without it.
func (o *observed) Unwrap() ontimedriver.Driver { return o.Driver }

// Claim records the attempt of every timer it leases.
func (o *observed) Claim(ctx context.Context, topic string, max int, lease time.Duration) (*ontimedriver.ClaimResult, error) {
	res, err := o.Driver.Claim(ctx, topic, max, lease)
	if err == nil {
		o.mu.Lock()
		for _, t := range res.Timers {
			o.attempts[topic+"\x00"+t.Token] = t.Attempt
		}
		o.mu.Unlock()
	}
	return res, err
}

func (o *observed) attempt(topic, token string, forget bool) int {
	token = topic + "\x00" + token
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.attempts[token]
	if !ok {
		return -1
	}
	if forget {
		delete(o.attempts, token)
	}
	return a
}

// Settle logs, per outcome, whether the store applied it.
func (o *observed) Settle(ctx context.Context, topic string, ops []ontimedriver.Settlement) ([]error, error) {
	res, err := o.Driver.Settle(ctx, topic, ops)
	if err != nil {
		// The settler retries the batch while the leases last: keep the
		// tokens.
		for _, op := range ops {
			o.logLine("E", op.ID, o.attempt(topic, op.Token, false), op.Kind.String()+" "+strconv.Quote(err.Error()))
		}
		return res, err
	}
	for i, op := range ops {
		a := o.attempt(topic, op.Token, true)
		switch e := res[i]; {
		case e == nil:
			o.logLine("S", op.ID, a, op.Kind.String())
		default:
			o.logLine("R", op.ID, a, op.Kind.String()+" "+strconv.Quote(e.Error()))
		}
	}
	return res, err
}

// Extend logs the leases the store reports lost.
func (o *observed) Extend(ctx context.Context, topic string, leases []ontimedriver.Lease, lease time.Duration) ([]error, error) {
	res, err := o.Driver.Extend(ctx, topic, leases, lease)
	if err == nil {
		for i, l := range leases {
			if !errors.Is(res[i], ontimedriver.ErrLeaseLost) {
				continue
			}
			// A token already settled (forgotten by Settle) is a heartbeat
			// that raced its own ack: the timer is gone because this
			// worker acked it, and the library ignores the answer.
			if a := o.attempt(topic, l.Token, false); a >= 0 {
				o.logLine("X", l.ID, a, "")
			}
		}
	}
	return res, err
}
