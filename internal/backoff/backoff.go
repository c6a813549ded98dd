// Package backoff computes the waits between the retries of something
// that keeps failing (a store outage, a lost subscription, a lost
// connection): doubling from a floor up to a cap, each wait a random 50 to
// 100 % of its step, so that the many workers or connections that failed
// together do not all retry in step. It is the one back-off of the ontime
// module and of the modules beside it (they can import it: it sits under
// their common path).
package backoff

import (
	"math/rand/v2"
	"time"
)

// Next returns the wait before the next retry, given the previous wait
// (zero before the first retry, and again after a success): twice prev,
// at least lo and at most hi (a hi below lo counts as lo), times a random
// factor in [0.5, 1). So the first wait is about lo, the waits double,
// and none exceeds hi.
//
//	var wait time.Duration
//	for {
//		if err := try(); err == nil {
//			wait = 0
//			...
//		}
//		wait = backoff.Next(wait, 50*time.Millisecond, time.Second)
//		time.Sleep(wait)
//	}
func Next(prev, lo, hi time.Duration) time.Duration {
	hi = max(hi, lo)
	d := hi
	if prev < hi/2 { // and prev*2 cannot overflow
		d = max(prev*2, lo)
	}
	return time.Duration(float64(d) * (0.5 + 0.5*rand.Float64()))
}
