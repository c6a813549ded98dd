package ontime

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime/internal/backoff"
	"github.com/ontime-go/ontime/ontimedriver"
)

// settler batches the outcomes of a topic's handlers: whatever is queued
// when the store is free goes in one Settle call, so the store sees one
// round trip per batch, not per timer.
//
// It has no goroutine of its own while nothing is queued: the first
// outcome queued starts one, which settles batches until the queue is
// empty and then ends. A topic served by HandleTopics, of which thousands
// may be started, so costs its queue's entries and nothing while idle.
type settler struct {
	topic  string
	drv    ontimedriver.Driver
	lease  time.Duration // bounds each call (storeCallTimeout)
	log    *slog.Logger
	health *healthTracker

	mu   sync.Mutex
	open bool
	// q holds the outcomes waiting for a Settle call, in order; submit
	// waits while it holds limit (the handlers wait for the store).
	q     []settleReq
	limit int
	space sync.Cond // on mu: q shrank, or the settler closed
	// flushing is set while a run goroutine settles q; runs counts them.
	flushing bool
	runs     sync.WaitGroup

	// quit is closed when the Stop that closes the settler runs out of
	// time: from then on a failed Settle is not retried. finalAt (local
	// clock, UnixNano; 0 until quit) is storeCallTimeout after quit: no
	// Settle call runs past it, which bounds the calls still to come (a
	// call in flight at quit ends within storeCallTimeout of its start,
	// so before finalAt too). A deadline, not a parent context: a parent
	// would keep a set of children per topic, of which a worker serving
	// HandleTopics has thousands.
	quit     chan struct{}
	quitOnce sync.Once
	finalAt  atomic.Int64
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

// newSettler returns the settler of topic. limit bounds its queue (see
// submit).
func newSettler(topic string, drv ontimedriver.Driver, lease time.Duration, log *slog.Logger, health *healthTracker, limit int) *settler {
	s := &settler{topic: topic, drv: drv, lease: lease, log: log, health: health, open: true, limit: limit, quit: make(chan struct{})}
	s.space.L = &s.mu
	return s
}

func (s *settler) submit(req settleReq) {
	s.mu.Lock()
	for s.open && len(s.q) >= s.limit {
		s.space.Wait()
	}
	if !s.open {
		s.mu.Unlock()
		// Only a handler abandoned at shutdown gets here; its lease expires
		// and the timer is delivered again.
		if req.reply != nil {
			req.reply <- ErrStopped
		}
		return
	}
	s.q = append(s.q, req)
	if !s.flushing {
		s.flushing = true
		s.runs.Add(1)
		go s.run()
	}
	s.mu.Unlock()
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
	s.space.Broadcast()
	flushing := s.flushing
	s.mu.Unlock()
	if flushing {
		done := make(chan struct{})
		go func() { s.runs.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.giveUp()
			<-done
		}
	}
	s.runs.Wait()
	return s.abandoned.Load()
}

// giveUp stops the retries (see close).
func (s *settler) giveUp() {
	s.quitOnce.Do(func() {
		s.finalAt.Store(time.Now().Add(storeCallTimeout(s.lease)).UnixNano())
		close(s.quit)
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

// run settles what is queued, a batch at a time, and ends when the queue
// is empty.
func (s *settler) run() {
	defer s.runs.Done()
	var batch []settleReq
	for {
		batch = s.fill(batch[:0])
		if len(batch) == 0 {
			return // fill cleared flushing
		}
		s.flush(batch)
		clear(batch)
	}
}

// fill adds what is queued to batch, without waiting, up to
// maxSettleBatch. When it returns an empty batch, the run goroutine that
// called it must end: it is no longer flushing.
func (s *settler) fill(batch []settleReq) []settleReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.q), maxSettleBatch-len(batch))
	if n > 0 {
		batch = append(batch, s.q[:n]...)
		rest := copy(s.q, s.q[n:])
		clear(s.q[rest:])
		s.q = s.q[:rest]
		s.space.Broadcast()
	}
	if len(batch) == 0 {
		s.flushing = false
		s.q = nil // an idle topic keeps no queue
	}
	return batch
}

// flush settles a batch, retrying through store outages for as long as the
// leases last (or until a shutdown runs out of time). Outcomes queued while
// it waits to retry join the batch, so that after an outage everything
// pending goes to the store in one call.
func (s *settler) flush(batch []settleReq) {
	var wait time.Duration // the outage back-off
	for {
		ops := make([]ontimedriver.Settlement, len(batch))
		for i := range batch {
			ops[i] = batch[i].op
		}
		deadline := time.Now().Add(storeCallTimeout(s.lease))
		if f := s.finalAt.Load(); f != 0 && f < deadline.UnixNano() {
			deadline = time.Unix(0, f)
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		back := s.health.recovery()
		res, err := s.drv.Settle(ctx, s.topic, ops)
		cancel()
		if err == nil {
			s.health.ok()
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
				s.log.Warn("ontime: settle refused: the lease was lost or the timer was re-published; the store keeps the newer state",
					"topic", s.topic, "count", len(refused), "ids", sampleIDs(refused))
			}
			return
		}
		if s.quitting() {
			s.log.Warn("ontime: shutting down: gave up settling outcomes the store did not take; their timers will be delivered again when their leases expire",
				"topic", s.topic, "count", len(batch), "ids", sampleIDs(batch), "err", err)
			s.abandoned.Add(int64(len(batch)))
			for _, b := range batch {
				if b.reply != nil {
					b.reply <- err
				}
			}
			return
		}
		s.health.fail("settle", err)
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
			s.log.Warn("ontime: could not settle before the leases expired; these timers will be delivered again",
				"topic", s.topic, "count", len(expired), "ids", sampleIDs(expired), "err", err)
		}
		batch = keep
		if len(batch) == 0 {
			return
		}
		// Interrupted by a shutdown that gave up, the loop makes its one
		// last try (bounded by finalAt) at once.
		wait = backoff.Next(wait, minOutageBackoff, maxOutageBackoff)
		outageSleep(wait, back, s.quit)
		batch = s.fill(batch) // not empty: flushing stays set
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
