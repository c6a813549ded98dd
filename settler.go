package ontime

import (
	"context"
	"sync"
	"sync/atomic"
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

	// quit is closed when the Stop that closes the settler runs out of
	// time: from then on a failed Settle is not retried. final is the
	// parent of every Settle call's context; it is cancelled
	// storeCallTimeout after quit, which bounds the calls in flight or
	// still to come.
	quit        chan struct{}
	quitOnce    sync.Once
	final       context.Context
	cancelFinal context.CancelFunc
	// abandoned counts the outcomes given up at shutdown.
	abandoned atomic.Int64
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

// logSampleIDs is how many example ids a summary log line carries.
const logSampleIDs = 5

func (s *settler) init(r *runner) {
	s.r = r
	s.open = true
	size := 4 * maxSettleBatch
	if r.pr != nil {
		// A topic served by HandleTopics runs only while it has timers:
		// thousands of them may start and stop every second, and a
		// queue of 2,048 outcomes (about 200 KB) each would be most of
		// what they allocate. Its claimed timers (the slots) bound what
		// it queues, but for outcomes a stop or an outage leaves behind.
		size = max(2*cap(r.slots), 16)
	}
	s.ch = make(chan settleReq, size)
	s.done = make(chan struct{})
	s.quit = make(chan struct{})
	s.final, s.cancelFinal = context.WithCancel(context.Background())
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

// close stops taking outcomes and waits until the queued ones are settled.
// While ctx lasts, a batch the store refuses is retried until its leases
// run out, as during any outage. Once ctx is done, nothing is retried: each
// remaining batch gets one more Settle call, all of them together bounded
// by storeCallTimeout, and what they do not settle is given up (the timers
// are delivered again when their leases expire; nothing is lost). close
// reports how many outcomes were given up.
func (s *settler) close(ctx context.Context) int64 {
	s.mu.Lock()
	s.open = false
	close(s.ch)
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		s.giveUp()
		<-s.done
	}
	s.cancelFinal()
	return s.abandoned.Load()
}

// giveUp stops the retries (see close).
func (s *settler) giveUp() {
	s.quitOnce.Do(func() {
		close(s.quit)
		time.AfterFunc(storeCallTimeout(s.r.opts.Lease), s.cancelFinal)
	})
}

func (s *settler) quitting() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

func (s *settler) run() {
	defer close(s.done)
	batch := make([]settleReq, 0, maxSettleBatch)
	for req := range s.ch {
		batch = s.fill(append(batch[:0], req))
		s.flush(batch)
	}
}

// fill adds what is queued to batch, without waiting, up to maxSettleBatch.
func (s *settler) fill(batch []settleReq) []settleReq {
	for len(batch) < maxSettleBatch {
		select {
		case more, ok := <-s.ch:
			if !ok {
				return batch
			}
			batch = append(batch, more)
		default:
			return batch
		}
	}
	return batch
}

// flush settles a batch, retrying through store outages for as long as the
// leases last (or until a shutdown runs out of time). Outcomes queued while
// it waits to retry join the batch, so that after an outage everything
// pending goes to the store in one call.
func (s *settler) flush(batch []settleReq) {
	r := s.r
	var backoff time.Duration
	for {
		ops := make([]ontimedriver.Settlement, len(batch))
		for i := range batch {
			ops[i] = batch[i].op
		}
		ctx, cancel := context.WithTimeout(s.final, storeCallTimeout(r.opts.Lease))
		res, err := r.drv.Settle(ctx, r.topic, ops)
		cancel()
		if err == nil {
			r.w.health.ok()
			var refused []settleReq
			for i, e := range res {
				if isLeaseLost(e) {
					refused = append(refused, batch[i])
				}
				if batch[i].reply != nil {
					batch[i].reply <- e
				}
			}
			if len(refused) > 0 {
				r.w.log.Warn("ontime: settle refused: the lease was lost or the timer was re-published; the store keeps the newer state",
					"topic", r.topic, "count", len(refused), "ids", sampleIDs(refused))
			}
			return
		}
		if s.quitting() {
			r.w.log.Warn("ontime: shutting down: gave up settling outcomes the store did not take; their timers will be delivered again when their leases expire",
				"topic", r.topic, "count", len(batch), "ids", sampleIDs(batch), "err", err)
			s.abandoned.Add(int64(len(batch)))
			for _, b := range batch {
				if b.reply != nil {
					b.reply <- err
				}
			}
			return
		}
		r.w.health.fail("settle", err)
		now := time.Now().UnixNano()
		keep, expired := batch[:0], []settleReq(nil)
		for _, b := range batch {
			if b.deadline > now {
				keep = append(keep, b)
				continue
			}
			expired = append(expired, b)
			if b.reply != nil {
				b.reply <- err
			}
		}
		if len(expired) > 0 {
			r.w.log.Warn("ontime: could not settle before the leases expired; these timers will be delivered again",
				"topic", r.topic, "count", len(expired), "ids", sampleIDs(expired), "err", err)
		}
		batch = keep
		if len(batch) == 0 {
			return
		}
		// Interrupted by a shutdown that gave up, the loop makes its one
		// last try (bounded by s.final) at once.
		backoff = nextBackoff(backoff, maxOutageBackoff)
		s.sleep(backoff)
		batch = s.fill(batch)
	}
}

// sleep waits d, or until a shutdown gives up.
func (s *settler) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.quit:
	}
}

// sampleIDs returns the first few timer ids of reqs, for a summary log line.
func sampleIDs(reqs []settleReq) []string {
	ids := make([]string, 0, min(len(reqs), logSampleIDs))
	for _, b := range reqs[:min(len(reqs), logSampleIDs)] {
		ids = append(ids, b.op.ID)
	}
	return ids
}
