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

// shub is the wake-up hub on a Redis Cluster with sharded pub/sub
// (Driver.spub): the scripts SPUBLISH a topic's wake-ups on its wake
// channel, which shares the topic's hash tag, so only the master of the
// topic's slot (and its replicas) carry them. A shard channel must be
// subscribed on the node that owns its slot, and one SSUBSCRIBE may name
// channels of one slot only, so the hub keeps one pub/sub connection per
// master and sends one SSUBSCRIBE per slot.
//
// Subscriptions follow their slots. A connection that fails (its master
// died), or that Redis tells a channel was unsubscribed although the hub
// did not ask (sunsubscribe: the node lost the slot, to a failover or a
// resharding), is closed, and every channel it carried is placed again on
// the master the slot map names, once the driver has reloaded the map
// (failover.go: a failure starts reloads every 200 ms). Placement is
// retried every 50 ms to 200 ms while it fails, and checked against the
// slot map after every reload and every 2 s, so a subscription is back on
// a promoted replica within about half a second of its promotion. While a
// channel is not placed its subscribers fall back to polling: they get a
// zero wake-up (claim now) when it is lost and again when it is back.
//
// Pattern subscribers (SubscribeTopics) have no sharded PSUBSCRIBE to use.
// They listen to one shard channel, the topic-wake channel under the
// index's hash tag (topicWakeChannel), where hint.lua publishes
// "<ms> <topic>" whenever a topic's index entry is added or made earlier;
// every topic's wake-up reaches it through the index hint the driver
// writes after each operation on a Cluster anyway, so no publish crosses
// the cluster bus, a subscriber holds one subscription whatever the number
// of topics, and a new topic is heard from its first timer. The hub
// matches the topic against each subscriber's pattern.
//
// The hub's lock guards its bookkeeping only; network calls are made by
// one manager goroutine (placement) and one reader per connection,
// without it.
type shub struct {
	d  *Driver
	rc *redis.ClusterClient

	mu      sync.Mutex
	names   map[string]*sname // the shard channels subscribers want
	conns   map[string]*sconn // master address → its connection
	kick    chan struct{}     // (cap 1) the manager has work
	stop    chan struct{}
	wg      sync.WaitGroup
	started bool
	closed  bool
}

// sname is one shard channel and its subscribers.
type sname struct {
	chans map[*listener]struct{}
	pats  map[*plistener]struct{} // the topic-wake channel's
	// conn is the connection the channel is subscribed on; nil while it
	// is to be placed.
	conn *sconn
	// confirmed: Redis answered the SSUBSCRIBE of the current placement;
	// messages before it are dropped (they were published for an
	// earlier, cancelled subscription).
	confirmed bool
	wait      chan struct{} // closed at the first confirmation
	errs      []chan error  // subscribers waiting: the first failure
	// lost: the channel was subscribed and its connection failed: its
	// subscribers get a zero wake-up when it is confirmed again.
	lost bool
}

// sconn is a pub/sub connection to one master.
type sconn struct {
	addr    string
	ps      *redis.PubSub
	names   map[string]struct{} // SSUBSCRIBE sent here
	pending map[string]int      // SSUBSCRIBE sent here, reply not read yet
}

// Pace of the placement of shard channels.
const (
	placeRetryMin = 50 * time.Millisecond
	placeRetryMax = 200 * time.Millisecond
	placeCheck    = 2 * time.Second
)

func newShub(d *Driver) *shub {
	rc, _ := d.rdb.(*redis.ClusterClient)
	return &shub{d: d, rc: rc, names: map[string]*sname{}, conns: map[string]*sconn{},
		kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

func (h *shub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// join registers a subscriber of channel (add puts it in the sname) and
// waits until the channel is subscribed, at most subscribeTimeout; cancel
// drops it.
func (h *shub) join(ctx context.Context, channel string, add func(*sname), cancel func()) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return errClosed
	}
	if !h.started {
		h.started = true
		h.wg.Add(1)
		go h.manage()
	}
	n := h.names[channel]
	if n == nil {
		n = &sname{chans: map[*listener]struct{}{}, pats: map[*plistener]struct{}{}, wait: make(chan struct{})}
		h.names[channel] = n
	}
	add(n)
	select {
	case <-n.wait:
		// subscribed already (or, during an outage, to be placed again)
		h.mu.Unlock()
		return nil
	default:
	}
	errc := make(chan error, 1)
	n.errs = append(n.errs, errc)
	wait := n.wait
	h.mu.Unlock()
	h.poke()
	t := time.NewTimer(subscribeTimeout)
	defer t.Stop()
	select {
	case <-wait:
		return nil
	case err := <-errc:
		cancel()
		return fmt.Errorf("ontimeredis: ssubscribe: %w", err)
	case <-ctx.Done():
		cancel()
		return ctx.Err()
	case <-t.C:
		cancel()
		return fmt.Errorf("ontimeredis: ssubscribe: Redis did not confirm within %v", subscribeTimeout)
	}
}

// subscribeTo subscribes ch (buffer 1) to a topic's wake channel.
func (h *shub) subscribeTo(ctx context.Context, channel string, ch chan time.Time) (func(), error) {
	l := &listener{ch: ch}
	cancel := func() {
		l.once.Do(func() {
			h.leave(channel, func(n *sname) { delete(n.chans, l) })
		})
	}
	if err := h.join(ctx, channel, func(n *sname) { n.chans[l] = struct{}{} }, cancel); err != nil {
		return nil, err
	}
	return cancel, nil
}

// psubscribe subscribes to the topic-wake channel for the topics that
// match topicPattern.
func (h *shub) psubscribe(ctx context.Context, topicPattern string) (<-chan ontimedriver.TopicWake, func(), error) {
	channel := h.d.topicWakeChannel()
	l := &plistener{ch: make(chan ontimedriver.TopicWake, topicWakeBuffer), topicPattern: topicPattern}
	cancel := func() {
		l.once.Do(func() {
			h.leave(channel, func(n *sname) { delete(n.pats, l) })
		})
	}
	if err := h.join(ctx, channel, func(n *sname) { n.pats[l] = struct{}{} }, cancel); err != nil {
		return nil, nil, err
	}
	return l.ch, cancel, nil
}

// leave drops a subscriber; the channel's last one has the manager
// unsubscribe it.
func (h *shub) leave(channel string, drop func(*sname)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.names[channel]
	if n == nil {
		return
	}
	drop(n)
	if len(n.chans)+len(n.pats) == 0 && !h.closed {
		delete(h.names, channel)
		h.poke()
	}
}

// manage places the channels on their masters, until the hub closes.
func (h *shub) manage() {
	defer h.wg.Done()
	var retry time.Duration
	t := time.NewTimer(placeCheck)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-h.kick:
		case <-t.C:
		}
		if h.reconcile() {
			retry = backoff.Next(retry, placeRetryMin, placeRetryMax)
		} else {
			retry = 0
		}
		next := placeCheck
		if retry > 0 {
			next = retry
		}
		t.Stop()
		select {
		case <-t.C:
		default:
		}
		t.Reset(next)
	}
}

// slotsReloaded is called after each slot-map reload the driver starts
// (failover.go): a subscription may belong elsewhere now.
func (h *shub) slotsReloaded() { h.poke() }

// reconcile unsubscribes the channels nobody wants, moves the channels
// whose slot moved and places those not subscribed. It reports whether
// something could not be placed (then it runs again soon).
func (h *shub) reconcile() (again bool) {
	type batch struct {
		c     *sconn
		names []string
	}
	var unsubs []batch
	var toClose []*redis.PubSub
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	for _, c := range h.conns {
		drop := map[int][]string{} // by slot: one SUNSUBSCRIBE per slot
		for x := range c.names {
			if n := h.names[x]; n == nil || n.conn != c {
				delete(c.names, x)
				drop[slotOf(x)] = append(drop[slotOf(x)], x)
			}
		}
		for _, names := range drop {
			unsubs = append(unsubs, batch{c, names})
		}
	}
	placed := map[string]*sconn{}
	for x, n := range h.names {
		if n.conn != nil {
			placed[x] = n.conn
		}
	}
	h.mu.Unlock()
	// Channels on a connection to another node than the slot map names
	// for them (a failover without a broken connection, a resharding
	// whose sunsubscribe was missed): that connection is rebuilt. (The
	// slot map is read without the lock: go-redis may load it first.)
	var moved []*sconn
	owner := map[int]string{} // slot → its master's address ("": unknown)
	for x, c := range placed {
		slot := slotOf(x)
		addr, ok := owner[slot]
		if !ok {
			ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
			if cl, err := h.rc.MasterForKey(ctx, x); err == nil {
				addr = cl.Options().Addr
			}
			cancel()
			owner[slot] = addr
		}
		if addr != "" && addr != c.addr {
			moved = append(moved, c)
		}
	}
	var place []string
	h.mu.Lock()
	for _, c := range moved {
		if ps := h.breakConn(c); ps != nil {
			toClose = append(toClose, ps)
		}
	}
	for x, n := range h.names {
		if n.conn == nil {
			place = append(place, x)
		}
	}
	h.mu.Unlock()
	for _, ps := range toClose {
		_ = ps.Close()
	}
	for _, u := range unsubs {
		ctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
		_ = u.c.ps.SUnsubscribe(ctx, u.names...) // a failure breaks the connection, which its reader sees
		cancel()
	}
	if len(place) == 0 {
		return false
	}

	// Group by master, then by slot: one SSUBSCRIBE per slot.
	type target struct {
		cl    *redis.Client
		slots map[int][]string
	}
	targets := map[string]*target{}
	for _, x := range place {
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		cl, err := h.rc.MasterForKey(ctx, x)
		cancel()
		if err != nil {
			h.failed([]string{x}, err)
			again = true
			continue
		}
		addr := cl.Options().Addr
		tg := targets[addr]
		if tg == nil {
			tg = &target{cl: cl, slots: map[int][]string{}}
			targets[addr] = tg
		}
		s := slotOf(x)
		tg.slots[s] = append(tg.slots[s], x)
	}
	for addr, tg := range targets {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return false
		}
		c := h.conns[addr]
		if c == nil {
			c = &sconn{addr: addr, ps: tg.cl.Subscribe(context.Background()), names: map[string]struct{}{}, pending: map[string]int{}}
			h.conns[addr] = c
			h.wg.Add(1)
			go h.read(c)
		}
		h.mu.Unlock()
		for _, names := range tg.slots {
			h.mu.Lock()
			var send []string
			for _, x := range names {
				if n := h.names[x]; n != nil && n.conn == nil && h.conns[addr] == c {
					n.conn, n.confirmed = c, false
					c.names[x] = struct{}{}
					c.pending[x]++
					send = append(send, x)
				}
			}
			h.mu.Unlock()
			if len(send) == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
			err := c.ps.SSubscribe(ctx, send...)
			cancel()
			if err != nil {
				h.mu.Lock()
				ps := h.breakConn(c)
				h.mu.Unlock()
				if ps != nil {
					_ = ps.Close()
				}
				h.failed(send, err)
				again = true
				break
			}
		}
	}
	return again
}

// failed reports a failed placement to the channels' waiting subscribers
// and has the driver reload the slot map.
func (h *shub) failed(names []string, err error) {
	h.d.reload.failed()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range names {
		n := h.names[x]
		if n == nil {
			continue
		}
		for _, e := range n.errs {
			e <- err
		}
		n.errs = nil
	}
}

// breakConn forgets a connection whose channels must be placed again, and
// returns its PubSub to close (nil when it was forgotten already); called
// with the lock held.
func (h *shub) breakConn(c *sconn) *redis.PubSub {
	if h.conns[c.addr] != c {
		return nil
	}
	delete(h.conns, c.addr)
	for x := range c.names {
		n := h.names[x]
		if n == nil || n.conn != c {
			continue
		}
		wasUp := n.confirmed
		n.conn, n.confirmed = nil, false
		if wasUp {
			n.lost = true
			n.broadcast()
		}
	}
	h.poke()
	return c.ps
}

// read delivers the messages of one connection until it fails or is
// closed.
func (h *shub) read(c *sconn) {
	defer h.wg.Done()
	for {
		msg, err := c.ps.Receive(context.Background())
		if err != nil {
			h.mu.Lock()
			closed := h.closed
			ps := h.breakConn(c)
			h.mu.Unlock()
			if ps != nil && !closed {
				h.d.log.Warn("ontimeredis: wake-up subscription lost; its topics fall back to polling until it is placed again", "node", c.addr, "error", err)
				h.d.reload.failed()
				_ = ps.Close()
			}
			return
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if ps := h.subscription(c, m); ps != nil {
				_ = ps.Close()
				return
			}
		case *redis.Message:
			h.deliver(c, m)
		}
	}
}

// subscription handles Redis's reply to (S)SUBSCRIBE or SUNSUBSCRIBE, or
// its notice that it dropped a subscription; it returns the PubSub to
// close when the connection must be rebuilt.
func (h *shub) subscription(c *sconn, m *redis.Subscription) *redis.PubSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch m.Kind {
	case "ssubscribe":
		if c.pending[m.Channel] > 0 {
			c.pending[m.Channel]--
		}
		if c.pending[m.Channel] > 0 {
			return nil
		}
		delete(c.pending, m.Channel)
		n := h.names[m.Channel]
		if n == nil || n.conn != c || n.confirmed {
			return nil
		}
		n.confirmed = true
		closeOnce(n.wait)
		n.errs = nil
		if n.lost {
			n.lost = false
			n.broadcast()
		}
	case "sunsubscribe":
		n := h.names[m.Channel]
		if n == nil || n.conn != c || c.pending[m.Channel] > 0 {
			return nil // the reply to the hub's own SUNSUBSCRIBE
		}
		// Redis dropped the subscription: the node lost the slot.
		h.d.log.Info("ontimeredis: a wake-up channel's slot moved; subscribing on its new master", "channel", m.Channel, "node", c.addr)
		if ps := h.breakConn(c); ps != nil {
			h.d.reload.failed()
			return ps
		}
	}
	return nil
}

// deliver hands a message to the channel's subscribers: the new head's
// due time (ms) on a topic's wake channel; "<ms> <topic>" on the
// topic-wake channel.
func (h *shub) deliver(c *sconn, m *redis.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.names[m.Channel]
	if n == nil || n.conn != c || !n.confirmed {
		return
	}
	msText, topic, _ := strings.Cut(m.Payload, " ")
	var at time.Time
	if ms, err := strconv.ParseInt(msText, 10, 64); err == nil {
		at = time.UnixMilli(ms)
	}
	for l := range n.chans {
		send(l.ch, at)
	}
	if len(n.pats) == 0 {
		return
	}
	topic = topicOf(topic) // a shard's wake-up is its topic's
	if ontimedriver.ValidateTopic(topic) != nil {
		return
	}
	for l := range n.pats {
		if ontimedriver.MatchTopic(l.topicPattern, topic) {
			l.send(ontimedriver.TopicWake{Topic: topic, Due: at})
		}
	}
}

// broadcast gives every subscriber of the channel a zero wake-up (look
// again); called with the hub's lock held.
func (n *sname) broadcast() {
	for l := range n.chans {
		send(l.ch, time.Time{})
	}
	for l := range n.pats {
		l.send(ontimedriver.TopicWake{})
	}
}

func (h *shub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	var pss []*redis.PubSub
	for _, c := range h.conns {
		pss = append(pss, c.ps)
	}
	clear(h.conns)
	started := h.started
	h.mu.Unlock()
	if started {
		close(h.stop)
	}
	for _, ps := range pss {
		_ = ps.Close()
	}
	h.wg.Wait()
}

// slotOf is the Cluster hash slot of a key or shard channel.
func slotOf(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) % clusterSlots)
}
