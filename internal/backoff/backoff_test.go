package backoff

import (
	"testing"
	"time"
)

// The waits double from lo, never exceed hi, and are jittered below each
// step (many draws: some below the step, none above it).
func TestNext(t *testing.T) {
	const lo, hi = 50 * time.Millisecond, time.Second
	var wait time.Duration
	for i := range 20 {
		step := min(max(wait*2, lo), hi)
		wait = Next(wait, lo, hi)
		if wait > step || wait < step/2 || wait > hi {
			t.Fatalf("retry %d: wait %v, want within [%v, %v]", i, wait, step/2, step)
		}
	}
	if wait < hi/2 {
		t.Errorf("after 20 retries the wait is %v, want near the cap %v", wait, hi)
	}
	least, most := lo, time.Duration(0)
	for range 1000 {
		w := Next(0, lo, hi)
		least, most = min(least, w), max(most, w)
	}
	if most-least < lo/4 {
		t.Errorf("1000 first waits all within [%v, %v]: want them spread over [lo/2, lo)", least, most)
	}
	if w := Next(0, lo, lo/2); w > lo || w < lo/2 {
		t.Errorf("a cap below the floor: %v, want the floor's step", w)
	}
	if w := Next(time.Duration(1<<62), lo, hi); w > hi || w < hi/2 {
		t.Errorf("after a huge wait: %v, want the cap's step [%v, %v]", w, hi/2, hi)
	}
}
