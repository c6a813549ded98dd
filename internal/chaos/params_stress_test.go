//go:build linux && stress

package chaos

import "time"

// The stress run (go test -tags stress): the same scenarios, longer.
var (
	killDefaults = killParams{
		timers: 12000, spread: 20 * time.Second, kills: 25, workers: 3,
		conc: 16, lease: time.Second, work: 30 * time.Millisecond,
	}
)

// The outages last at least lease + two call timeouts, as in the default
// run (params_default_test.go says why).
var (
	restartDefaults = outageParams{
		workers: 3, conc: 16, lease: time.Second, work: 50 * time.Millisecond,
		cycles: 6, outage: 5 * time.Second, between: 2 * time.Second,
	}
	pauseDefaults = outageParams{
		workers: 3, conc: 16, lease: time.Second, work: 50 * time.Millisecond,
		cycles: 5, outage: 5 * time.Second, between: 2 * time.Second,
	}
)

// The failover runs of issue 24: 20,000 timers published over a minute.
var failoverDefaults = failoverParams{
	timers: 20000, spread: time.Minute, minDelay: time.Second, maxDelay: 4 * time.Second,
	publishers: 256, workers: 3, conc: 16, lease: 2 * time.Second, waitTimeout: 500 * time.Millisecond,
}
