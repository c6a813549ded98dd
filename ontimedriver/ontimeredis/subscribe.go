package ontimeredis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/backoff"
	"github.com/ontime-go/ontime/ontimedriver"
)

// hub multiplexes every Subscribe and SubscribeTopics of a Driver over one
// pub/sub connection (SUBSCRIBE per topic, PSUBSCRIBE per topic pattern).
// On a Redis Cluster with sharded pub/sub it hands everything to shub
// (ssubscribe.go) instead.
// Scripts PUBLISH the new head's due time (ms) on the topic's wake channel
// when a schedule, retry, snooze or replay makes a timer earlier than the
// topic's head.
//
// The hub's lock guards its bookkeeping only; it is never held across a
// network call. What to send (SUBSCRIBE, UNSUBSCRIBE, ...) is decided under
// the lock and queued, in that order, for one sender goroutine, so that a
// command the network is slow to take (a congested link, a connection
// go-redis is redialling) delays the commands behind it, never the
// wake-ups of the topics already subscribed.
type hub struct {
	d *Driver
	// s is the sharded hub that replaces this one on a Redis Cluster
	// with sharded pub/sub (see shub); nil otherwise.
	s *shub

	mu     sync.Mutex
	ps     *redis.PubSub
	chans  subs[*listener]  // SUBSCRIBE, by channel
	pats   subs[*plistener] // PSUBSCRIBE, by Redis pattern
	queue  []hubCommand     // commands for the sender, in order
	kick   chan struct{}    // (cap 1) the queue has commands
	stop   chan struct{}
	wg     sync.WaitGroup // the reader and the sender
	closed bool
}

// hubCommand is one pub/sub command for the sender.
type hubCommand struct {
	verb string // subscribe, psubscribe, unsubscribe, punsubscribe
	name string // channel or pattern
	// result gets the command's error (nil once sent); nil when nobody
	// waits (unsubscribes).
	result chan error
}

// unsubscribeTimeout bounds the sending of an UNSUBSCRIBE: a connection
// that cannot take it is broken, and go-redis does not subscribe again to
// what was unsubscribed when it reconnects.
const unsubscribeTimeout = time.Second

// subs is the bookkeeping of one kind of subscription (SUBSCRIBE by
// channel name, PSUBSCRIBE by pattern), guarded by the hub's lock.
type subs[L comparable] struct {
	listeners map[string]map[L]struct{} // name → listeners
	confirm   map[string]chan struct{}  // name → closed when subscribed
	// pending counts the commands per name whose reply has not come yet: a
	// reply to an earlier subscription (since cancelled) must not confirm
	// a new one.
	pending map[string]int
}

func newSubs[L comparable]() subs[L] {
	return subs[L]{listeners: map[string]map[L]struct{}{}, confirm: map[string]chan struct{}{}, pending: map[string]int{}}
}

// add registers l under name. It returns the channel closed when Redis has
// confirmed the name, and whether l is the name's first listener: then the
// caller queues the command (SUBSCRIBE or PSUBSCRIBE), counted pending
// here.
func (s *subs[L]) add(name string, l L) (wait chan struct{}, first bool) {
	if set, ok := s.listeners[name]; ok {
		set[l] = struct{}{}
		return s.confirm[name], false
	}
	wait = make(chan struct{})
	s.listeners[name] = map[L]struct{}{l: {}}
	s.confirm[name] = wait
	s.pending[name]++
	return wait, true
}

// failed forgets a command for name that could not be sent: no reply will
// come for it.
func (s *subs[L]) failed(name string) {
	if s.pending[name] > 0 {
		s.pending[name]--
	}
}

// remove drops l. It reports true when l was the name's last listener and
// the hub is open: the name is forgotten, and the caller unsubscribes it.
func (s *subs[L]) remove(name string, l L, closed bool) bool {
	set := s.listeners[name]
	delete(set, l)
	if len(set) > 0 || closed {
		return false
	}
	delete(s.listeners, name)
	delete(s.confirm, name)
	return true
}

// ready reports whether name's current subscription is confirmed (or the
// name is not subscribed): a message that comes before the confirmation
// was published for an earlier, cancelled subscription.
func (s *subs[L]) ready(name string) bool {
	c, ok := s.confirm[name]
	if !ok {
		return true
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// confirmed handles Redis's reply to a command for name: once every such
// command sent has its reply, the subscription is confirmed.
func (s *subs[L]) confirmed(name string) {
	if s.pending[name] > 0 {
		s.pending[name]--
	}
	if c, ok := s.confirm[name]; ok && s.pending[name] == 0 {
		closeOnce(c)
	}
}

// reset forgets unanswered commands and lets every waiting subscriber go.
func (s *subs[L]) reset() {
	clear(s.pending)
	for _, c := range s.confirm {
		closeOnce(c)
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
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
	if d.spub {
		h.s = newShub(d)
	}
	h.chans = newSubs[*listener]()
	h.pats = newSubs[*plistener]()
	h.kick = make(chan struct{}, 1)
	h.stop = make(chan struct{})
}

// subscribeTimeout bounds the wait for Redis to confirm a subscription.
const subscribeTimeout = 5 * time.Second

// Subscribe returns a channel of wake-up notifications for topic. The
// subscription is confirmed by Redis before Subscribe returns.
func (d *Driver) Subscribe(ctx context.Context, topic string) (<-chan time.Time, func(), error) {
	if s := d.sharded(topic); s != nil {
		return d.subscribeSharded(ctx, s)
	}
	return d.hub.subscribe(ctx, d.keys(topic).wake)
}

// lockOpen takes the hub's lock and starts its pub/sub connection (reader
// and sender) if it has none; it fails (without the lock) when the hub is
// closed.
func (h *hub) lockOpen(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return errClosed
	}
	if h.ps == nil {
		// No channel yet: this does not touch the network.
		h.ps = h.d.rdb.Subscribe(context.WithoutCancel(ctx))
		h.wg.Add(2)
		go h.read(h.ps)
		go h.send(h.ps)
	}
	return nil
}

// enqueue queues a command for the sender; called with the hub's lock
// held. It returns the channel the command's error comes on, or nil when
// wantResult is false.
func (h *hub) enqueue(verb, name string, wantResult bool) chan error {
	c := hubCommand{verb: verb, name: name}
	if wantResult {
		c.result = make(chan error, 1)
	}
	h.queue = append(h.queue, c)
	select {
	case h.kick <- struct{}{}:
	default: // the sender has been kicked already
	}
	return c.result
}

// send sends the queued commands, in order, until the hub closes. It is
// the only goroutine that writes commands to the pub/sub connection, and
// it holds no lock of the hub while it does.
func (h *hub) send(ps *redis.PubSub) {
	defer h.wg.Done()
	for {
		stopped := false
		select {
		case <-h.stop:
			stopped = true
		case <-h.kick:
		}
		h.mu.Lock()
		q := h.queue
		h.queue = nil
		h.mu.Unlock()
		for _, c := range q {
			if stopped {
				reply(c, errClosed)
			} else {
				reply(c, h.sendOne(ps, c))
			}
		}
		if stopped {
			return
		}
	}
}

// sendOne writes one command (go-redis dials first if its connection is
// down), bounded by the wait its caller accepts.
func (h *hub) sendOne(ps *redis.PubSub, c hubCommand) error {
	timeout := subscribeTimeout
	if c.result == nil {
		timeout = unsubscribeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	switch c.verb {
	case "subscribe":
		return ps.Subscribe(ctx, c.name)
	case "psubscribe":
		return ps.PSubscribe(ctx, c.name)
	case "unsubscribe":
		return ps.Unsubscribe(ctx, c.name)
	default:
		return ps.PUnsubscribe(ctx, c.name)
	}
}

func reply(c hubCommand, err error) {
	if c.result != nil {
		c.result <- err
	}
}

// join registers l under name, with the hub's lock held (lockOpen), and
// releases the lock; the name's first listener queues verb. It returns
// what awaitConfirm waits on, and what it calls when the command could
// not be sent.
func join[L comparable](h *hub, s *subs[L], verb, name string, l L) (wait chan struct{}, sent chan error, failed func()) {
	wait, first := s.add(name, l)
	if first {
		sent = h.enqueue(verb, name, true)
	}
	h.mu.Unlock()
	failed = func() {
		h.mu.Lock()
		s.failed(name)
		h.mu.Unlock()
	}
	return wait, sent, failed
}

func (h *hub) subscribe(ctx context.Context, channel string) (<-chan time.Time, func(), error) {
	ch := make(chan time.Time, 1)
	cancel, err := h.subscribeTo(ctx, channel, ch)
	if err != nil {
		return nil, nil, err
	}
	return ch, cancel, nil
}

// subscribeTo subscribes ch (buffer 1) to channel; several subscriptions
// may share one ch (a sharded topic's wake channels).
func (h *hub) subscribeTo(ctx context.Context, channel string, ch chan time.Time) (func(), error) {
	if h.s != nil {
		return h.s.subscribeTo(ctx, channel, ch)
	}
	if err := h.lockOpen(ctx); err != nil {
		return nil, err
	}
	l := &listener{ch: ch}
	wait, sent, failed := join(h, &h.chans, "subscribe", channel, l)
	cancel := func() { h.unsubscribe(channel, l) }
	if err := awaitConfirm(ctx, sent, failed, wait, cancel, "subscribe"); err != nil {
		return nil, err
	}
	return cancel, nil
}

// psubscribe subscribes to the wake channels that match the Redis pattern
// (before + topicPattern + after, before escaped), like subscribe.
func (h *hub) psubscribe(ctx context.Context, pattern, topicPattern, before, after string) (<-chan ontimedriver.TopicWake, func(), error) {
	if h.s != nil {
		return h.s.psubscribe(ctx, topicPattern)
	}
	if err := h.lockOpen(ctx); err != nil {
		return nil, nil, err
	}
	l := &plistener{ch: make(chan ontimedriver.TopicWake, topicWakeBuffer), topicPattern: topicPattern, before: before, after: after}
	wait, sent, failed := join(h, &h.pats, "psubscribe", pattern, l)
	cancel := func() { h.punsubscribe(pattern, l) }
	if err := awaitConfirm(ctx, sent, failed, wait, cancel, "psubscribe"); err != nil {
		return nil, nil, err
	}
	return l.ch, cancel, nil
}

// punsubscribe drops l; the last listener of the pattern queues a
// PUNSUBSCRIBE. It does not wait for the network.
func (h *hub) punsubscribe(pattern string, l *plistener) {
	l.once.Do(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.pats.remove(pattern, l, h.closed) {
			h.enqueue("punsubscribe", pattern, false)
		}
	})
}

// unsubscribe drops l; the last listener of the channel queues an
// UNSUBSCRIBE. It does not wait for the network.
func (h *hub) unsubscribe(channel string, l *listener) {
	l.once.Do(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.chans.remove(channel, l, h.closed) {
			h.enqueue("unsubscribe", channel, false)
		}
	})
}

// read delivers messages until the hub closes. After a connection error
// (go-redis reconnects and subscribes again) every listener gets a zero
// notification: wake-ups may have been missed, so workers claim at once.
func (h *hub) read(ps *redis.PubSub) {
	defer h.wg.Done()
	failing := false
	var wait time.Duration // the reconnect back-off
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
			// On a Cluster the connection goes to the master of the first
			// channel's slot: a dead one until the slot map is reloaded.
			h.d.reload.failed()
			h.resetPending()
			h.broadcast(time.Time{})
			wait = backoff.Next(wait, 50*time.Millisecond, 2*time.Second)
			select {
			case <-h.stop:
				return
			case <-time.After(wait):
			}
			continue
		}
		if failing {
			h.d.log.Info("ontimeredis: wake-up subscription restored")
			failing = false
			wait = 0
			h.broadcast(time.Time{})
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe":
				h.mu.Lock()
				h.chans.confirmed(m.Channel)
				h.mu.Unlock()
			case "psubscribe":
				h.mu.Lock()
				h.pats.confirmed(m.Channel)
				h.mu.Unlock()
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

// pnotify delivers a message that matched a Redis pattern to its
// listeners, with the topic read from the channel, under the same rule as
// notify.
func (h *hub) pnotify(pattern, channel string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.pats.ready(pattern) {
		return
	}
	for l := range h.pats.listeners[pattern] {
		topic, ok := strings.CutPrefix(channel, l.before)
		if ok {
			topic, ok = strings.CutSuffix(topic, l.after)
		}
		topic = topicOf(topic) // a shard's wake-up is its topic's
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
	if !h.chans.ready(channel) {
		return
	}
	for l := range h.chans.listeners[channel] {
		send(l.ch, at)
	}
}

// resetPending forgets unanswered SUBSCRIBE commands after a connection
// error: go-redis subscribes again to every channel on reconnect, and
// waiting subscribers are let go (the worker's fallback poll covers the gap).
func (h *hub) resetPending() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.chans.reset()
	h.pats.reset()
}

func (h *hub) broadcast(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.chans.listeners {
		for l := range set {
			send(l.ch, at)
		}
	}
	for _, set := range h.pats.listeners {
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

// slotsReloaded is called after each slot-map reload the driver starts.
func (h *hub) slotsReloaded() {
	if h.s != nil {
		h.s.slotsReloaded()
	}
}

func (h *hub) close() {
	if h.s != nil {
		h.s.close()
		return
	}
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
	h.wg.Wait()
}

// awaitConfirm waits, at most subscribeTimeout in all, until the sender has
// sent the (p)subscription's command (sent gets its error; nil: another
// listener's command subscribes the name), and then until Redis confirms
// it (wait is closed). When the command could not be sent it calls failed;
// on any failure it calls cancel.
func awaitConfirm(ctx context.Context, sent chan error, failed func(), wait chan struct{}, cancel func(), verb string) error {
	t := time.NewTimer(subscribeTimeout)
	defer t.Stop()
	if sent != nil {
		select {
		case err := <-sent:
			if err != nil {
				failed()
				cancel()
				return fmt.Errorf("ontimeredis: %s: %w", verb, err)
			}
		case <-ctx.Done():
			cancel()
			return ctx.Err()
		case <-t.C:
			cancel()
			return fmt.Errorf("ontimeredis: %s: the command could not be sent within %v", verb, subscribeTimeout)
		}
	}
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
