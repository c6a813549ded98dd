package kafkadelay_test

import (
	"math/rand/v2"
	"testing"
	"time"
)

// 20,000 records with random delays over every bucket, some past the
// largest and some already due: all delivered, none before its due
// instant.
func TestDeliversEveryRecordNeverEarly(t *testing.T) {
	c := newCluster(t)
	s := c.sink(t)
	r := c.republisher(t, nil)
	const n = 20000
	start := time.Now()
	rng := rand.New(rand.NewPCG(1, 2))
	pub := publishMany(t, c, n, func(i int) time.Time {
		switch i % 20 {
		case 0:
			return start.Add(-time.Duration(rng.IntN(1000)) * time.Millisecond) // already due
		case 1:
			return time.Now().Add(2*time.Second + time.Duration(rng.IntN(4000))*time.Millisecond) // past the largest bucket
		}
		return time.Now().Add(time.Duration(rng.IntN(2500)) * time.Millisecond)
	})
	t.Logf("published %d records in %v", n, time.Since(start).Round(time.Millisecond))
	s.waitFor(t, 90*time.Second, "every record", func(s *sink) bool { return len(s.got) >= n })
	dups, lateness := s.check(t, pub)
	t.Logf("%s; duplicates %d", latenessLine(lateness), dups)
	if dups != 0 {
		t.Errorf("%d duplicates without any failure or rebalance", dups)
	}
	var early int64
	for _, st := range r.Stats() {
		early += st.ReleasedEarly
	}
	if early != 0 {
		t.Errorf("the republisher counted %d early releases", early)
	}
	r.stop(t)
}
