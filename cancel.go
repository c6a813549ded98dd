package ontime

import (
	"context"
	"errors"
	"fmt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Cancel deletes a scheduled or leased timer. It returns ErrNotFound when
// there is none.
//
// Concurrent Cancel calls on one topic share store calls, as concurrent
// Publish calls do: a call made while another cancel of the topic is under
// way waits for it to end, then goes to the store in one CancelBatch call
// (one transaction, one script) with every other Cancel that arrived
// meanwhile, and each caller gets its own answer (nil or ErrNotFound). A
// call made while the topic is idle goes at once, alone. A caller whose ctx
// ends while it waits gets ctx's error and its timer is not cancelled; one
// whose ctx ends while its id is in a shared call gets ctx's error at once,
// and the timer may be cancelled (the shared call is not cut short).
func (c *Client) Cancel(ctx context.Context, topic, id string) error {
	full, err := c.fullTopic(topic)
	if err != nil {
		return err
	}
	if err := ontimedriver.ValidateID(id); err != nil {
		return err
	}
	res, err := c.can.cancel(ctx, c.drv, full, id)
	if err != nil {
		return err
	}
	return res
}

// CancelChunkSize is the most ids CancelBatch cancels in one store call.
// One call is atomic (one transaction of the embedded store, one Lua script
// of Redis). It is larger than BatchChunkSize: a cancel writes no body, and
// on the embedded store the rate of cancels grows with the ids per commit
// (500 per call: about 30-50k/s, 2,000: 75-135k/s on the 2-core reference
// machine), while a call of 2,000 still holds the store for only a few
// milliseconds.
const CancelChunkSize = 2000

// CancelBatch deletes the scheduled or leased timers of topic that ids
// name, in one store round trip per CancelChunkSize ids, and returns one
// result per id, in order: nil for a timer deleted, ErrNotFound for an id
// with no scheduled or leased timer (a dead letter, an absent id, or an id
// given earlier in the same call). Every id is validated first: if any is
// invalid, the call returns an error naming it and cancels nothing. nil or
// empty ids cancel nothing and return an empty result.
//
// A batch of up to CancelChunkSize ids is atomic: all its timers are deleted
// together or none is. A larger batch is cancelled chunk by chunk, in
// order, and is not atomic: when the store fails on a chunk, the chunks
// before it stay cancelled, and CancelBatch returns their results (ids
// [0, len(results))) with an error that unwraps to the store's. The failed
// chunk may or may not have reached the store (a timeout after the request
// was sent); cancelling ids[len(results):] again is safe: an id already
// cancelled answers ErrNotFound. A batch of one id shares a store call with
// concurrent cancels of the topic, as Cancel does.
func (c *Client) CancelBatch(ctx context.Context, topic string, ids []string) ([]error, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		if err := ontimedriver.ValidateID(id); err != nil {
			if len(ids) > 1 {
				return nil, fmt.Errorf("id %d: %w", i, err)
			}
			return nil, err
		}
	}
	out := make([]error, len(ids))
	for start := 0; start < len(ids); start += CancelChunkSize {
		end := min(start+CancelChunkSize, len(ids))
		var err error
		if end-start == 1 {
			out[start], err = c.can.cancel(ctx, c.drv, full, ids[start])
		} else {
			err = cancelCall(ctx, c.drv, full, ids[start:end], out[start:end])
		}
		if err != nil {
			err = &cancelBatchError{topic: full, done: start, failed: end - start, total: len(ids), err: err}
			if start == 0 {
				return nil, err
			}
			return out[:start], err
		}
	}
	return out, nil
}

// cancelBatchError is CancelBatch's error when the store failed on a
// chunk: ids [0, done) are cancelled, [done, done+failed) all or none,
// the rest not sent.
type cancelBatchError struct {
	topic               string
	done, failed, total int
	err                 error
}

func (e *cancelBatchError) Error() string {
	if e.total == 1 {
		return fmt.Sprintf("ontime: cancel in %q: %v", e.topic, e.err)
	}
	s := fmt.Sprintf("ontime: cancel in %q: ", e.topic)
	if e.done > 0 {
		s += fmt.Sprintf("ids [0, %d) cancelled, ", e.done)
	}
	s += fmt.Sprintf("ids [%d, %d) failed (all or none cancelled; none unless the store failed after receiving them)", e.done, e.done+e.failed)
	if e.done+e.failed < e.total {
		s += fmt.Sprintf(", ids [%d, %d) not sent", e.done+e.failed, e.total)
	}
	return s + ": " + e.err.Error()
}

func (e *cancelBatchError) Unwrap() error { return e.err }

// cancelCall cancels ids in one store call and writes each id's result to
// out (len(out) == len(ids)); the error is the call's.
func cancelCall(ctx context.Context, drv ontimedriver.Driver, topic string, ids []string, out []error) error {
	res, err := drv.CancelBatch(ctx, topic, ids)
	if err == nil && len(res) != len(ids) {
		err = fmt.Errorf("the store returned %d results for %d ids", len(res), len(ids))
	}
	if err != nil {
		return err
	}
	copy(out, res)
	return nil
}

// cancelCoalescer shares store calls between concurrent one-id cancels of
// a topic (see coalescer): one lane per topic, batches of up to
// CancelChunkSize ids made in one CancelBatch call. A second cancel of an
// id in one batch answers ErrNotFound, as it would after the first, so ids
// need no sorting out.
type cancelCoalescer struct {
	coalescer[string, string, error, cancelCalls]
}

// cancel cancels id of topic through drv and returns the id's own result
// (nil or ErrNotFound) and the store call's error. Contexts work as
// coalescer says.
func (cc *cancelCoalescer) cancel(ctx context.Context, drv ontimedriver.Driver, topic, id string) (error, error) {
	return cc.do(ctx, drv, topic, id)
}

// cancelCalls is cancelCoalescer's batcher: a lone id goes to the
// driver's Cancel, a batch to its CancelBatch.
type cancelCalls struct{}

var _ batcher[string, string, error] = cancelCalls{}

func (cancelCalls) chunk() int          { return CancelChunkSize }
func (cancelCalls) distinct() bool      { return false }
func (cancelCalls) id(id string) string { return id }

// one is the driver's Cancel, whose ErrNotFound is the id's result rather
// than the call's error.
func (cancelCalls) one(ctx context.Context, drv ontimedriver.Driver, topic, id string) (error, error) {
	err := drv.Cancel(ctx, topic, id)
	if errors.Is(err, ontimedriver.ErrNotFound) {
		return err, nil
	}
	return nil, err
}

func (cancelCalls) many(ctx context.Context, drv ontimedriver.Driver, topic string, batch []*pending[string, error]) error {
	ids := make([]string, len(batch))
	for i, p := range batch {
		ids[i] = p.req
	}
	res := make([]error, len(batch))
	err := cancelCall(ctx, drv, topic, ids, res)
	for i, p := range batch {
		p.res = res[i]
	}
	return err
}
