package kafkadelay_test

import (
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

func (o *rebalances) unacked() (n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ev := range o.events {
		n += ev.Unacked
	}
	return n
}

// A second republisher joins mid-run and later leaves: nothing is lost,
// nothing is early, and the duplicates are no more than the produces that
// were unacknowledged when partitions changed hands.
func TestRebalanceMidRun(t *testing.T) {
	c := newCluster(t)
	s := c.sink(t)
	var obs1, obs2 rebalances
	r1 := c.republisher(t, func(cfg *kafkadelay.Config) { cfg.Observer = &obs1 })
	const n = 20000
	start := time.Now()
	rng := rand.New(rand.NewPCG(3, 4))
	pub := publishMany(t, c, n, func(int) time.Time {
		return start.Add(500*time.Millisecond + time.Duration(rng.IntN(5000))*time.Millisecond)
	})

	time.Sleep(1500 * time.Millisecond)
	r2 := c.republisher(t, func(cfg *kafkadelay.Config) { cfg.Observer = &obs2 })
	// Wait until the second one owns partitions, let it work, then stop it.
	deadline := time.Now().Add(20 * time.Second)
	for owned(r2.Republisher) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second republisher never got a partition")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	r2.stop(t)

	s.waitFor(t, 60*time.Second, "every record", func(s *sink) bool { return len(s.got) >= n })
	time.Sleep(300 * time.Millisecond) // let late duplicates arrive
	dups, lateness := s.check(t, pub)
	unacked := obs1.unacked() + obs2.unacked()
	t.Logf("%s; duplicates %d (produces unacknowledged at rebalances: %d)", latenessLine(lateness), dups, unacked)
	if dups > unacked {
		t.Errorf("%d duplicates, more than the %d produces in flight at the rebalances", dups, unacked)
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
	if r2released := sumReleased(r2.Republisher); r2released == 0 {
		t.Error("the second republisher released nothing while it owned partitions")
	}
	t.Logf("released %d (second republisher %d)", released, sumReleased(r2.Republisher))
	r1.stop(t)
}

func owned(r *kafkadelay.Republisher) (n int) {
	for _, st := range r.Stats() {
		if st.Owned {
			n++
		}
	}
	return n
}

func sumReleased(r *kafkadelay.Republisher) (n int64) {
	for _, st := range r.Stats() {
		n += st.Released
	}
	return n
}
