package activity

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
)

// clock is a settable now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest() (*Recorder, *clock) {
	c := &clock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	r := New()
	r.now = c.now
	return r, c
}

func deliver(r *Recorder, topic string, late time.Duration, o ontime.Outcome) {
	due := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	r.DeliveryEnd(context.Background(), &ontime.Delivery{Topic: topic, Due: due, FiredAt: due.Add(late)}, ontime.DeliveryResult{Outcome: o})
}

// TestCounts: outcomes, publishes (failed results not counted), early
// deliveries and the exact maximum lateness, per topic.
func TestCounts(t *testing.T) {
	r, _ := newTest()
	r.AfterPublish(context.Background(), &ontime.PublishEvent{Topic: "a", Results: []ontime.PublishResult{{ID: "1"}, {ID: "2"}, {ID: "3", Err: errors.New("exists")}}})
	deliver(r, "a", 3*time.Millisecond, ontime.OutcomeAcked)
	deliver(r, "a", 7*time.Millisecond, ontime.OutcomeRetried)
	deliver(r, "a", 1*time.Millisecond, ontime.OutcomeDeadLettered)
	deliver(r, "a", -time.Millisecond, ontime.OutcomeAcked)
	deliver(r, "b", time.Second, ontime.OutcomeSnoozed)
	got := r.Snapshot()
	a := got["a"]
	want := Stats{Published: 2, Fired: 4, Acked: 2, Retried: 1, Dead: 1, Early: 1, LateMax: 7 * time.Millisecond}
	a.LateP50, a.LateP99 = 0, 0
	if a != want {
		t.Errorf("a: %+v, want %+v", a, want)
	}
	if b := got["b"]; b.Fired != 1 || b.Acked != 0 || b.LateMax != time.Second || b.LateP99 != time.Second {
		t.Errorf("b: %+v", b)
	}
}

// TestQuantiles: estimates stay within the bucket (a factor of two) of the
// true value and never pass the maximum.
func TestQuantiles(t *testing.T) {
	r, _ := newTest()
	for i := 1; i <= 1000; i++ {
		deliver(r, "t", time.Duration(i)*10*time.Microsecond, ontime.OutcomeAcked) // 10 µs .. 10 ms
	}
	st := r.Snapshot()["t"]
	check := func(name string, got, exact time.Duration) {
		if got < exact/2 || got > exact*2 {
			t.Errorf("%s: %v, want within a factor of 2 of %v", name, got, exact)
		}
	}
	check("p50", st.LateP50, 5*time.Millisecond)
	check("p99", st.LateP99, 9900*time.Microsecond)
	if st.LateMax != 10*time.Millisecond || st.LateP99 > st.LateMax {
		t.Errorf("max %v, p99 %v", st.LateMax, st.LateP99)
	}
	if st.LateP50 > st.LateP99 {
		t.Errorf("p50 %v above p99 %v", st.LateP50, st.LateP99)
	}
}

// TestWindow: activity leaves the snapshot once it is a window old, and a
// topic idle for a window is forgotten.
func TestWindow(t *testing.T) {
	r, c := newTest()
	deliver(r, "old", time.Millisecond, ontime.OutcomeAcked)
	c.t = c.t.Add(30 * time.Second)
	deliver(r, "new", time.Millisecond, ontime.OutcomeAcked)
	if got := r.Snapshot(); got["old"].Fired != 1 || got["new"].Fired != 1 {
		t.Errorf("after 30s: %+v", got)
	}
	c.t = c.t.Add(Window - 20*time.Second)
	got := r.Snapshot()
	if _, ok := got["old"]; ok {
		t.Errorf("a delivery a window ago is still counted: %+v", got)
	}
	if got["new"].Fired != 1 {
		t.Errorf("new: %+v", got["new"])
	}
	c.t = c.t.Add(Window)
	deliver(r, "other", time.Millisecond, ontime.OutcomeAcked) // sweeps
	r.mu.Lock()
	n := len(r.topics)
	r.mu.Unlock()
	if n != 1 {
		t.Errorf("%d topics kept after a window idle, want only the active one", n)
	}
}
