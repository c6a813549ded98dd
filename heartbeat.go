package ontime

import (
	"context"
	"sync"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// leaseKeeper extends the leases of the running handlers of a set of
// topics (heartbeat) and cancels the handlers whose leases run out without
// an extension (leaseWatch). A Handle topic has one of its own; the topics
// of a HandleTopics pattern share their pattern's, so that thousands of
// started topics do not each keep two goroutines.
type leaseKeeper struct {
	lease   time.Duration
	disable bool // TopicOptions.DisableHeartbeat: no extension, only the watch

	// mu guards busy: the topics with running (or claimed) handlers. A
	// runner's mu is taken before mu, never after.
	mu   sync.Mutex
	busy map[*runner]struct{}
	// poke asks leaseWatch to look again (dispatch, after a slow claim).
	poke chan struct{}
	// wg counts the heartbeat and lease watch goroutines and the
	// extensions the heartbeat runs; ctx ends them.
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func newLeaseKeeper(o TopicOptions) *leaseKeeper {
	k := &leaseKeeper{lease: o.Lease, disable: o.DisableHeartbeat, busy: map[*runner]struct{}{}, poke: make(chan struct{}, 1)}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	return k
}

func (k *leaseKeeper) start() {
	k.wg.Add(2)
	go k.heartbeat()
	go k.leaseWatch()
}

// stop ends the heartbeat and the lease watch and waits for them.
func (k *leaseKeeper) stop() {
	k.cancel()
	k.wg.Wait()
}

// setBusy adds r to the topics whose leases are kept (on), or removes it.
// It is called with r.mu held, when r.inflight gets its first delivery or
// loses its last.
func (k *leaseKeeper) setBusy(r *runner, on bool) {
	k.mu.Lock()
	if on {
		k.busy[r] = struct{}{}
	} else {
		delete(k.busy, r)
	}
	k.mu.Unlock()
}

// busyList appends the topics with running handlers to rs.
func (k *leaseKeeper) busyList(rs []*runner) []*runner {
	k.mu.Lock()
	defer k.mu.Unlock()
	for r := range k.busy {
		rs = append(rs, r)
	}
	return rs
}

// heartbeat extends the leases of running handlers every Lease/3: all of a
// topic's in one store call (Extend takes one topic), the topics' calls
// concurrent, so that a slow topic does not hold up the others. A topic
// whose previous extension is still running is skipped. A lease found lost
// cancels its handler's context; the handler's result is then not acked. A
// lease that cannot be extended (the store unreachable) runs out:
// leaseWatch cancels its handler before the store can hand the timer to
// another worker.
func (k *leaseKeeper) heartbeat() {
	defer k.wg.Done()
	if k.disable {
		return
	}
	t := time.NewTicker(k.lease / 3)
	defer t.Stop()
	var rs []*runner
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		}
		rs = k.busyList(rs[:0])
		for _, r := range rs {
			if r.hctx.Err() != nil || !r.extending.CompareAndSwap(false, true) {
				continue
			}
			k.wg.Add(1)
			go func() {
				defer k.wg.Done()
				defer r.extending.Store(false)
				var sc leaseScratch
				again := true
				for again && r.hctx.Err() == nil {
					again = r.extendLeases(&sc)
				}
			}()
		}
		clear(rs)
	}
}

// leaseScratch is the memory one heartbeat reuses from round to round.
type leaseScratch struct {
	ds     []*delivery
	leases []ontimedriver.Lease
	sample []string
}

// extendLeases extends the leases of the topic's running handlers in one
// store call. It reports whether to extend them again at once: after a
// slow call (go-redis redialling a store that just came back) the new
// deadlines, which count from when the call was sent, are far too early,
// and the lease watch would cancel handlers the store still leases to
// this worker.
func (r *runner) extendLeases(sc *leaseScratch) (again bool) {
	ds, leases := sc.ds[:0], sc.leases[:0]
	r.mu.Lock()
	for d := range r.inflight {
		if !d.settled.Load() && !d.lost.Load() {
			ds = append(ds, d)
			leases = append(leases, ontimedriver.Lease{ID: d.t.ID, Token: d.t.Token})
		}
	}
	r.mu.Unlock()
	defer func() {
		clear(ds)
		sc.ds, sc.leases = ds[:0], leases[:0]
	}()
	if len(leases) == 0 {
		return false
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
		return false
	}
	r.w.health.ok()
	next := start.Add(r.opts.Lease).UnixNano()
	again = time.Since(start) > leaseMargin(r.opts.Lease)/2
	lost, sample := 0, sc.sample[:0]
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
			"topic", r.topic, "count", lost, "ids", append([]string(nil), sample...))
	}
	sc.sample = sample[:0]
	return again
}

// leaseMargin is how long before its lease deadline (on the local clock) a
// handler whose lease was not extended is cancelled: a tenth of the lease.
// It covers what separates the worker's view of the deadline from the
// store's: the store rounding its clock to the millisecond, the two clocks
// running at slightly different rates (NTP lets them differ by up to
// 500 ppm, 15 ms over a 30 s lease), and the time a cancelled handler takes
// to return. The local deadline itself is measured from when the claim or
// extension was sent, so network latency only makes it earlier.
func leaseMargin(lease time.Duration) time.Duration {
	return max(lease/10, time.Millisecond)
}

// leaseWatch cancels the handlers whose lease deadline (less leaseMargin)
// passes without a successful extension, because the store could not be
// reached (the heartbeat keeps failing) or the heartbeat is disabled. Such
// a lease expires in the store at about the same instant, and another
// worker may then claim the timer: the handler must be gone by then, so
// that two handlers of one timer never run at once. Its result is not
// acked (the timer is delivered again, as for any lost lease).
//
// It wakes at the earliest such instant among the running handlers, and at
// least every Lease/3: a handler dispatched after it went to sleep has a
// deadline about a whole lease away, later than the next wake (dispatch
// wakes it when a slow claim left less than that).
func (k *leaseKeeper) leaseWatch() {
	defer k.wg.Done()
	idle := k.lease / 3
	t := time.NewTimer(idle)
	defer t.Stop()
	var (
		rs     []*runner
		sample []string
	)
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		case <-k.poke:
			t.Stop()
		}
		now := time.Now().UnixNano()
		next := now + int64(idle)
		rs = k.busyList(rs[:0])
		for _, r := range rs {
			if r.hctx.Err() == nil {
				next = r.watchLeases(now, next, &sample)
			}
		}
		clear(rs)
		t.Reset(time.Duration(next - time.Now().UnixNano()))
	}
}

// watchLeases cancels the topic's handlers whose lease deadline (less
// leaseMargin) is past at now (UnixNano) and returns the earliest of next
// and the deadlines (less the margin) still to come.
func (r *runner) watchLeases(now, next int64, sample *[]string) int64 {
	margin := int64(leaseMargin(r.opts.Lease))
	lost := 0
	*sample = (*sample)[:0]
	r.mu.Lock()
	for d := range r.inflight {
		if d.settled.Load() || d.lost.Load() {
			continue
		}
		expires := d.deadline.Load() - margin
		if expires > now {
			next = min(next, expires)
			continue
		}
		d.lost.Store(true)
		d.cancel()
		lost++
		if len(*sample) < logSampleIDs {
			*sample = append(*sample, d.t.ID)
		}
	}
	r.mu.Unlock()
	if lost > 0 {
		r.w.log.Warn("ontime: leases ran out without an extension (no answer from the store, or the heartbeat is disabled); cancelling their handlers before another worker can take the timers; their results will not be acked",
			"topic", r.topic, "count", lost, "ids", append([]string(nil), (*sample)...))
	}
	return next
}
