package ontime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// publishCoalescer merges concurrent one-timer publishes to the same topic
// (and mode) into one store call while a call for that topic is under way.
// A caller that finds the topic idle makes its own call at once, alone,
// with its own context, exactly as an uncoalesced Publish would. Callers
// that arrive meanwhile queue; when the call ends, a flusher goroutine
// makes one call for every queued timer (up to BatchChunkSize, no id
// twice), hands each caller its own result, and goes on with the next
// queued batch (after a short wait for the callers it answered, see flush)
// until the queue is empty. So a lone caller pays nothing, and under load
// the store sees one round trip (one script, one transaction) per batch
// instead of per timer, made by one goroutine that stays awake while the
// topic is busy: no hand-off between callers and no per-call goroutine
// between batches (the shared call has no cancellation, so the Redis
// driver runs it on the flusher itself).
type publishCoalescer struct {
	mu    sync.Mutex
	lanes map[laneKey]*lane
}

type laneKey struct {
	topic string
	mode  ontimedriver.ScheduleMode
	// ack is the replica acknowledgement the calls wait for
	// (WaitReplicas): a shared call waits for what each of its callers
	// asked.
	ack ontimedriver.ReplicaAck
}

// lane is one topic's (and mode's) queue. busy is set while a store call
// of the lane is under way (a lone caller's or the flusher's); one call at
// a time merges the most (2 and 4 calls under way measured no better, bench
// publish scenario, both stores, on the 2-core reference machine).
type lane struct {
	busy  bool
	queue []*pendingPublish
	// wake, when set, is closed once want callers are queued (see flush).
	wake chan struct{}
	want int
}

// pendingPublish is one caller's timer. The coalescer's lock guards taken
// and the queue; res, err and panicked are written before done is closed.
type pendingPublish struct {
	ctx      context.Context
	nt       ontimedriver.NewTimer
	taken    bool // in a batch under way (no longer in the queue)
	done     chan struct{}
	res      [1]ontimedriver.ScheduleResult // in the caller's allocation: no slice to make
	err      error
	panicked any // the driver panicked in the call that carried this timer first
}

// schedule writes nts to topic through drv in one store call and returns
// their results (each Err is the timer's own, such as ErrExists) and the
// store call's error. A batch of one timer shares a store call with the
// concurrent callers of the same topic and mode when one is under way; a
// larger batch makes its own call (it must stay atomic: see
// PublishBatch).
// A caller whose ctx ends while its timer waits in the queue gets
// ctx.Err() and the timer is not written; one whose ctx ends while its
// timer is in a store call gets ctx.Err() at once, and the timer may have
// been written (as with a store call cut short). A shared call itself is
// not cut short by its callers' contexts: it ends by the store client's own
// timeouts, and its results are dropped for callers that have gone.
func (pc *publishCoalescer) schedule(ctx context.Context, drv ontimedriver.Driver, topic string, nts []ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	if len(nts) != 1 {
		return scheduleCall(ctx, drv, topic, nts, mode)
	}
	ack, _ := ontimedriver.ReplicaAckFrom(ctx)
	key := laneKey{topic, mode, ack}
	pc.mu.Lock()
	if pc.lanes == nil {
		pc.lanes = map[laneKey]*lane{}
	}
	l := pc.lanes[key]
	if l == nil {
		l = &lane{}
		pc.lanes[key] = l
	}
	if !l.busy {
		// No call under way: call at once, alone, with the caller's own
		// context.
		l.busy = true
		pc.mu.Unlock()
		defer pc.next(key, l, drv) // also when the driver panics
		return scheduleCall(ctx, drv, topic, nts, mode)
	}
	p := &pendingPublish{ctx: ctx, nt: nts[0], done: make(chan struct{})}
	l.queue = append(l.queue, p)
	if l.wake != nil && len(l.queue) >= l.want {
		close(l.wake)
		l.wake = nil
	}
	pc.mu.Unlock()

	select {
	case <-p.done:
		return p.result()
	case <-ctx.Done():
		pc.mu.Lock()
		if !p.taken {
			for i, q := range l.queue {
				if q == p {
					l.queue = append(l.queue[:i], l.queue[i+1:]...)
					break
				}
			}
			pc.mu.Unlock()
			return nil, ctx.Err()
		}
		pc.mu.Unlock()
		select {
		case <-p.done:
			return p.result()
		default:
			return nil, ctx.Err()
		}
	}
}

func (p *pendingPublish) result() ([]ontimedriver.ScheduleResult, error) {
	if p.panicked != nil {
		panic(p.panicked)
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.res[:], nil
}

// next ends a lone caller's store call of l: the lane goes idle, or a
// flusher starts on the queued timers.
func (pc *publishCoalescer) next(key laneKey, l *lane, drv ontimedriver.Driver) {
	pc.mu.Lock()
	batch := pc.take(key, l)
	pc.mu.Unlock()
	if batch != nil {
		go pc.flush(key, l, drv, batch)
	}
}

// flush writes l's queued timers, batch after batch, until the queue is
// empty; then the lane is idle.
//
// After a shared call it waits a little for the callers it answered: a
// caller that publishes again at once (a loop, a server's next request on
// the same connection) then joins the next call instead of the one after.
// Without it, callers that publish in a loop split into two groups that
// take turns, and each call carries about half of them. The wait ends as
// soon as as many callers have queued as the call answered, and lasts at
// most an eighth of the call's own duration (boardMax at most): the store
// is idle at most that long, and a lone caller never waits (it makes its
// own call at once, see schedule).
func (pc *publishCoalescer) flush(key laneKey, l *lane, drv ontimedriver.Driver, batch []*pendingPublish) {
	for batch != nil {
		start := time.Now()
		pc.run(drv, key.topic, key.mode, batch)
		took := time.Since(start)
		var wake chan struct{}
		pc.mu.Lock()
		if len(batch) > 1 && len(l.queue) < BatchChunkSize {
			wake = make(chan struct{})
			l.want, l.wake = min(len(l.queue)+len(batch), BatchChunkSize), wake
		}
		pc.mu.Unlock()
		answer(batch)
		if wake != nil {
			t := time.NewTimer(min(took/8, boardMax))
			select {
			case <-wake:
			case <-t.C:
			}
			t.Stop()
		}
		pc.mu.Lock()
		l.wake = nil
		batch = pc.take(key, l)
		pc.mu.Unlock()
	}
}

// boardMax is the longest a flusher waits for the callers it answered.
const boardMax = time.Millisecond

// answer wakes the callers of a batch that was written (or failed).
func answer(batch []*pendingPublish) {
	for _, p := range batch {
		close(p.done)
	}
}

// take takes the next batch of l's queue: up to BatchChunkSize timers in
// queue order, no id twice (a second publish of an id waits for the next
// batch, so the store sees them in order). A timer whose caller has gone is
// dropped, unwritten, with its context's error. With nothing left, the
// lane goes idle and take returns nil. The caller holds pc.mu.
func (pc *publishCoalescer) take(key laneKey, l *lane) []*pendingPublish {
	var batch []*pendingPublish
	var ids map[string]struct{}
	rest := l.queue[:0]
	for _, q := range l.queue {
		if err := q.ctx.Err(); err != nil {
			q.taken, q.err = true, err
			close(q.done)
			continue
		}
		if len(batch) == BatchChunkSize {
			rest = append(rest, q)
			continue
		}
		if len(batch) == 1 && ids == nil {
			// A second timer: from here on, ids are checked.
			ids = make(map[string]struct{}, min(len(l.queue), BatchChunkSize))
			ids[batch[0].nt.ID] = struct{}{}
		}
		if ids != nil {
			if _, dup := ids[q.nt.ID]; dup {
				rest = append(rest, q)
				continue
			}
			ids[q.nt.ID] = struct{}{}
		}
		q.taken = true
		batch = append(batch, q)
	}
	clear(l.queue[len(rest):])
	l.queue = rest
	if batch == nil {
		l.busy = false
		delete(pc.lanes, key)
	}
	return batch
}

// run writes a batch in one store call (answer then wakes its callers), with the first caller's context
// values but no cancellation (each caller waits on its own context). A
// driver that panics fails the batch for every caller (none is told its
// timer was written), and the first caller panics with the driver's value.
func (pc *publishCoalescer) run(drv ontimedriver.Driver, topic string, mode ontimedriver.ScheduleMode, batch []*pendingPublish) {
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
	nts := make([]ontimedriver.NewTimer, len(batch))
	for i, p := range batch {
		nts[i] = p.nt
	}
	res, err := scheduleCall(ctx, drv, topic, nts, mode)
	for i, p := range batch {
		if err != nil {
			p.err = err
			continue
		}
		p.res[0] = res[i]
	}
}

// scheduleCall writes nts in one store call and checks that the store
// answered for each.
func scheduleCall(ctx context.Context, drv ontimedriver.Driver, topic string, nts []ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	res, err := drv.Schedule(ctx, topic, nts, mode)
	if err == nil && len(res) != len(nts) {
		err = errResultCount(len(res), len(nts))
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func errResultCount(got, want int) error {
	return fmt.Errorf("the store returned %d results for %d timers", got, want)
}
