//go:build stress

package kafkadelay_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ontime-go/ontime/kafkadelay"
)

// A minute of churn: 100,000 records with delays up to 20s, a republisher
// that stays, others joining and leaving every few seconds, and windows in
// which every produce to a destination fails. Nothing is lost, nothing is
// early, and the duplicates are no more than the rebalances reported
// (produces unacknowledged, outputs whose offsets could not be committed
// behind a failing produce).
func TestSoakChurnAndFaults(t *testing.T) {
	c := newCluster(t)
	s := c.sink(t)
	var obs []*rebalances
	newObs := func() *rebalances { o := &rebalances{}; obs = append(obs, o); return o }
	stay := c.republisher(t, func(cfg *kafkadelay.Config) { cfg.Observer = newObs() })
	const n = 100000
	start := time.Now()
	rng := rand.New(rand.NewPCG(11, 12))
	pub := publishMany(t, c, n, func(int) time.Time {
		return time.Now().Add(time.Duration(rng.IntN(20000)) * time.Millisecond)
	})
	faults := 0
	var guests []*runner
	for i := 0; time.Since(start) < 24*time.Second; i++ {
		switch i % 4 {
		case 0:
			guests = append(guests, c.republisher(t, func(cfg *kafkadelay.Config) { cfg.Observer = newObs() }))
		case 1:
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: destinations[rng.IntN(len(destinations))],
				Err: kerr.UnknownServerError, Count: -1})
			time.Sleep(time.Second)
			faults += h.Hits()
			h.Remove()
		case 2:
			if len(guests) > 0 {
				guests[0].stop(t)
				guests = guests[1:]
			}
		}
		time.Sleep(1500 * time.Millisecond)
	}
	for _, g := range guests {
		g.stop(t)
	}
	s.waitFor(t, 2*time.Minute, "every record", func(s *sink) bool { return len(s.got) >= n })
	s.drain(t, c, 2*time.Minute) // late duplicates included
	dups, lateness := s.check(t, pub)
	bound := 0
	for _, o := range obs {
		bound += o.mayRepeat()
	}
	t.Logf("soak: %d records, %d republishers, %d faulted produce requests; %s; duplicates %d (bound reported by the rebalances %d)",
		n, len(obs), faults, latenessLine(lateness), dups, bound)
	if dups > bound {
		t.Errorf("%d duplicates, more than the %d the rebalances reported (unacknowledged + repeated)", dups, bound)
	}
	stay.stop(t)
}
