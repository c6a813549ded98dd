package ontime

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ontime-go/ontime/ontimedriver"
)

// publishCoalescer merges concurrent one-timer publishes to the same topic
// (and mode) into one store call while a call for that topic is under way.
// There is no linger: a caller that finds no call under way makes its own
// at once, alone, with its own context, exactly as an uncoalesced Publish
// would. Callers that arrive meanwhile queue; when the call ends, the first
// of them makes one call for every queued timer (up to BatchChunkSize, no
// id twice) and hands each caller its own result. So a lone caller pays
// nothing, and under load the store sees one round trip (one script, one
// transaction) per batch instead of per timer.
type publishCoalescer struct {
	mu    sync.Mutex
	lanes map[laneKey]*lane
}

type laneKey struct {
	topic string
	mode  ontimedriver.ScheduleMode
}

// lane is one topic's (and mode's) queue. inflight counts its store calls
// under way; at laneCalls, callers queue until one ends.
type lane struct {
	inflight int
	queue    []*pendingPublish
}

// laneCalls is how many store calls of one lane may be under way at once.
// One merges the most; 2 and 4 measured no better (bench publish
// scenario, both stores) on the 2-core reference machine.
const laneCalls = 1

// pendingPublish is one caller's timer. The lane's lock guards taken and
// the queue; res and err are written before done is closed.
type pendingPublish struct {
	ctx   context.Context
	nt    ontimedriver.NewTimer
	taken bool // in a batch under way (no longer in the queue)
	lead  chan []*pendingPublish
	done  chan struct{}
	res   ontimedriver.ScheduleResult
	err   error
}

// schedule writes nt to topic through drv, sharing a store call with the
// concurrent callers of the same topic and mode when one is under way. It
// returns the timer's result (whose Err is the timer's own, such as
// ErrExists) and the store call's error.
// A caller whose ctx ends while its timer waits in the queue gets
// ctx.Err() and the timer is not written; one whose ctx ends while its
// timer is in a store call gets ctx.Err() at once, and the timer may have
// been written (as with a store call cut short).
func (pc *publishCoalescer) schedule(ctx context.Context, drv ontimedriver.Driver, topic string, nt ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) (ontimedriver.ScheduleResult, error) {
	key := laneKey{topic, mode}
	p := &pendingPublish{ctx: ctx, nt: nt}
	pc.mu.Lock()
	if pc.lanes == nil {
		pc.lanes = map[laneKey]*lane{}
	}
	l := pc.lanes[key]
	if l == nil {
		l = &lane{}
		pc.lanes[key] = l
	}
	if l.inflight < laneCalls {
		// Room for a call: call at once, alone, with the caller's own
		// context.
		l.inflight++
		pc.mu.Unlock()
		defer pc.next(key, l) // also when the driver panics
		return scheduleOne(ctx, drv, topic, nt, mode)
	}
	p.lead = make(chan []*pendingPublish, 1)
	p.done = make(chan struct{})
	l.queue = append(l.queue, p)
	pc.mu.Unlock()

	select {
	case batch := <-p.lead:
		defer pc.next(key, l)
		pc.run(drv, topic, mode, batch)
		return p.res, p.err
	case <-p.done:
		return p.res, p.err
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
			return ontimedriver.ScheduleResult{}, ctx.Err()
		}
		pc.mu.Unlock()
		// In a batch already: the batch's leader may be this caller.
		select {
		case batch := <-p.lead:
			defer pc.next(key, l)
			pc.run(drv, topic, mode, batch)
			return p.res, p.err
		default:
			return ontimedriver.ScheduleResult{}, ctx.Err()
		}
	}
}

// next ends a store call of l: the lane goes idle, or the first queued
// caller is handed the next batch to write.
func (pc *publishCoalescer) next(key laneKey, l *lane) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if len(l.queue) == 0 {
		l.inflight--
		if l.inflight == 0 {
			delete(pc.lanes, key)
		}
		return
	}
	// Take up to BatchChunkSize timers in queue order, no id twice (a
	// second publish of an id waits for the next batch, so the store sees
	// them in order).
	var batch []*pendingPublish
	rest := l.queue[:0]
	ids := make(map[string]struct{}, min(len(l.queue), BatchChunkSize))
	for _, q := range l.queue {
		if _, dup := ids[q.nt.ID]; dup || len(batch) == BatchChunkSize {
			rest = append(rest, q)
			continue
		}
		ids[q.nt.ID] = struct{}{}
		q.taken = true
		batch = append(batch, q)
	}
	clear(l.queue[len(rest):])
	l.queue = rest
	batch[0].lead <- batch
}

// run writes a batch in one store call. Its context keeps the leader's
// values and ends when every caller's context has ended, so one caller
// giving up does not fail the others.
func (pc *publishCoalescer) run(drv ontimedriver.Driver, topic string, mode ontimedriver.ScheduleMode, batch []*pendingPublish) {
	defer func() {
		// A driver that panics fails the batch for every caller (none is
		// told its timer was written), then the panic goes on up the
		// leader's stack.
		r := recover()
		for _, p := range batch {
			if r != nil && p.err == nil {
				p.err = fmt.Errorf("ontime: the store call panicked: %v", r)
			}
			close(p.done)
		}
		if r != nil {
			panic(r)
		}
	}()
	if len(batch) == 1 {
		p := batch[0]
		p.res, p.err = scheduleOne(p.ctx, drv, topic, p.nt, mode)
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	left := int64(len(batch))
	for _, p := range batch {
		stop := context.AfterFunc(p.ctx, func() {
			if atomic.AddInt64(&left, -1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	nts := make([]ontimedriver.NewTimer, len(batch))
	for i, p := range batch {
		nts[i] = p.nt
	}
	res, err := drv.Schedule(ctx, topic, nts, mode)
	if err == nil && len(res) != len(nts) {
		err = errResultCount(len(res), len(nts))
	}
	for i, p := range batch {
		if err != nil {
			p.err = err
			continue
		}
		p.res = res[i]
	}
}

// scheduleOne writes one timer in its own store call.
func scheduleOne(ctx context.Context, drv ontimedriver.Driver, topic string, nt ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) (ontimedriver.ScheduleResult, error) {
	res, err := drv.Schedule(ctx, topic, []ontimedriver.NewTimer{nt}, mode)
	if err == nil && len(res) != 1 {
		err = errResultCount(len(res), 1)
	}
	if err != nil {
		return ontimedriver.ScheduleResult{}, err
	}
	return res[0], nil
}

func errResultCount(got, want int) error {
	return fmt.Errorf("the store returned %d results for %d timers", got, want)
}
