package drivertest

import (
	"context"
	"fmt"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// noteTimeout bounds the wait for a wake notification.
const noteTimeout = time.Second

func subscribeCases() []testCase {
	return []testCase{
		{"EarlierThanHead", testSubscribeEarlier},
		{"OtherTopics", testSubscribeOtherTopics},
		{"Cancel", testSubscribeCancel},
		{"NeverBlocks", testSubscribeNeverBlocks},
	}
}

// subscribe subscribes with d and cancels at the end of the test (a second
// cancel if the case cancels too, which must be harmless).
func (e *env) subscribe(d ontimedriver.Driver, topic string) (<-chan time.Time, func()) {
	e.t.Helper()
	ch, cancel, err := d.Subscribe(e.ctx, topic)
	if err != nil {
		e.t.Fatalf("Subscribe(%q): %v", topic, err)
	}
	if ch == nil || cancel == nil {
		e.t.Fatalf("Subscribe(%q): nil channel or cancel func", topic)
	}
	e.t.Cleanup(cancel)
	return ch, cancel
}

// waitNote waits for a notification carrying due (or zero: unknown). Values in
// stale, from earlier schedules, are skipped.
func (e *env) waitNote(ch <-chan time.Time, due time.Time, stale []time.Time, what string) {
	e.t.Helper()
	timeout := time.After(noteTimeout)
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				e.t.Fatalf("%s: subscription channel closed", what)
			}
			if v.IsZero() || near(v, due, time.Millisecond) {
				return
			}
			known := false
			for _, s := range stale {
				known = known || near(v, s, time.Millisecond)
			}
			if !known {
				e.t.Errorf("%s: notification %s, want the new due %s", what, ts(v), ts(due))
			}
		case <-timeout:
			e.t.Fatalf("%s: no notification within %v", what, noteTimeout)
		}
	}
}

// wantNoNote checks that nothing arrives on ch for a while.
func (e *env) wantNoNote(ch <-chan time.Time, wait time.Duration, what string) {
	e.t.Helper()
	select {
	case v := <-ch:
		e.t.Errorf("%s: unexpected notification %s", what, ts(v))
	case <-time.After(wait):
	}
}

// testSubscribeEarlier: a timer that becomes the head of its topic wakes a
// subscriber (on a peer, as another worker process would be) with its due.
func testSubscribeEarlier(e *env) {
	const topic = "subscribe.earlier"
	ch, _ := e.subscribe(e.peer(), topic)
	now := e.now().Truncate(time.Millisecond)
	r1 := e.put(topic, dueAt("first", now.Add(time.Hour), "x"))
	e.waitNote(ch, r1[0].Due, nil, "first timer of an empty topic")
	r2 := e.put(topic, dueAt("later", now.Add(2*time.Hour), "x"))
	r3 := e.put(topic, dueAt("earlier", now.Add(30*time.Minute), "x"))
	e.waitNote(ch, r3[0].Due, []time.Time{r1[0].Due, r2[0].Due}, "timer earlier than the head")
	r4 := e.schedule(topic, ontimedriver.IfAbsent, dueAt("earliest", now.Add(10*time.Minute), "x"))
	e.waitNote(ch, r4[0].Due, []time.Time{r1[0].Due, r2[0].Due, r3[0].Due}, "IfAbsent timer earlier than the head")
	r5 := e.put(topic, dueNow("due-now", "x"))
	e.waitNote(ch, r5[0].Due, []time.Time{r1[0].Due, r2[0].Due, r3[0].Due, r4[0].Due}, "timer due now")
}

// testSubscribeOtherTopics: notifications stay within their topic, also for
// topic names that extend one another.
func testSubscribeOtherTopics(e *env) {
	const topic = "subscribe.x"
	others := []string{"subscribe.x2", "subscribe.x:y", "subscribe", "subscribe.xx"}
	peer := e.peer()
	chX, _ := e.subscribe(peer, topic)
	chs := make([]<-chan time.Time, len(others))
	for i, o := range others {
		chs[i], _ = e.subscribe(peer, o)
	}
	for i, o := range others {
		res := e.put(o, dueIn("id", time.Hour, "x"))
		e.waitNote(chs[i], res[0].Due, nil, "timer in "+o)
	}
	e.wantNoNote(chX, 100*time.Millisecond, fmt.Sprintf("%s after timers in %q", topic, others))
	res := e.put(topic, dueIn("id", time.Hour, "x"))
	e.waitNote(chX, res[0].Due, nil, "timer in "+topic)
	for i, o := range others {
		e.wantNoNote(chs[i], 0, o+" after a timer in "+topic)
	}
}

// testSubscribeCancel: cancel ends one subscription, is safe to call twice,
// and leaves other subscriptions of the topic working.
func testSubscribeCancel(e *env) {
	const topic = "subscribe.cancel"
	_, cancel1 := e.subscribe(e.d, topic)
	ch2, cancel2 := e.subscribe(e.d, topic)
	cancel1()
	cancel1()
	res := e.put(topic, dueIn("a", time.Hour, "x"))
	e.waitNote(ch2, res[0].Due, nil, "the subscription left after cancelling another")
	cancel2()
	cancel2()
	// Publishing to a topic without subscribers still works. On Redis
	// Cluster a notification travels between nodes asynchronously, so the
	// one for "b" may still reach the next subscription: allowed as stale
	// (a notification only means "re-check").
	b := e.put(topic, dueIn("b", time.Minute, "x"))
	ch3, _ := e.subscribe(e.d, topic)
	res = e.put(topic, dueIn("c", time.Second, "x"))
	e.waitNote(ch3, res[0].Due, []time.Time{b[0].Due}, "a new subscription after cancelling the old ones")
}

// testSubscribeNeverBlocks: a subscriber that never reads does not block
// Schedule; the store drops notifications instead.
func testSubscribeNeverBlocks(e *env) {
	const topic = "subscribe.never-blocks"
	const n = 100
	e.subscribe(e.d, topic)
	e.subscribe(e.peer(), topic)
	now := e.now().Truncate(time.Millisecond)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		for i := range n {
			// Each timer is earlier than the previous: a new head every time.
			t := dueAt(fmt.Sprintf("t%03d", i), now.Add(time.Hour-time.Duration(i)*time.Second), "x")
			if _, err := e.d.Schedule(ctx, topic, []ontimedriver.NewTimer{t}, ontimedriver.Upsert); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			e.t.Fatalf("Schedule: %v", err)
		}
	case <-time.After(2 * waitTimeout):
		e.t.Fatal("100 schedules with an unread subscription did not finish: Schedule blocks on the subscriber")
	}
	e.wantCounts(topic, n, 0, 0)
}
