package ontime

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// leaseKeeper extends the leases of the held timers of a set of topics
// (heartbeat) and cancels the handlers whose leases run out without an
// extension (leaseWatch). A Handle topic has one of its own; the topics
// of a HandleTopics pattern share their pattern's, so that thousands of
// started topics do not each keep two goroutines.
//
// It sees a topic only as a leaseSet, and only while the set holds
// timers (setBusy).
type leaseKeeper struct {
	lease   time.Duration
	disable bool // TopicOptions.DisableHeartbeat: no extension, only the watch

	// mu guards busy: the sets that hold timers. A set's mu is taken
	// before mu, never after.
	mu   sync.Mutex
	busy map[*leaseSet]struct{}
	// pokeCh asks leaseWatch to look again (see poke).
	pokeCh chan struct{}
	// wg counts the heartbeat and lease watch goroutines and the
	// extensions the heartbeat runs; ctx ends them.
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func newLeaseKeeper(o TopicOptions) *leaseKeeper {
	k := &leaseKeeper{lease: o.Lease, disable: o.DisableHeartbeat, busy: map[*leaseSet]struct{}{}, pokeCh: make(chan struct{}, 1)}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	return k
}

// start starts the heartbeat and the lease watch. It must be called
// before stop, never concurrently with it.
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

// poke asks the lease watch to look again: a timer was claimed whose lease
// runs out sooner than a fresh one's (a slow claim).
func (k *leaseKeeper) poke() {
	select {
	case k.pokeCh <- struct{}{}:
	default:
	}
}

// setBusy adds s to the sets whose leases are kept (on), or removes it.
// It is called with s.mu held, when s gets its first timer or loses its
// last.
func (k *leaseKeeper) setBusy(s *leaseSet, on bool) {
	k.mu.Lock()
	if on {
		k.busy[s] = struct{}{}
	} else {
		delete(k.busy, s)
	}
	k.mu.Unlock()
}

// busyList appends the sets that hold timers to ss.
func (k *leaseKeeper) busyList(ss []*leaseSet) []*leaseSet {
	k.mu.Lock()
	defer k.mu.Unlock()
	for s := range k.busy {
		ss = append(ss, s)
	}
	return ss
}

// heartbeat extends the leases of held timers every Lease/3: all of a
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
	var ss []*leaseSet
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		}
		ss = k.busyList(ss[:0])
		for _, s := range ss {
			if !s.beginExtend() {
				continue
			}
			k.wg.Add(1)
			go func() {
				defer k.wg.Done()
				defer s.endExtend()
				var sc leaseScratch
				for again := true; again && !s.abandoned(); {
					again = s.extend(&sc)
				}
			}()
		}
		clear(ss)
	}
}

// leaseWatch cancels the handlers whose lease deadline (less leaseMargin)
// passes without a successful extension, because the store could not be
// reached (the heartbeat keeps failing) or the heartbeat is disabled. Such
// a lease expires in the store at about the same instant, and another
// worker may then claim the timer: the handler must be gone by then, so
// that two handlers of one timer never run at once. Its result is not
// acked (the timer is delivered again, as for any lost lease).
//
// It wakes at the earliest such instant among the held timers, and at
// least every Lease/3: a timer claimed after it went to sleep has a
// deadline about a whole lease away, later than the next wake (a slow
// claim pokes it when it left less than that).
func (k *leaseKeeper) leaseWatch() {
	defer k.wg.Done()
	idle := k.lease / 3
	t := time.NewTimer(idle)
	defer t.Stop()
	var (
		ss     []*leaseSet
		sample []string
	)
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		case <-k.pokeCh:
			t.Stop()
		}
		now := time.Now().UnixNano()
		next := now + int64(idle)
		ss = k.busyList(ss[:0])
		for _, s := range ss {
			if !s.abandoned() {
				next = s.expire(now, next, &sample)
			}
		}
		clear(ss)
		t.Reset(time.Duration(next - time.Now().UnixNano()))
	}
}

// leaseScratch is the memory one heartbeat reuses from round to round.
type leaseScratch struct {
	ds     []*delivery
	leases []ontimedriver.Lease
	sample []string
}

// leaseSet is a topic's claimed timers while this worker holds them
// (running, or claimed ahead and waiting to run): what its lease keeper
// extends and watches.
type leaseSet struct {
	topic  string
	drv    ontimedriver.Driver
	lease  time.Duration
	log    *slog.Logger
	health *healthTracker
	keeper *leaseKeeper

	// ctx is cancelled when a stop runs out of time (abandon): it bounds
	// the extensions, and no new one starts.
	ctx    context.Context
	cancel context.CancelFunc
	// extending is set while the heartbeat extends this set's leases.
	extending atomic.Bool

	mu   sync.Mutex
	held map[*delivery]struct{}
}

func newLeaseSet(topic string, drv ontimedriver.Driver, lease time.Duration, log *slog.Logger, health *healthTracker, keeper *leaseKeeper) *leaseSet {
	s := &leaseSet{topic: topic, drv: drv, lease: lease, log: log, health: health, keeper: keeper, held: map[*delivery]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// add holds d; the keeper keeps its lease from now on. A lease that runs
// out sooner than a fresh one's (a slow claim) has the lease watch look
// again.
func (s *leaseSet) add(d *delivery) {
	if time.Until(time.Unix(0, d.deadline.Load())) < s.lease*2/3 {
		s.keeper.poke()
	}
	s.mu.Lock()
	s.held[d] = struct{}{}
	if len(s.held) == 1 {
		s.keeper.setBusy(s, true)
	}
	s.mu.Unlock()
}

// remove lets d go.
func (s *leaseSet) remove(d *delivery) {
	s.mu.Lock()
	delete(s.held, d)
	if len(s.held) == 0 {
		s.keeper.setBusy(s, false)
	}
	s.mu.Unlock()
}

// cancelAll cancels the context of every held timer's handler.
func (s *leaseSet) cancelAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for d := range s.held {
		d.cancel()
	}
}

// abandon stops extending the leases (a stop ran out of time, or the
// topic stopped).
func (s *leaseSet) abandon() { s.cancel() }

func (s *leaseSet) abandoned() bool { return s.ctx.Err() != nil }

// beginExtend reports whether the heartbeat may extend the set now (no
// extension of it is running, and it is not abandoned); endExtend ends
// one that began.
func (s *leaseSet) beginExtend() bool {
	return !s.abandoned() && s.extending.CompareAndSwap(false, true)
}

func (s *leaseSet) endExtend() { s.extending.Store(false) }

// extend extends the leases of the held timers in one store call. It
// reports whether to extend them again at once: after a slow call
// (go-redis redialling a store that just came back) the new deadlines,
// which count from when the call was sent, are far too early, and the
// lease watch would cancel handlers the store still leases to this
// worker.
func (s *leaseSet) extend(sc *leaseScratch) (again bool) {
	ds, leases := sc.ds[:0], sc.leases[:0]
	s.mu.Lock()
	for d := range s.held {
		if !d.settled.Load() && !d.lost.Load() {
			ds = append(ds, d)
			leases = append(leases, ontimedriver.Lease{ID: d.t.ID, Token: d.t.Token})
		}
	}
	s.mu.Unlock()
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
	ctx, cancel := context.WithTimeout(s.ctx, s.lease)
	res, err := s.drv.Extend(ctx, s.topic, leases, s.lease)
	cancel()
	if err != nil {
		if !s.abandoned() {
			s.health.fail("extend", err)
		}
		return false
	}
	s.health.ok()
	next := start.Add(s.lease).UnixNano()
	again = time.Since(start) > leaseMargin(s.lease)/2
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
		s.log.Warn("ontime: leases lost (another worker holds the timers, or they were re-published); cancelling their handlers, whose results will not be acked",
			"topic", s.topic, "count", lost, "ids", append([]string(nil), sample...))
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

// expire cancels the handlers whose lease deadline (less leaseMargin) is
// past at now (UnixNano) and returns the earliest of next and the
// deadlines (less the margin) still to come.
func (s *leaseSet) expire(now, next int64, sample *[]string) int64 {
	margin := int64(leaseMargin(s.lease))
	lost := 0
	*sample = (*sample)[:0]
	s.mu.Lock()
	for d := range s.held {
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
	s.mu.Unlock()
	if lost > 0 {
		s.log.Warn("ontime: leases ran out without an extension (no answer from the store, or the heartbeat is disabled); cancelling their handlers before another worker can take the timers; their results will not be acked",
			"topic", s.topic, "count", lost, "ids", append([]string(nil), (*sample)...))
	}
	return next
}
