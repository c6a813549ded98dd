package ontime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// coalescer merges concurrent one-item store calls of the same lane (a
// topic, and for publishes the mode and replica acknowledgement) into one
// store call while a call of that lane is under way. Publishes
// (publishCoalescer) and cancels (cancelCoalescer) share it; what differs
// between them, how one item and a batch of items become a store call and
// how the batch's results are handed back, is the batcher B.
//
// A caller that finds the lane idle makes its own call at once, alone,
// with its own context, exactly as an uncoalesced call would. Callers that
// arrive meanwhile queue; when the call ends, a flusher goroutine makes one
// call for the queued items (up to B's chunk, no id twice when B asks for
// it), hands each caller its own result, and goes on with the next queued
// batch (after a short wait for the callers it answered, see flush) until
// the queue is empty. So a lone caller pays nothing, and under load the
// store sees one round trip (one script, one transaction) per batch instead
// of per item, made by one goroutine that stays awake while the lane is
// busy: no hand-off between callers and no per-call goroutine between
// batches (the shared call has no cancellation, so the Redis driver runs it
// on the flusher itself).
//
// Contexts: a caller whose ctx ends while its item waits in the queue gets
// ctx.Err() and the item is not sent; one whose ctx ends while its item is
// in a store call gets ctx.Err() at once, and the item may have been
// written (as with a store call cut short). A shared call itself is not cut
// short by its callers' contexts: it ends by the store client's own
// timeouts, and its results are dropped for callers that have gone.
//
// The zero coalescer is ready to use.
type coalescer[K comparable, Req, Res any, B batcher[K, Req, Res]] struct {
	mu    sync.Mutex
	lanes map[K]*lane[Req, Res]
}

// batcher is the call-specific part of a coalescer. Implementations are
// empty structs: the coalescer uses B's zero value.
type batcher[K comparable, Req, Res any] interface {
	// chunk is the most items one shared call carries.
	chunk() int
	// distinct reports whether a batch must not carry two items of one id
	// (id names an item's); the second waits for a later batch, so the
	// store sees them in order.
	distinct() bool
	id(req Req) string
	// one makes the store call of one item: a lone caller's, or a batch
	// of one.
	one(ctx context.Context, drv ontimedriver.Driver, key K, req Req) (Res, error)
	// many makes one store call for the batch's items and sets each
	// pending's res; its error is the call's, given to every caller.
	many(ctx context.Context, drv ontimedriver.Driver, key K, batch []*pending[Req, Res]) error
}

// lane is one key's queue. busy is set while a store call of the lane is
// under way (a lone caller's or the flusher's); one call at a time merges
// the most (2 and 4 calls under way measured no better, bench publish
// scenario, both stores, on the 2-core reference machine).
type lane[Req, Res any] struct {
	busy  bool
	queue []*pending[Req, Res]
	// wake, when set, is closed once want callers are queued (see flush).
	wake chan struct{}
	want int
}

// pending is one caller's item. The coalescer's lock guards taken and the
// queue; res, err and panicked are written before done is closed.
type pending[Req, Res any] struct {
	ctx      context.Context
	req      Req
	taken    bool // in a batch under way (no longer in the queue)
	done     chan struct{}
	res      Res   // the item's own result
	err      error // the store call's error
	panicked any   // the driver panicked in the call that carried this item first
}

// do makes req's store call through drv, alone or shared with the
// concurrent callers of key (see coalescer), and returns req's own result
// and the store call's error.
func (c *coalescer[K, Req, Res, B]) do(ctx context.Context, drv ontimedriver.Driver, key K, req Req) (Res, error) {
	c.mu.Lock()
	if c.lanes == nil {
		c.lanes = map[K]*lane[Req, Res]{}
	}
	l := c.lanes[key]
	if l == nil {
		l = &lane[Req, Res]{}
		c.lanes[key] = l
	}
	if !l.busy {
		// No call under way: call at once, alone, with the caller's own
		// context.
		l.busy = true
		c.mu.Unlock()
		defer c.next(key, l, drv) // also when the driver panics
		var b B
		return b.one(ctx, drv, key, req)
	}
	p := &pending[Req, Res]{ctx: ctx, req: req, done: make(chan struct{})}
	l.queue = append(l.queue, p)
	if l.wake != nil && len(l.queue) >= l.want {
		close(l.wake)
		l.wake = nil
	}
	c.mu.Unlock()

	var zero Res
	select {
	case <-p.done:
		return p.result()
	case <-ctx.Done():
		c.mu.Lock()
		if !p.taken {
			for i, q := range l.queue {
				if q == p {
					l.queue = append(l.queue[:i], l.queue[i+1:]...)
					break
				}
			}
			c.mu.Unlock()
			return zero, ctx.Err()
		}
		c.mu.Unlock()
		select {
		case <-p.done:
			return p.result()
		default:
			return zero, ctx.Err()
		}
	}
}

func (p *pending[Req, Res]) result() (Res, error) {
	if p.panicked != nil {
		panic(p.panicked)
	}
	if p.err != nil {
		var zero Res
		return zero, p.err
	}
	return p.res, nil
}

// next ends a lone caller's store call of l: the lane goes idle, or a
// flusher starts on the queued items.
func (c *coalescer[K, Req, Res, B]) next(key K, l *lane[Req, Res], drv ontimedriver.Driver) {
	c.mu.Lock()
	batch := c.take(key, l)
	c.mu.Unlock()
	if batch != nil {
		go c.flush(key, l, drv, batch)
	}
}

// flush sends l's queued items, batch after batch, until the queue is
// empty; then the lane is idle.
//
// After a shared call it waits a little for the callers it answered: a
// caller that calls again at once (a loop, a server's next request on the
// same connection) then joins the next call instead of the one after.
// Without it, callers that call in a loop split into two groups that take
// turns, and each call carries about half of them. The wait ends as soon
// as as many callers have queued as the call answered, and lasts at most an
// eighth of the call's own duration (boardMax at most): the store is idle
// at most that long, and a lone caller never waits (it makes its own call
// at once, see do).
func (c *coalescer[K, Req, Res, B]) flush(key K, l *lane[Req, Res], drv ontimedriver.Driver, batch []*pending[Req, Res]) {
	var b B
	chunk := b.chunk()
	for batch != nil {
		start := time.Now()
		c.run(drv, key, batch)
		took := time.Since(start)
		var wake chan struct{}
		c.mu.Lock()
		if len(batch) > 1 && len(l.queue) < chunk {
			wake = make(chan struct{})
			l.want, l.wake = min(len(l.queue)+len(batch), chunk), wake
		}
		c.mu.Unlock()
		for _, p := range batch {
			close(p.done)
		}
		if wake != nil {
			t := time.NewTimer(min(took/8, boardMax))
			select {
			case <-wake:
			case <-t.C:
			}
			t.Stop()
		}
		c.mu.Lock()
		l.wake = nil
		batch = c.take(key, l)
		c.mu.Unlock()
	}
}

// boardMax is the longest a flusher waits for the callers it answered.
const boardMax = time.Millisecond

// take takes the next batch of l's queue: up to B's chunk of items in
// queue order, no id twice when B is distinct. An item whose caller has
// gone is dropped, unsent, with its context's error. With nothing left,
// the lane goes idle and take returns nil. The caller holds c.mu.
func (c *coalescer[K, Req, Res, B]) take(key K, l *lane[Req, Res]) []*pending[Req, Res] {
	var b B
	chunk, distinct := b.chunk(), b.distinct()
	var batch []*pending[Req, Res]
	var ids map[string]struct{}
	rest := l.queue[:0]
	for _, q := range l.queue {
		if err := q.ctx.Err(); err != nil {
			q.taken, q.err = true, err
			close(q.done)
			continue
		}
		if len(batch) == chunk {
			rest = append(rest, q)
			continue
		}
		if distinct {
			if len(batch) == 1 && ids == nil {
				// A second item: from here on, ids are checked.
				ids = make(map[string]struct{}, min(len(l.queue), chunk))
				ids[b.id(batch[0].req)] = struct{}{}
			}
			if ids != nil {
				id := b.id(q.req)
				if _, dup := ids[id]; dup {
					rest = append(rest, q)
					continue
				}
				ids[id] = struct{}{}
			}
		}
		q.taken = true
		batch = append(batch, q)
	}
	clear(l.queue[len(rest):])
	l.queue = rest
	if batch == nil {
		l.busy = false
		delete(c.lanes, key)
	}
	return batch
}

// run makes a batch's store call (flush then wakes its callers), with the
// first caller's context values but no cancellation (each caller waits on
// its own context). A driver that panics fails the batch for every caller
// (none is told its item was written), and the first caller panics with
// the driver's value.
func (c *coalescer[K, Req, Res, B]) run(drv ontimedriver.Driver, key K, batch []*pending[Req, Res]) {
	defer func() {
		if r := recover(); r != nil {
			for i, p := range batch {
				p.err = fmt.Errorf("ontime: the store call panicked: %v", r)
				if i == 0 {
					p.panicked = r
				}
			}
		}
	}()
	ctx := context.WithoutCancel(batch[0].ctx)
	var b B
	if len(batch) == 1 {
		batch[0].res, batch[0].err = b.one(ctx, drv, key, batch[0].req)
		return
	}
	if err := b.many(ctx, drv, key, batch); err != nil {
		for _, p := range batch {
			p.err = err
		}
	}
}
