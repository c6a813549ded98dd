package ontimebolt

import (
	"context"
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
}

// notify tells the topic's subscribers that a timer is due at us. It never
// blocks: a full buffer keeps the earlier of the two instants.
func (d *Driver) notify(topic string, us int64) {
	at := fromMicros(us)
	d.subMu.Lock()
	defer d.subMu.Unlock()
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
