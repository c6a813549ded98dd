package kafkadelay_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/kafkadelay"
)

// fetchFailures counts the FetchFailed events from the moment it is armed
// and closes seen once it has counted want of them.
type fetchFailures struct {
	kafkadelay.BaseObserver
	mu    sync.Mutex
	armed bool
	n     int
	want  int
	seen  chan struct{}
}

func (f *fetchFailures) arm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = true
}

func (f *fetchFailures) FetchFailed(kafkadelay.FetchFailure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return
	}
	if f.n++; f.n == f.want {
		close(f.seen)
	}
}

func (f *fetchFailures) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// TestOutageClusterGoneThenStop: the cluster goes away mid-run (every
// broker closed): the republisher keeps running without crashing (it
// reports failed polls, over and over, and Run does not return), and
// stopping it returns within RevokeWait plus a few seconds, losing nothing
// it had committed.
func TestOutageClusterGoneThenStop(t *testing.T) {
	c := newCluster(t)
	// Three failed polls after the cluster is gone: the first shows the
	// republisher saw the outage, the later ones that it polled again
	// after reporting it.
	ff := &fetchFailures{want: 3, seen: make(chan struct{})}
	r := c.republisher(t, func(cfg *kafkadelay.Config) { cfg.Observer = ff })
	start := time.Now()
	rng := rand.New(rand.NewPCG(9, 10))
	publishMany(t, c, 2000, func(int) time.Time {
		return start.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
	})
	// Mid-run: the republisher owns partitions and has committed past
	// released records (not a sleep after which, on a loaded machine, it
	// may not have joined the group yet).
	waitUntil(t, 30*time.Second, func() bool { return midRun(r) }, func() string {
		return fmt.Sprintf("the republisher committed nothing: %+v", r.Stats())
	})
	ff.arm()
	c.Close()
	select {
	case <-ff.seen:
	case <-r.done:
		t.Fatalf("Run returned while the cluster was gone: %v", r.err)
	case <-time.After(60 * time.Second):
		t.Fatalf("%d failed polls reported in 60 s with the cluster gone, want %d", ff.count(), ff.want)
	}
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
