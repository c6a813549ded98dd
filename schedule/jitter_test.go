package schedule

import (
	"fmt"
	"testing"
	"time"
)

func TestJitterFor(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	if d := JitterFor("report", tick, 0); d != 0 {
		t.Fatalf("zero window: %v, want 0", d)
	}
	if d := JitterFor("report", tick, -time.Second); d != 0 {
		t.Fatalf("negative window: %v, want 0", d)
	}
	// Deterministic per (id, tick), whatever the tick's zone.
	a := JitterFor("report", tick, time.Hour)
	if b := JitterFor("report", tick.In(mustZone(t, "Asia/Tokyo")), time.Hour); a != b {
		t.Fatalf("same (id, tick) gave %v and %v", a, b)
	}
	// In [0, window), and spread: 4,000 schedules of one hourly tick over a
	// 10-minute window fill ten 1-minute buckets within ±25% of the mean.
	const n, buckets = 4000, 10
	window := 10 * time.Minute
	var count [buckets]int
	seen := map[time.Duration]bool{}
	for i := range n {
		d := JitterFor(fmt.Sprintf("tenant-%d", i), tick, window)
		if d < 0 || d >= window {
			t.Fatalf("jitter %v outside [0, %v)", d, window)
		}
		seen[d] = true
		count[d/time.Minute]++
	}
	for b, c := range count {
		if c < n/buckets*3/4 || c > n/buckets*5/4 {
			t.Fatalf("bucket %d holds %d of %d jitters: %v", b, c, n, count)
		}
	}
	if len(seen) < n*99/100 {
		t.Fatalf("only %d distinct jitters for %d ids", len(seen), n)
	}
	// One schedule's successive ticks get different jitters.
	distinct := map[time.Duration]bool{}
	for k := range 100 {
		distinct[JitterFor("report", tick.Add(time.Duration(k)*time.Hour), window)] = true
	}
	if len(distinct) < 95 {
		t.Fatalf("100 ticks of one schedule got %d distinct jitters", len(distinct))
	}
}
