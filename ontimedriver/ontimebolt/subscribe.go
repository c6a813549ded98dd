package ontimebolt

import (
	"context"
	"fmt"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

type subscription struct {
	topic  string
	ch     chan time.Time
	closed bool // guarded by Driver.subMu
}

// Subscribe returns a channel that receives a timer's due time when a write
// (Schedule, a Settle that retries or snoozes, ReplayDead) makes that timer
// the topic's earliest claimable one. Notifications are in-process: this
// store has a single process by construction. They are sent after the write
// is on disk, so a receiver that claims at once finds the timer.
//
// The channel has a buffer of one. When it is full, the earlier of the
// buffered and the new due time is kept; nothing blocks the writer.
//
// ctx bounds the call only, not the subscription. The channel is closed when
// the subscription ends: by cancel (safe to call more than once) or by
// Close.
func (d *Driver) Subscribe(ctx context.Context, topic string) (<-chan time.Time, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s := &subscription{topic: topic, ch: make(chan time.Time, 1)}
	d.subMu.Lock()
	defer d.subMu.Unlock()
	if d.subsClosed || d.closed.Load() {
		return nil, nil, ontimedriver.ErrClosed
	}
	set := d.subs[topic]
	if set == nil {
		set = make(map[*subscription]struct{})
		d.subs[topic] = set
	}
	set[s] = struct{}{}
	return s.ch, func() { d.unsubscribe(s) }, nil
}

func (d *Driver) unsubscribe(s *subscription) {
	d.subMu.Lock()
	defer d.subMu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	close(s.ch)
	set := d.subs[s.topic]
	delete(set, s)
	if len(set) == 0 {
		delete(d.subs, s.topic)
	}
}

func (d *Driver) closeSubscriptions() {
	d.subMu.Lock()
	defer d.subMu.Unlock()
	d.subsClosed = true
	for topic, set := range d.subs {
		for s := range set {
			s.closed = true
			close(s.ch)
		}
		delete(d.subs, topic)
	}
	for s := range d.topicSubs {
		s.closed = true
		close(s.ch)
		delete(d.topicSubs, s)
	}
}

type topicSubscription struct {
	pattern string
	ch      chan ontimedriver.TopicWake
	closed  bool // guarded by Driver.subMu
}

// SubscribeTopics is Subscribe for every topic that matches pattern (see
// ontimedriver.MatchTopic): the channel receives the topic and the due time
// of a timer whenever a Subscribe listener of that topic would be told of
// it, after the write is on disk and the topic index has it.
//
// The channel has a buffer of one, and nothing blocks the writer: when it
// is full, the buffered wake-up and the new one are merged into one that
// keeps the earlier due time, and the topic when both name the same one,
// else the empty topic ("any topic: look again", that is call DueTopics).
//
// A pattern that ontimedriver.ValidatePattern refuses is an error wrapping
// ontimedriver.ErrInvalid. ctx bounds the call only; the channel is closed
// by cancel (safe to call more than once) or by Close.
func (d *Driver) SubscribeTopics(ctx context.Context, pattern string) (<-chan ontimedriver.TopicWake, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := ontimedriver.ValidatePattern(pattern); err != nil {
		return nil, nil, fmt.Errorf("subscribe topics: %w", err)
	}
	s := &topicSubscription{pattern: pattern, ch: make(chan ontimedriver.TopicWake, 1)}
	d.subMu.Lock()
	defer d.subMu.Unlock()
	if d.subsClosed || d.closed.Load() {
		return nil, nil, ontimedriver.ErrClosed
	}
	d.topicSubs[s] = struct{}{}
	return s.ch, func() { d.unsubscribeTopics(s) }, nil
}

func (d *Driver) unsubscribeTopics(s *topicSubscription) {
	d.subMu.Lock()
	defer d.subMu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	close(s.ch)
	delete(d.topicSubs, s)
}

// wakeTopics sends w to s without blocking, merging it with a buffered
// wake-up (see SubscribeTopics). The caller holds subMu.
func wakeTopics(s *topicSubscription, w ontimedriver.TopicWake) {
	select {
	case s.ch <- w:
		return
	default:
	}
	select {
	case old := <-s.ch:
		if old.Topic != w.Topic {
			w.Topic = ""
		}
		if old.Due.Before(w.Due) {
			w.Due = old.Due
		}
	default:
	}
	select {
	case s.ch <- w:
	default:
	}
}

// notify tells the topic's subscribers that a timer is due at us. It never
// blocks: a full buffer keeps the earlier of the two instants.
func (d *Driver) notify(topic string, us int64) {
	at := fromMicros(us)
	d.subMu.Lock()
	defer d.subMu.Unlock()
	for s := range d.topicSubs {
		if ontimedriver.MatchTopic(s.pattern, topic) {
			wakeTopics(s, ontimedriver.TopicWake{Topic: topic, Due: at})
		}
	}
	for s := range d.subs[topic] {
		select {
		case s.ch <- at:
			continue
		default:
		}
		v := at
		select {
		case old := <-s.ch:
			if old.Before(v) {
				v = old
			}
		default:
		}
		select {
		case s.ch <- v:
		default:
		}
	}
}

// wake records the topic's head before a write and reports, after it,
// whether the head moved earlier (or appeared): then subscribers are told.
type wake struct {
	before    int64
	hadBefore bool
	at        int64
	fire      bool
}

func (w *wake) start(tb *topicBuckets) {
	*w = wake{}
	w.before, w.hadBefore = tb.head()
}

func (w *wake) finish(tb *topicBuckets) {
	after, ok := tb.head()
	if ok && (!w.hadBefore || after < w.before) {
		w.at, w.fire = after, true
	}
}
