package ontime

import (
	"context"
	"sync"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// settler batches the outcomes of a topic's handlers: whatever is queued
// when the store is free goes in one Settle call, so the store sees one
// round trip per batch, not per timer.
type settler struct {
	r    *runner
	mu   sync.RWMutex
	open bool
	ch   chan settleReq
	done chan struct{}
}

type settleReq struct {
	op ontimedriver.Settlement
	// deadline is the lease deadline (local clock, UnixNano): past it the
	// store may have handed the timer to someone else, so retrying the
	// settle after an outage is pointless (the timer is redelivered).
	deadline int64
	reply    chan error // nil for fire-and-forget
}

const maxSettleBatch = 512

func (s *settler) init(r *runner) {
	s.r = r
	s.open = true
	s.ch = make(chan settleReq, 4*maxSettleBatch)
	s.done = make(chan struct{})
}

func (s *settler) submit(req settleReq) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.open {
		// Only a handler abandoned at shutdown gets here; its lease expires
		// and the timer is delivered again.
		if req.reply != nil {
			req.reply <- ErrStopped
		}
		return
	}
	s.ch <- req
}

func (s *settler) close() {
	s.mu.Lock()
	s.open = false
	close(s.ch)
	s.mu.Unlock()
	<-s.done
}

func (s *settler) run() {
	defer close(s.done)
	batch := make([]settleReq, 0, maxSettleBatch)
	for req := range s.ch {
		batch = append(batch[:0], req)
	drain:
		for len(batch) < maxSettleBatch {
			select {
			case more, ok := <-s.ch:
				if !ok {
					break drain
				}
				batch = append(batch, more)
			default:
				break drain
			}
		}
		s.flush(batch)
	}
}

// flush settles a batch, retrying through store outages for as long as the
// leases last.
func (s *settler) flush(batch []settleReq) {
	r := s.r
	var backoff time.Duration
	for {
		ops := make([]ontimedriver.Settlement, len(batch))
		for i := range batch {
			ops[i] = batch[i].op
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout(r.opts.Lease))
		res, err := r.drv.Settle(ctx, r.topic, ops)
		cancel()
		if err == nil {
			r.w.health.ok()
			for i, e := range res {
				if isLeaseLost(e) {
					r.w.log.Warn("ontime: settle refused: the lease was lost or the timer was re-published; the store keeps the newer state",
						"topic", r.topic, "id", batch[i].op.ID, "op", batch[i].op.Kind.String())
				}
				if batch[i].reply != nil {
					batch[i].reply <- e
				}
			}
			return
		}
		r.w.health.fail("settle", err)
		now := time.Now().UnixNano()
		keep := batch[:0]
		for _, b := range batch {
			if b.deadline > now {
				keep = append(keep, b)
				continue
			}
			r.w.log.Warn("ontime: could not settle before the lease expired; the timer will be delivered again",
				"topic", r.topic, "id", b.op.ID, "op", b.op.Kind.String(), "err", err)
			if b.reply != nil {
				b.reply <- err
			}
		}
		batch = keep
		if len(batch) == 0 {
			return
		}
		backoff = nextBackoff(backoff)
		time.Sleep(backoff)
	}
}
