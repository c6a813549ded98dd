package ontimeredis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
)

// hub multiplexes every Subscribe and SubscribeTopics of a Driver over one
// pub/sub connection (SUBSCRIBE per topic, PSUBSCRIBE per topic pattern).
// Scripts PUBLISH the new head's due time (ms) on the topic's wake channel
// when a schedule, retry, snooze or replay makes a timer earlier than the
// topic's head.
type hub struct {
	d *Driver

	mu        sync.Mutex
	ps        *redis.PubSub
	listeners map[string]map[*listener]struct{} // channel → listeners
	confirm   map[string]chan struct{}          // channel → closed when subscribed
	// pending counts SUBSCRIBE commands per channel whose reply has not
	// come yet: a reply to an earlier subscription (since cancelled) must
	// not confirm a new one.
	pending map[string]int
	// The same for PSUBSCRIBE, by Redis pattern.
	plisteners map[string]map[*plistener]struct{}
	pconfirm   map[string]chan struct{}
	ppending   map[string]int
	stop       chan struct{}
	done       chan struct{}
	closed     bool
}

type listener struct {
	ch   chan time.Time
	once sync.Once
}

// plistener is one SubscribeTopics. A channel that matched the Redis
// pattern is before + topic + after; the topic must also match the topic
// pattern (it always does: topics have no Redis glob characters).
type plistener struct {
	ch            chan ontimedriver.TopicWake
	once          sync.Once
	topicPattern  string
	before, after string
	// overflowed: the last send found the buffer full and put a wake-up
	// with an empty Topic in it (guarded by the hub's lock)
	overflowed bool
}

// topicWakeBuffer is the buffer of a SubscribeTopics channel: wake-ups of
// many topics may arrive together.
const topicWakeBuffer = 64

func (h *hub) init(d *Driver) {
	h.d = d
	h.listeners = map[string]map[*listener]struct{}{}
	h.confirm = map[string]chan struct{}{}
	h.pending = map[string]int{}
	h.plisteners = map[string]map[*plistener]struct{}{}
	h.pconfirm = map[string]chan struct{}{}
	h.ppending = map[string]int{}
	h.stop = make(chan struct{})
	h.done = make(chan struct{})
}

// subscribeTimeout bounds the wait for Redis to confirm a subscription.
const subscribeTimeout = 5 * time.Second

// Subscribe returns a channel of wake-up notifications for topic. The
// subscription is confirmed by Redis before Subscribe returns.
func (d *Driver) Subscribe(ctx context.Context, topic string) (<-chan time.Time, func(), error) {
	return d.hub.subscribe(ctx, d.keys(topic).wake)
}

func (h *hub) subscribe(ctx context.Context, channel string) (<-chan time.Time, func(), error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, nil, errClosed
	}
	if h.ps == nil {
		h.ps = h.d.rdb.Subscribe(context.WithoutCancel(ctx))
		go h.read(h.ps)
	}
	l := &listener{ch: make(chan time.Time, 1)}
	set, ok := h.listeners[channel]
	var wait chan struct{}
	if !ok {
		set = map[*listener]struct{}{}
		h.listeners[channel] = set
		wait = make(chan struct{})
		h.confirm[channel] = wait
		h.pending[channel]++
		if err := h.ps.Subscribe(ctx, channel); err != nil {
			h.pending[channel]--
			delete(h.listeners, channel)
			delete(h.confirm, channel)
			h.mu.Unlock()
			return nil, nil, fmt.Errorf("ontimeredis: subscribe: %w", err)
		}
	} else {
		wait = h.confirm[channel]
	}
	set[l] = struct{}{}
	h.mu.Unlock()

	cancel := func() { h.unsubscribe(channel, l) }
	if err := awaitConfirm(ctx, wait, cancel, "subscribe"); err != nil {
		return nil, nil, err
	}
	return l.ch, cancel, nil
}

// psubscribe subscribes to the wake channels that match the Redis pattern
// (before + topicPattern + after, before escaped), like subscribe.
func (h *hub) psubscribe(ctx context.Context, pattern, topicPattern, before, after string) (<-chan ontimedriver.TopicWake, func(), error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, nil, errClosed
	}
	if h.ps == nil {
		h.ps = h.d.rdb.Subscribe(context.WithoutCancel(ctx))
		go h.read(h.ps)
	}
	l := &plistener{ch: make(chan ontimedriver.TopicWake, topicWakeBuffer), topicPattern: topicPattern, before: before, after: after}
	set, ok := h.plisteners[pattern]
	var wait chan struct{}
	if !ok {
		set = map[*plistener]struct{}{}
		h.plisteners[pattern] = set
		wait = make(chan struct{})
		h.pconfirm[pattern] = wait
		h.ppending[pattern]++
		if err := h.ps.PSubscribe(ctx, pattern); err != nil {
			h.ppending[pattern]--
			delete(h.plisteners, pattern)
			delete(h.pconfirm, pattern)
			h.mu.Unlock()
			return nil, nil, fmt.Errorf("ontimeredis: psubscribe: %w", err)
		}
	} else {
		wait = h.pconfirm[pattern]
	}
	set[l] = struct{}{}
	h.mu.Unlock()

	cancel := func() { h.punsubscribe(pattern, l) }
	if err := awaitConfirm(ctx, wait, cancel, "psubscribe"); err != nil {
		return nil, nil, err
	}
	return l.ch, cancel, nil
}

func (h *hub) punsubscribe(pattern string, l *plistener) {
	l.once.Do(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		set := h.plisteners[pattern]
		delete(set, l)
		if len(set) == 0 && !h.closed {
			delete(h.plisteners, pattern)
			delete(h.pconfirm, pattern)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = h.ps.PUnsubscribe(ctx, pattern)
		}
	})
}

func (h *hub) unsubscribe(channel string, l *listener) {
	l.once.Do(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		set := h.listeners[channel]
		delete(set, l)
		if len(set) == 0 && !h.closed {
			delete(h.listeners, channel)
			delete(h.confirm, channel)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = h.ps.Unsubscribe(ctx, channel)
		}
	})
}

// read delivers messages until the hub closes. After a connection error
// (go-redis reconnects and subscribes again) every listener gets a zero
// notification: wake-ups may have been missed, so workers claim at once.
func (h *hub) read(ps *redis.PubSub) {
	defer close(h.done)
	failing := false
	backoff := 50 * time.Millisecond
	for {
		msg, err := ps.Receive(context.Background())
		select {
		case <-h.stop:
			return
		default:
		}
		if err != nil {
			if !failing {
				h.d.log.Warn("ontimeredis: wake-up subscription lost; workers fall back to polling until it is back", "error", err)
				failing = true
			}
			h.resetPending()
			h.broadcast(time.Time{})
			select {
			case <-h.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
			continue
		}
		if failing {
			h.d.log.Info("ontimeredis: wake-up subscription restored")
			failing = false
			backoff = 50 * time.Millisecond
			h.broadcast(time.Time{})
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe":
				h.confirmed(h.pending, h.confirm, m.Channel)
			case "psubscribe":
				h.confirmed(h.ppending, h.pconfirm, m.Channel)
			}
		case *redis.Message:
			var at time.Time
			if ms, err := strconv.ParseInt(m.Payload, 10, 64); err == nil {
				at = time.UnixMilli(ms)
			}
			if m.Pattern != "" {
				h.pnotify(m.Pattern, m.Channel, at)
			} else {
				h.notify(m.Channel, at)
			}
		}
	}
}

// confirmed handles Redis's reply to a SUBSCRIBE (or PSUBSCRIBE) of name:
// once every such command sent has its reply, the subscription is
// confirmed.
func (h *hub) confirmed(pending map[string]int, confirm map[string]chan struct{}, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if pending[name] > 0 {
		pending[name]--
	}
	if c, ok := confirm[name]; ok && pending[name] == 0 {
		select {
		case <-c:
		default:
			close(c)
		}
	}
}

// pnotify delivers a message that matched a Redis pattern to its
// listeners, with the topic read from the channel, under the same rule as
// notify.
func (h *hub) pnotify(pattern, channel string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.pconfirm[pattern]; ok {
		select {
		case <-c:
		default:
			return
		}
	}
	for l := range h.plisteners[pattern] {
		topic, ok := strings.CutPrefix(channel, l.before)
		if ok {
			topic, ok = strings.CutSuffix(topic, l.after)
		}
		if !ok || ontimedriver.ValidateTopic(topic) != nil || !ontimedriver.MatchTopic(l.topicPattern, topic) {
			continue
		}
		l.send(ontimedriver.TopicWake{Topic: topic, Due: at})
	}
}

// notify delivers a message to the channel's listeners, unless the
// channel's current subscription is not confirmed yet: then the message
// was published for an earlier, cancelled subscription.
func (h *hub) notify(channel string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.confirm[channel]; ok {
		select {
		case <-c:
		default:
			return
		}
	}
	for l := range h.listeners[channel] {
		send(l.ch, at)
	}
}

// resetPending forgets unanswered SUBSCRIBE commands after a connection
// error: go-redis subscribes again to every channel on reconnect, and
// waiting subscribers are let go (the worker's fallback poll covers the gap).
func (h *hub) resetPending() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.pending {
		delete(h.pending, ch)
	}
	for _, c := range h.confirm {
		select {
		case <-c:
		default:
			close(c)
		}
	}
	for p := range h.ppending {
		delete(h.ppending, p)
	}
	for _, c := range h.pconfirm {
		select {
		case <-c:
		default:
			close(c)
		}
	}
}

func (h *hub) broadcast(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.listeners {
		for l := range set {
			send(l.ch, at)
		}
	}
	for _, set := range h.plisteners {
		for l := range set {
			l.send(ontimedriver.TopicWake{Due: at})
		}
	}
}

// send never blocks. When the buffer is full, its oldest wake-up makes
// room for one with an empty Topic ("any topic: look again"), which stands
// for it and for w, and later wake-ups are dropped until a send finds room
// again: that empty one is still in the buffer then (a full buffer with
// overflowed set means the receiver has read nothing since), after every
// dropped one. Called with the hub's lock held.
func (l *plistener) send(w ontimedriver.TopicWake) {
	select {
	case l.ch <- w:
		l.overflowed = false
		return
	default:
	}
	if l.overflowed {
		return
	}
	select {
	case <-l.ch:
	default:
	}
	select {
	case l.ch <- ontimedriver.TopicWake{}:
		l.overflowed = true
	default:
	}
}

// send never blocks: a full buffer already holds a wake-up. An earlier
// instant replaces a later one waiting in the buffer.
func send(ch chan time.Time, at time.Time) {
	select {
	case ch <- at:
	default:
		select {
		case old := <-ch:
			if !old.IsZero() && !at.IsZero() && old.Before(at) {
				at = old
			} else if old.IsZero() {
				at = old
			}
		default:
		}
		select {
		case ch <- at:
		default:
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	ps := h.ps
	h.mu.Unlock()
	if ps == nil {
		return
	}
	close(h.stop)
	_ = ps.Close()
	<-h.done
}

// awaitConfirm waits until Redis confirms a (p)subscription (wait is
// closed; nil: confirmed before), at most subscribeTimeout; on failure it
// calls cancel.
func awaitConfirm(ctx context.Context, wait chan struct{}, cancel func(), verb string) error {
	if wait == nil {
		return nil
	}
	t := time.NewTimer(subscribeTimeout)
	defer t.Stop()
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		cancel()
		return ctx.Err()
	case <-t.C:
		cancel()
		return fmt.Errorf("ontimeredis: %s: Redis did not confirm within %v", verb, subscribeTimeout)
	}
}
