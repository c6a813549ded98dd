//go:build linux && !stress

package chaos

import "time"

// The default run: seconds per scenario.
var (
	killDefaults = killParams{
		timers: 2000, spread: 3 * time.Second, kills: 4, workers: 3,
		conc: 8, lease: time.Second, work: 30 * time.Millisecond,
	}
)

// The outages last 3.5 s: a worker only learns of one when a store call
// times out (2 s for this lease, plus up to a poll interval before it
// calls), so a shorter one may pass unnoticed; see runOutage. The second
// past that bound is for a loaded machine: with 2.5 s (the bound plus
// 300 ms) a worker of TestRedisPause once stayed healthy through the
// pause while two other processes kept both cores busy.
var (
	restartDefaults = outageParams{
		workers: 2, conc: 16, lease: time.Second, work: 50 * time.Millisecond,
		cycles: 1, outage: 3500 * time.Millisecond, between: time.Second,
	}
	pauseDefaults = outageParams{
		workers: 2, conc: 16, lease: time.Second, work: 50 * time.Millisecond,
		cycles: 1, outage: 3500 * time.Millisecond, between: time.Second,
	}
)
