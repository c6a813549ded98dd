package kafkadelay_test

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The cluster goes away mid-run (every broker closed): the republisher
// keeps running without crashing, and stopping it returns within
// RevokeWait plus a few seconds, losing nothing it had committed.
func TestClusterGoneThenStop(t *testing.T) {
	c := newCluster(t)
	r := c.republisher(t, nil)
	start := time.Now()
	rng := rand.New(rand.NewPCG(9, 10))
	publishMany(t, c, 2000, func(int) time.Time {
		return start.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
	})
	// Mid-run: the republisher owns partitions and has committed past
	// released records (not a sleep after which, on a loaded machine, it
	// may not have joined the group yet).
	deadline := time.Now().Add(30 * time.Second)
	for !midRun(r) {
		if time.Now().After(deadline) {
			t.Fatalf("the republisher committed nothing in 30 s: %+v", r.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Close()
	time.Sleep(2 * time.Second) // the cluster stays gone: Run must not return
	select {
	case <-r.done:
		t.Fatalf("Run returned while the cluster was gone: %v", r.err)
	default:
	}
	stopped := time.Now()
	r.stop(t)
	if d := time.Since(stopped); d > 20*time.Second {
		t.Errorf("Run took %v to return after its context ended with the cluster gone", d)
	}
	t.Logf("Run returned %v after the stop, with the cluster gone", time.Since(stopped).Round(time.Millisecond))
}

// midRun reports whether r owns a partition it has committed in.
func midRun(r *runner) bool {
	for _, st := range r.Stats() {
		if st.Owned && st.Committed > 0 {
			return true
		}
	}
	return false
}
