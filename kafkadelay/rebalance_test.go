package kafkadelay_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/kafkadelay"
)

// rebalances records the rebalance events of a republisher.
type rebalances struct {
	kafkadelay.BaseObserver
	mu     sync.Mutex
	events []kafkadelay.Rebalance
}

func (o *rebalances) Rebalanced(ev kafkadelay.Rebalance) {
	o.mu.Lock()
	o.events = append(o.events, ev)
	o.mu.Unlock()
}

// mayRepeat is the republisher's own bound on the duplicates its changes
// of owner cause: produces unacknowledged, and outputs produced whose
// offsets could not be committed.
func (o *rebalances) mayRepeat() (n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ev := range o.events {
		n += ev.Unacked + ev.Repeated
	}
	return n
}

// A second republisher joins mid-run and later leaves: nothing is lost,
// nothing is early, and the duplicates are no more than the rebalances
// reported (produces unacknowledged, outputs that could not be committed;
// usually 0: held records are handed off).
func TestRebalanceMidRun(t *testing.T) {
	c := newCluster(t)
	s := c.sink(t)
	var obs1, obs2 rebalances
	r1 := c.republisher(t, func(cfg *kafkadelay.Config) { cfg.Observer = &obs1 })
	const n = 20000
	rng := rand.New(rand.NewPCG(3, 4))
	pub := publishMany(t, c, n, func(int) time.Time {
		return time.Now().Add(2*time.Second + time.Duration(rng.IntN(6000))*time.Millisecond)
	})

	// The second one joins as soon as the records are published, works
	// until it has moved some, and leaves while records are still pending
	// (conditions, not fixed sleeps: a loaded machine stretches every
	// step, the group's rebalances included).
	r2 := c.republisher(t, func(cfg *kafkadelay.Config) { cfg.Observer = &obs2 })
	waitUntil(t, 30*time.Second, func() bool { return sumMoved(r2.Republisher) >= 100 }, func() string {
		s.mu.Lock()
		pending := n - len(s.got)
		s.mu.Unlock()
		return fmt.Sprintf("the second republisher moved %d records (%d records pending); its partitions: %+v; the first's: %+v",
			sumMoved(r2.Republisher), pending, r2.Stats(), r1.Stats())
	})
	s.mu.Lock()
	pending := n - len(s.got)
	s.mu.Unlock()
	if pending == 0 {
		t.Fatal("every record was delivered before the second republisher left: nothing pending to hand over")
	}
	r2.stop(t)
	t.Logf("the second republisher left after moving %d records (released or rerouted), with %d records still pending", sumMoved(r2.Republisher), pending)

	s.waitFor(t, 60*time.Second, "every record", func(s *sink) bool { return len(s.got) >= n })
	s.drain(t, c, 60*time.Second) // late duplicates included
	dups, lateness := s.check(t, pub)
	bound := obs1.mayRepeat() + obs2.mayRepeat()
	t.Logf("%s; duplicates %d (bound from the rebalances: %d)", latenessLine(lateness), dups, bound)
	if dups > bound {
		t.Errorf("%d duplicates, more than the %d the rebalances reported (unacknowledged + repeated)", dups, bound)
	}
	var released int64
	for _, r := range []*runner{r1, r2} {
		for _, st := range r.Stats() {
			released += st.Released
			if st.ReleasedEarly != 0 {
				t.Errorf("%s/%d: %d early releases", st.Topic, st.Partition, st.ReleasedEarly)
			}
		}
	}
	t.Logf("released %d (second republisher %d)", released, sumReleased(r2.Republisher))
	r1.stop(t)
}

// sumMoved counts the records a republisher released or rerouted: one
// that owns only the larger buckets releases nothing.
func sumMoved(r *kafkadelay.Republisher) (n int64) {
	for _, st := range r.Stats() {
		n += st.Released + st.Rerouted
	}
	return n
}

func sumReleased(r *kafkadelay.Republisher) (n int64) {
	for _, st := range r.Stats() {
		n += st.Released
	}
	return n
}
