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

// The outages last 5 s: a worker only learns of one when a store call
// times out (2 s for this lease, plus up to a poll interval before it
// calls), so a shorter one may pass unnoticed; see runOutage. A worker
// may make its next call that can time out only when its leases (1 s)
// have run out, and that call must time out inside the outage too: lease
// + two call timeouts. With
// 2.5 s and with 3.5 s a worker of TestRedisPause or TestRedisRestart
// stayed healthy through the outage while two other processes kept both
// cores busy (its leases ran out, its next claim was answered when the
// store came back).
var (
	restartDefaults = outageParams{
		workers: 2, conc: 16, lease: time.Second, work: 50 * time.Millisecond,
		cycles: 1, outage: 5 * time.Second, between: time.Second,
	}
	pauseDefaults = outageParams{
		workers: 2, conc: 16, lease: time.Second, work: 50 * time.Millisecond,
		cycles: 1, outage: 5 * time.Second, between: time.Second,
	}
)

// The failover run of the default run (TestFailoverClusterWaitReplicas):
// a shorter window and fewer timers than the stress run's minute and
// 20,000 (params_stress_test.go); the window leaves several seconds after
// the promotion (about 4 s after the kill, in the middle). The
// publishers are many so that publishes blocked by the outage (up to the
// 2 s call timeout, or WaitReplicas' timeout while the promoted master has
// no replica yet) do not hold back the others.
var failoverDefaults = failoverParams{
	timers: 3000, spread: 12 * time.Second, minDelay: time.Second, maxDelay: 4 * time.Second,
	publishers: 128, workers: 3, conc: 16, lease: 2 * time.Second, waitTimeout: 500 * time.Millisecond,
}
