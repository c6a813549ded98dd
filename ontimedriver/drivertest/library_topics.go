package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
)

// Library cases of ontime.HandleTopics: one loop serving many topics from
// the store's topic index (ontimedriver.TopicIndex).

// topicIndexOf returns the driver's topic index, or nil (after checking
// that HandleTopics refuses such a store) when it keeps none.
func topicIndexOf(l *lib) ontimedriver.TopicIndex {
	l.t.Helper()
	idx, ok := ontimedriver.As[ontimedriver.TopicIndex](l.d)
	if ok && idx.TopicIndexed() {
		return idx
	}
	w := ontime.NewWorker(l.client(nil), nil)
	err := ontime.HandleTopics(w, "*", func(context.Context, *ontime.Message[string]) error { return nil }, nil)
	if !errors.Is(err, ontime.ErrInvalid) {
		l.t.Errorf("HandleTopics on a store without a topic index: %v, want ErrInvalid", err)
	}
	if ok {
		if _, err := idx.DueTopics(l.ctx, "*", 0, 10); !errors.Is(err, ontimedriver.ErrNoTopicIndex) {
			l.t.Errorf("DueTopics on a store without a topic index: %v, want ErrNoTopicIndex", err)
		}
	}
	l.t.Skip("the store keeps no topic index (checked: HandleTopics refuses it with ErrInvalid)")
	return nil
}

// libTopicsPattern: a pattern worker delivers the timers of every matching
// topic once, never early, with Message.Topic set; a topic with its own
// handler and a topic that does not match are not its business; every
// topic leaves the index once it is empty.
func libTopicsPattern(l *lib) {
	idx := topicIndexOf(l)
	c := l.client(nil)
	col := collect[string](l, nil)
	exact := collect[string](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error {
		if err := ontime.HandleTopics(w, "tenant-*", col.handle, &ontime.TopicOptions{PollInterval: time.Minute}); err != nil {
			return err
		}
		if err := ontime.HandleTopics(w, "tenant-*", col.handle, nil); !errors.Is(err, ontime.ErrInvalid) {
			return fmt.Errorf("a pattern registered twice: %v, want ErrInvalid", err)
		}
		return ontime.Handle(w, "tenant-vip", exact.handle, nil)
	})
	dues := map[string]time.Time{}
	topicOf := map[string]string{}
	for i := range 30 {
		topic := fmt.Sprintf("tenant-%d", i%10)
		id, due := l.publishDue(c, topic, ontime.Timer{ID: fmt.Sprintf("t%d", i), Body: "x", Delay: time.Duration(i%6) * 80 * time.Millisecond})
		dues[id], topicOf[id] = due, topic
	}
	vip := l.publish(c, "tenant-vip", "vip")
	other := l.publish(c, "other", "not mine")
	col.wait(len(dues), waitTimeout, "every tenant timer")
	exact.waitOf(vip, 1, waitTimeout, "the tenant-vip timer, by its own handler")
	for _, s := range col.all() {
		due, ok := dues[s.Msg.ID]
		if !ok {
			l.t.Errorf("the pattern handler got %s of topic %q", s.Msg.ID, s.Msg.Topic)
			continue
		}
		wantOnTime(l, s.Msg.ID, s, due)
		if s.Msg.Topic != topicOf[s.Msg.ID] {
			l.t.Errorf("%s: Message.Topic %q, want %q", s.Msg.ID, s.Msg.Topic, topicOf[s.Msg.ID])
		}
	}
	for i := range 10 {
		l.waitEmpty(c, fmt.Sprintf("tenant-%d", i), waitTimeout)
	}
	time.Sleep(300 * time.Millisecond)
	if n := col.count(); n != len(dues) {
		l.t.Errorf("%d deliveries of %d timers", n, len(dues))
	}
	if _, err := c.Get(l.ctx, "other", other); err != nil {
		l.t.Errorf("the timer of a topic that matches no pattern: %v, want it left alone", err)
	}
	// Emptied topics leave the index.
	WaitFor(l.t, waitTimeout, func() bool {
		res, err := idx.DueTopics(l.ctx, "tenant-*", 0, 100)
		if err != nil {
			l.t.Fatalf("DueTopics: %v", err)
		}
		return len(res.Topics) == 0 && res.Next.IsZero()
	}, "the emptied tenant topics to leave the index")
}

// libTopicsWake: an idle pattern worker with a long poll interval
// delivers a due-now timer of a new topic at once (a wake-up), and a
// timer due a little later on time (the index's next instant), not at its
// next poll.
func libTopicsWake(l *lib) {
	topicIndexOf(l)
	c := l.client(nil)
	col := collect[string](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.HandleTopics(w, "*", col.handle, &ontime.TopicOptions{PollInterval: 30 * time.Second})
	})
	time.Sleep(300 * time.Millisecond) // asleep for its poll interval
	now := l.now()
	id := l.publish(c, "fresh-1", "now")
	col.waitOf(id, 1, waitTimeout, "a due-now timer on a new topic")
	if lat := col.of(id)[0].StoreNow.Sub(now); lat > time.Second {
		l.t.Errorf("an idle pattern worker delivered a due-now timer %v after it was published, want well under its 30s poll interval", lat)
	}
	// Published before the worker knew of it: due in 1.5 s, on a topic
	// with no other timer. The loop learns of it by the wake-up and then
	// from the index.
	_, due := l.publishDue(c, "fresh-2", ontime.Timer{ID: "later", Body: "later", Delay: 1500 * time.Millisecond})
	col.waitOf("later", 1, waitTimeout+2*time.Second, "a timer due in 1.5s on an idle worker")
	s := col.of("later")[0]
	wantOnTime(l, "later", s, due)
	if late := s.StoreNow.Sub(due); late > time.Second {
		l.t.Errorf("a timer due in 1.5s delivered %v late by an idle pattern worker (poll interval 30s)", late)
	}
}

// libTopicsRetry: a retry longer than the poll interval lets the topic go
// idle; the index (written by the settle) brings it back when the retry
// is due, never before.
func libTopicsRetry(l *lib) {
	topicIndexOf(l)
	c := l.client(nil)
	var mu sync.Mutex
	var failedAt time.Time
	col := collect[string](l, func(_ context.Context, m *ontime.Message[string], nth int) error {
		if nth == 0 {
			now, err := l.storeNow()
			if err != nil {
				return err
			}
			mu.Lock()
			failedAt = now
			mu.Unlock()
			return ontime.RetryAfter(1500*time.Millisecond, errors.New("not yet"))
		}
		return nil
	})
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.HandleTopics(w, "retry-*", col.handle, &ontime.TopicOptions{PollInterval: 200 * time.Millisecond})
	})
	id := l.publish(c, "retry-a", "x")
	col.waitOf(id, 2, waitTimeout+2*time.Second, "the retried timer")
	s := col.of(id)[1]
	mu.Lock()
	due := failedAt.Add(1500 * time.Millisecond)
	mu.Unlock()
	wantOnTime(l, "retry", s, due)
	if late := s.StoreNow.Sub(due); late > time.Second {
		l.t.Errorf("a retry due in 1.5s delivered %v late", late)
	}
	l.waitEmpty(c, "retry-a", waitTimeout)
}

// libTopicsTwoWorkers: two pattern workers (the second on its own driver,
// as a second process) share 20 topics; each timer is delivered once.
func libTopicsTwoWorkers(l *lib) {
	topicIndexOf(l)
	c := l.client(nil)
	col := collect[string](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error { return ontime.HandleTopics(w, "*", col.handle, nil) })
	l.start(l.peerClient(), nil, func(w *ontime.Worker) error { return ontime.HandleTopics(w, "*", col.handle, nil) })
	var timers []string
	for i := range 200 {
		topic := fmt.Sprintf("shared-%d", i%20)
		timers = append(timers, l.publish(c, topic, "x", ontime.In(time.Duration(i%5)*50*time.Millisecond)))
	}
	col.wait(len(timers), waitTimeout, "every timer")
	time.Sleep(300 * time.Millisecond)
	for _, id := range timers {
		if n := col.countOf(id); n != 1 {
			l.t.Errorf("%s delivered %d times, want 1", id, n)
		}
	}
}

// libTopicsLongHandler: a handler that runs past its lease several times
// (the heartbeat extends it) on a topic served by HandleTopics, whose
// claim loop ends while the handler runs: delivered once, and the topic's
// next timer, due while the handler runs, is delivered on time.
func libTopicsLongHandler(l *lib) {
	topicIndexOf(l)
	c := l.client(nil)
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], _ int) error {
		if m.Body != "long" {
			return nil
		}
		select {
		case <-time.After(2500 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.HandleTopics(w, "long-*", col.handle, &ontime.TopicOptions{Lease: time.Second, PollInterval: 200 * time.Millisecond})
	})
	id := l.publish(c, "long-a", "long")
	_, due := l.publishDue(c, "long-a", ontime.Timer{ID: "next", Body: "next", Delay: 800 * time.Millisecond})
	col.waitOf("next", 1, waitTimeout, "the topic's next timer while a long handler runs")
	wantOnTime(l, "next", col.of("next")[0], due)
	if late := col.of("next")[0].StoreNow.Sub(due); late > time.Second {
		l.t.Errorf("the next timer was delivered %v late while a long handler ran", late)
	}
	l.waitEmpty(c, "long-a", waitTimeout+3*time.Second)
	time.Sleep(1500 * time.Millisecond) // past another lease: no second delivery
	if n := col.countOf(id); n != 1 {
		l.t.Errorf("the long handler's timer was delivered %d times, want 1 (its lease was extended)", n)
	}
}
