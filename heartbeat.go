package ontime

import (
	"context"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// heartbeat extends the leases of running handlers, all of a topic's in one
// store call every Lease/3. A lease found lost cancels its handler's
// context; the handler's result is then not acked.
func (r *runner) heartbeat() {
	defer close(r.hbDone)
	if r.opts.DisableHeartbeat {
		<-r.hctx.Done()
		return
	}
	interval := r.opts.Lease / 3
	t := time.NewTicker(interval)
	defer t.Stop()
	var (
		ds     []*delivery
		leases []ontimedriver.Lease
	)
	for {
		select {
		case <-r.hctx.Done():
			return
		case <-t.C:
		}
		ds, leases = ds[:0], leases[:0]
		r.mu.Lock()
		for d := range r.inflight {
			if !d.settled.Load() {
				ds = append(ds, d)
				leases = append(leases, ontimedriver.Lease{ID: d.t.ID, Token: d.t.Token})
			}
		}
		r.mu.Unlock()
		if len(leases) == 0 {
			continue
		}
		start := time.Now()
		// Bounded by the lease, not the interval: an Extend slower than
		// the interval (a busy store) is still worth waiting for.
		ctx, cancel := context.WithTimeout(r.hctx, r.opts.Lease)
		res, err := r.drv.Extend(ctx, r.topic, leases, r.opts.Lease)
		cancel()
		if err != nil {
			if r.hctx.Err() == nil {
				r.w.health.fail("extend", err)
			}
			continue
		}
		r.w.health.ok()
		next := start.Add(r.opts.Lease).UnixNano()
		lost, sample := 0, []string(nil)
		for i, e := range res {
			d := ds[i]
			switch {
			case e == nil:
				d.deadline.Store(next)
			case isLeaseLost(e) && !d.settled.Load():
				d.lost.Store(true)
				d.cancel()
				lost++
				if len(sample) < logSampleIDs {
					sample = append(sample, d.t.ID)
				}
			}
		}
		if lost > 0 {
			// One line per round: after an outage longer than the lease,
			// every running handler can lose its lease at once.
			r.w.log.Warn("ontime: leases lost (another worker holds the timers, or they were re-published); cancelling their handlers, whose results will not be acked",
				"topic", r.topic, "count", lost, "ids", sample)
		}
	}
}
