package ontime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// cancelCoalescer merges concurrent one-id cancels of the same topic into
// one CancelBatch store call while a cancel of that topic is under way,
// the way publishCoalescer merges publishes (see it for the scheme): a
// caller that finds the topic idle calls Cancel at once, alone, with its
// own context; callers that arrive meanwhile queue, and a flusher cancels
// the queued ids, up to CancelChunkSize per call, batch after batch, until
// the queue is empty. A second cancel of an id in one batch answers
// ErrNotFound, as it would after the first, so ids need no sorting out.
type cancelCoalescer struct {
	mu    sync.Mutex
	lanes map[string]*cancelLane
}

// cancelLane is one topic's queue; busy while a cancel call of the topic
// is under way.
type cancelLane struct {
	busy  bool
	queue []*pendingCancel
	// wake, when set, is closed once want callers are queued.
	wake chan struct{}
	want int
}

// pendingCancel is one caller's id. The coalescer's lock guards taken and
// the queue; res, err and panicked are written before done is closed.
type pendingCancel struct {
	ctx      context.Context
	id       string
	taken    bool
	done     chan struct{}
	res      error // the id's own result: nil or ErrNotFound
	err      error // the store call's error
	panicked any
}

// cancel cancels id of topic through drv and returns the id's own result
// (nil or ErrNotFound) and the store call's error. Contexts work as with
// publishCoalescer.schedule.
func (cc *cancelCoalescer) cancel(ctx context.Context, drv ontimedriver.Driver, topic, id string) (error, error) {
	cc.mu.Lock()
	if cc.lanes == nil {
		cc.lanes = map[string]*cancelLane{}
	}
	l := cc.lanes[topic]
	if l == nil {
		l = &cancelLane{}
		cc.lanes[topic] = l
	}
	if !l.busy {
		l.busy = true
		cc.mu.Unlock()
		defer cc.next(topic, l, drv) // also when the driver panics
		return cancelOne(ctx, drv, topic, id)
	}
	p := &pendingCancel{ctx: ctx, id: id, done: make(chan struct{})}
	l.queue = append(l.queue, p)
	if l.wake != nil && len(l.queue) >= l.want {
		close(l.wake)
		l.wake = nil
	}
	cc.mu.Unlock()

	select {
	case <-p.done:
		return p.result()
	case <-ctx.Done():
		cc.mu.Lock()
		if !p.taken {
			for i, q := range l.queue {
				if q == p {
					l.queue = append(l.queue[:i], l.queue[i+1:]...)
					break
				}
			}
			cc.mu.Unlock()
			return nil, ctx.Err()
		}
		cc.mu.Unlock()
		select {
		case <-p.done:
			return p.result()
		default:
			return nil, ctx.Err()
		}
	}
}

func (p *pendingCancel) result() (error, error) {
	if p.panicked != nil {
		panic(p.panicked)
	}
	return p.res, p.err
}

// cancelOne is the lone caller's call: the driver's Cancel, whose
// ErrNotFound is the id's result rather than the call's error.
func cancelOne(ctx context.Context, drv ontimedriver.Driver, topic, id string) (error, error) {
	err := drv.Cancel(ctx, topic, id)
	if errors.Is(err, ontimedriver.ErrNotFound) {
		return err, nil
	}
	return nil, err
}

// next ends a lone caller's call: the lane goes idle, or a flusher starts
// on the queued ids.
func (cc *cancelCoalescer) next(topic string, l *cancelLane, drv ontimedriver.Driver) {
	cc.mu.Lock()
	batch := cc.take(topic, l)
	cc.mu.Unlock()
	if batch != nil {
		go cc.flush(topic, l, drv, batch)
	}
}

// flush cancels l's queued ids, batch after batch, until the queue is
// empty, waiting briefly after each shared call for the callers it
// answered (as publishCoalescer.flush does).
func (cc *cancelCoalescer) flush(topic string, l *cancelLane, drv ontimedriver.Driver, batch []*pendingCancel) {
	for batch != nil {
		start := time.Now()
		cc.run(drv, topic, batch)
		took := time.Since(start)
		var wake chan struct{}
		cc.mu.Lock()
		if len(batch) > 1 && len(l.queue) < CancelChunkSize {
			wake = make(chan struct{})
			l.want, l.wake = min(len(l.queue)+len(batch), CancelChunkSize), wake
		}
		cc.mu.Unlock()
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
		cc.mu.Lock()
		l.wake = nil
		batch = cc.take(topic, l)
		cc.mu.Unlock()
	}
}

// take takes up to CancelChunkSize ids of l's queue, in queue order; a
// caller that has gone is dropped with its context's error. With nothing
// left the lane goes idle and take returns nil. The caller holds cc.mu.
func (cc *cancelCoalescer) take(topic string, l *cancelLane) []*pendingCancel {
	var batch []*pendingCancel
	rest := l.queue[:0]
	for _, q := range l.queue {
		if err := q.ctx.Err(); err != nil {
			q.taken, q.err = true, err
			close(q.done)
			continue
		}
		if len(batch) == CancelChunkSize {
			rest = append(rest, q)
			continue
		}
		q.taken = true
		batch = append(batch, q)
	}
	clear(l.queue[len(rest):])
	l.queue = rest
	if batch == nil {
		l.busy = false
		delete(cc.lanes, topic)
	}
	return batch
}

// run cancels a batch in one store call with the first caller's context
// values but no cancellation. A driver that panics fails the batch for
// every caller, and the first caller panics with the driver's value.
func (cc *cancelCoalescer) run(drv ontimedriver.Driver, topic string, batch []*pendingCancel) {
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
	if len(batch) == 1 {
		batch[0].res, batch[0].err = cancelOne(ctx, drv, topic, batch[0].id)
		return
	}
	ids := make([]string, len(batch))
	for i, p := range batch {
		ids[i] = p.id
	}
	res := make([]error, len(batch))
	err := cancelCall(ctx, drv, topic, ids, res)
	for i, p := range batch {
		p.res, p.err = res[i], err
	}
}
