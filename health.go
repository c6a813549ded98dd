package ontime

import (
	"log/slog"
	"sync"
	"time"
)

// Health is a Worker's view of its store.
//
// Two conditions are tracked apart, and each is logged once when it begins
// and once when it ends, never per failed call:
//
//   - Healthy: the store answers. It turns false when a claim, a settle or a
//     lease extension fails (store unreachable, timed out), and true again at
//     the next one that succeeds. While it is false the worker backs off and
//     retries on its own.
//   - Degraded: wake-up notifications are unavailable for at least one topic
//     (Subscribe fails; retried every second). The worker still claims every
//     due timer by polling, so nothing is lost, but a timer published for an
//     earlier instant than the topic's next one can be up to
//     TopicOptions.PollInterval late. A worker can be Healthy and Degraded
//     at once: Degraded never changes Healthy.
type Health struct {
	// Healthy is false while the store is unreachable.
	Healthy bool
	// Since is when Healthy last changed.
	Since time.Time
	// LastError is the error that made the worker unhealthy (empty while
	// Healthy).
	LastError string
	// Degraded is true while some topic has no wake-up subscription.
	Degraded bool
	// DegradedSince is when Degraded last changed.
	DegradedSince time.Time
	// DegradedError is the last subscribe error, with its topic (empty
	// while not Degraded).
	DegradedError string
}

// Health reports whether the worker currently reaches its store, and
// whether it gets wake-up notifications (see [Health]).
func (w *Worker) Health() Health { return w.health.get() }

type healthTracker struct {
	mu  sync.Mutex
	log *slog.Logger
	h   Health
	// unsubscribed holds the topics whose last Subscribe failed.
	unsubscribed map[string]bool
	// back is closed, and replaced, when the store becomes reachable
	// again: the worker's loops waiting out an outage retry at once.
	back chan struct{}
}

func (t *healthTracker) init(log *slog.Logger) {
	t.log = log
	now := time.Now()
	t.h = Health{Healthy: true, Since: now, DegradedSince: now}
	t.unsubscribed = map[string]bool{}
	t.back = make(chan struct{})
}

// outageSleep waits out one back-off d of a loop that failed a store call,
// and reports false when stop closes first. It also ends when back (the
// healthTracker's recovery channel, taken before the call failed) closes,
// once minOutageBackoff has passed: another loop of the worker found the
// store reachable again, so this one retries at once instead of finishing
// its back-off (after a failover the first loop to get through wakes the
// others); the floor keeps a loop whose own calls still fail (its shard's
// master down while the others answer) from retrying at the rate the
// others succeed.
func outageSleep(d time.Duration, back <-chan struct{}, stop <-chan struct{}) bool {
	t := time.NewTimer(min(d, minOutageBackoff))
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
		return false
	}
	if d <= minOutageBackoff {
		return true
	}
	t.Reset(d - minOutageBackoff)
	select {
	case <-t.C:
	case <-back:
	case <-stop:
		return false
	}
	return true
}

// recovery returns a channel closed when the store is next found
// reachable after an outage (any of the worker's calls succeeds).
func (t *healthTracker) recovery() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.back
}

func (t *healthTracker) get() Health {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.h
}

// fail records a store error; it logs only on the change of state.
func (t *healthTracker) fail(op string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.h.LastError = err.Error()
	if t.h.Healthy {
		t.h.Healthy = false
		t.h.Since = time.Now()
		t.log.Error("ontime: store unreachable; backing off", "op", op, "err", err)
	}
}

// ok records a store call that succeeded; it logs only on the change of
// state.
func (t *healthTracker) ok() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.h.Healthy {
		t.log.Info("ontime: store reachable again", "down_for", time.Since(t.h.Since).Round(time.Millisecond).String())
		t.h.Healthy, t.h.Since, t.h.LastError = true, time.Now(), ""
		close(t.back)
		t.back = make(chan struct{})
	}
}

// subscribeFailed records that topic has no wake-up subscription; it logs
// only when the worker becomes degraded.
func (t *healthTracker) subscribeFailed(topic string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unsubscribed[topic] = true
	t.h.DegradedError = topic + ": " + err.Error()
	if !t.h.Degraded {
		t.h.Degraded = true
		t.h.DegradedSince = time.Now()
		t.log.Warn("ontime: cannot subscribe to wake-up notifications; still serving timers by polling every PollInterval, retrying the subscription",
			"topic", topic, "err", err)
	}
}

// subscribed records that topic has its wake-up subscription; it logs only
// when the last degraded topic recovers.
func (t *healthTracker) subscribed(topic string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.unsubscribed[topic] {
		return
	}
	delete(t.unsubscribed, topic)
	if len(t.unsubscribed) == 0 && t.h.Degraded {
		t.log.Info("ontime: wake-up notifications restored", "degraded_for", time.Since(t.h.DegradedSince).Round(time.Millisecond).String())
		t.h.Degraded, t.h.DegradedSince, t.h.DegradedError = false, time.Now(), ""
	}
}
