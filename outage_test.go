package ontime

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// TestOutageSleepWakesOnRecovery: a loop backing off after a failed store
// call retries once another loop of the worker finds the store reachable
// again (after minOutageBackoff at the least), not at the end of its
// back-off; without a recovery it sleeps the whole back-off; a stop ends
// it.
func TestOutageSleepWakesOnRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h healthTracker
		h.init(slog.New(slog.NewTextHandler(io.Discard, nil)))

		// a recovery 10 ms in: woken at the floor
		back := h.recovery()
		h.fail("claim", errors.New("connection refused"))
		go func() {
			time.Sleep(10 * time.Millisecond)
			h.ok()
		}()
		start := time.Now()
		if !outageSleep(time.Second, back, nil) {
			t.Fatal("outageSleep reported a stop")
		}
		if got := time.Since(start); got != minOutageBackoff {
			t.Errorf("woken after %v, want %v (the floor: the recovery came at 10 ms)", got, minOutageBackoff)
		}

		// a recovery 300 ms in: woken then
		back = h.recovery()
		h.fail("claim", errors.New("connection refused"))
		go func() {
			time.Sleep(300 * time.Millisecond)
			h.ok()
		}()
		start = time.Now()
		outageSleep(time.Second, back, nil)
		if got := time.Since(start); got != 300*time.Millisecond {
			t.Errorf("woken after %v, want 300ms (the recovery)", got)
		}

		// no recovery: the whole back-off
		back = h.recovery()
		h.fail("claim", errors.New("connection refused"))
		start = time.Now()
		outageSleep(700*time.Millisecond, back, nil)
		if got := time.Since(start); got != 700*time.Millisecond {
			t.Errorf("slept %v, want the whole 700ms back-off", got)
		}

		// a call that succeeds while the worker is healthy closes nothing
		h.ok()
		back = h.recovery()
		h.ok()
		select {
		case <-back:
			t.Error("the recovery channel closed without an outage")
		default:
		}

		// a stop
		stop := make(chan struct{})
		go func() {
			time.Sleep(100 * time.Millisecond)
			close(stop)
		}()
		if outageSleep(time.Second, back, stop) {
			t.Error("outageSleep did not report the stop")
		}
	})
}
