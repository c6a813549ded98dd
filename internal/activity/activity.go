// Package activity keeps what a server process saw its topics do in the
// last minute: timers published through it, deliveries and their outcomes,
// and how late each timer fired. A Recorder is a hook of the ontime
// library (Config.Hooks: AfterPublishHook and DeliveryEndHook); the API
// reports its Snapshot per topic (the last_minute field of GET /v1/topics),
// the dashboard and `ontime stats` / `ontime top` show it.
//
// Memory is bounded per topic and independent of the rate: a ring of
// slotCount slots of slotWidth each, and per slot a fixed array of
// power-of-two lateness buckets. A topic with no activity for a whole
// window is forgotten.
package activity

import (
	"context"
	"math"
	"math/bits"
	"sync"
	"time"

	"github.com/ontime-go/ontime"
)

// The window: slotCount slots of slotWidth, so the last minute is seen to
// within one slot (5 s).
const (
	slotWidth = 5 * time.Second
	slotCount = 12
	// Window is the span a Snapshot covers.
	Window = slotWidth * slotCount
)

// lateBuckets are power-of-two buckets of lateness in microseconds: bucket
// i holds lateness in [2^(i-1), 2^i) µs (bucket 0: under 1 µs); the last one
// holds everything from 2^(lateBuckets-2) µs (about 18 minutes) on.
const lateBuckets = 32

type slot struct {
	n         int64 // slot number (unix time / slotWidth); 0 = unused
	published int64
	fired     int64
	acked     int64
	retried   int64
	dead      int64
	early     int64
	lateMax   time.Duration
	late      [lateBuckets]uint32
}

type ring struct {
	slots [slotCount]slot
	last  int64 // newest slot number written
}

// slotAt returns the slot for slot number n, cleared if it held an older
// one.
func (r *ring) slotAt(n int64) *slot {
	s := &r.slots[n%slotCount]
	if s.n != n {
		*s = slot{n: n}
	}
	r.last = max(r.last, n)
	return s
}

// Recorder records activity per topic. Its methods are safe for concurrent
// use. The zero value is not usable: call New.
type Recorder struct {
	now func() time.Time

	mu     sync.Mutex
	topics map[string]*ring
	swept  int64 // slot number of the last sweep
}

// New returns an empty Recorder.
func New() *Recorder {
	return &Recorder{now: time.Now, topics: map[string]*ring{}}
}

var (
	_ ontime.AfterPublishHook = (*Recorder)(nil)
	_ ontime.DeliveryEndHook  = (*Recorder)(nil)
)

func slotNumber(t time.Time) int64 { return t.UnixNano() / int64(slotWidth) }

// slot returns the topic's current slot; the caller holds mu.
func (r *Recorder) slot(topic string) *slot {
	n := slotNumber(r.now())
	if n-r.swept >= slotCount {
		r.sweep(n)
	}
	rg := r.topics[topic]
	if rg == nil {
		rg = &ring{}
		r.topics[topic] = rg
	}
	return rg.slotAt(n)
}

// sweep forgets topics with nothing in the window; the caller holds mu.
func (r *Recorder) sweep(n int64) {
	r.swept = n
	for t, rg := range r.topics {
		if n-rg.last >= slotCount {
			delete(r.topics, t)
		}
	}
}

// AfterPublish counts the timers a publish wrote.
func (r *Recorder) AfterPublish(_ context.Context, p *ontime.PublishEvent) {
	var n int64
	for _, res := range p.Results {
		if res.Err == nil {
			n++
		}
	}
	if n == 0 {
		return
	}
	r.mu.Lock()
	r.slot(p.Topic).published += n
	r.mu.Unlock()
}

// DeliveryEnd counts a delivery, its outcome and its lateness (the store's
// clock at the claim minus the due instant).
func (r *Recorder) DeliveryEnd(_ context.Context, d *ontime.Delivery, res ontime.DeliveryResult) {
	late := d.FiredAt.Sub(d.Due)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.slot(d.Topic)
	s.fired++
	switch res.Outcome {
	case ontime.OutcomeAcked:
		s.acked++
	case ontime.OutcomeRetried:
		s.retried++
	case ontime.OutcomeDeadLettered:
		s.dead++
	}
	if late < 0 {
		s.early++
		late = 0
	}
	s.lateMax = max(s.lateMax, late)
	s.late[lateBucket(late)]++
}

func lateBucket(d time.Duration) int {
	return min(bits.Len64(uint64(d/time.Microsecond)), lateBuckets-1)
}

// Stats is a topic's activity over the last Window, as this process saw
// it.
type Stats struct {
	Published int64 // timers published through this process
	Fired     int64 // deliveries started (first attempts and retries)
	Acked     int64
	Retried   int64
	Dead      int64 // dead-lettered
	// Early counts deliveries whose store clock at the claim was before the
	// due instant: a defect, and always 0.
	Early int64
	// LateP50, LateP99 and LateMax describe how late the deliveries fired
	// (zero when none did). The percentiles are estimated from
	// power-of-two buckets (interpolated within the bucket, never above
	// LateMax); LateMax is exact.
	LateP50, LateP99, LateMax time.Duration
}

// Snapshot returns the activity of every topic seen in the last Window.
func (r *Recorder) Snapshot() map[string]Stats {
	n := slotNumber(r.now())
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Stats, len(r.topics))
	for t, rg := range r.topics {
		if st, ok := rg.stats(n); ok {
			out[t] = st
		}
	}
	return out
}

// stats sums the slots of the window ending with slot n.
func (rg *ring) stats(n int64) (Stats, bool) {
	var st Stats
	var late [lateBuckets]uint64
	any := false
	for i := range rg.slots {
		s := &rg.slots[i]
		if s.n == 0 || s.n > n || n-s.n >= slotCount {
			continue
		}
		any = true
		st.Published += s.published
		st.Fired += s.fired
		st.Acked += s.acked
		st.Retried += s.retried
		st.Dead += s.dead
		st.Early += s.early
		st.LateMax = max(st.LateMax, s.lateMax)
		for b, c := range s.late {
			late[b] += uint64(c)
		}
	}
	if st.Fired > 0 {
		st.LateP50 = min(quantile(&late, uint64(st.Fired), 0.50), st.LateMax)
		st.LateP99 = min(quantile(&late, uint64(st.Fired), 0.99), st.LateMax)
	}
	return st, any
}

// quantile estimates the q-quantile of total samples in power-of-two
// buckets, interpolating linearly inside the bucket that holds it.
func quantile(late *[lateBuckets]uint64, total uint64, q float64) time.Duration {
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for b, c := range late {
		if c == 0 || seen+c < rank {
			seen += c
			continue
		}
		lo, hi := bucketBounds(b)
		frac := float64(rank-seen) / float64(c)
		return lo + time.Duration(frac*float64(hi-lo))
	}
	return 0
}

func bucketBounds(b int) (lo, hi time.Duration) {
	if b == 0 {
		return 0, time.Microsecond
	}
	return time.Duration(1<<(b-1)) * time.Microsecond, time.Duration(1<<b) * time.Microsecond
}
