package delivery

import (
	"container/heap"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Watching, the way a JetStream pull consumer or an SQS queue does it.
//
// A confirming watcher takes the topic's timers from its target while it
// is connected. Each timer sent to it is an event with its own id; the
// timer counts as delivered only when the watcher confirms that id (Ack,
// a second request). Until then the timer stays in the store, leased: by
// the worker whose handler waits for the confirmation, or by the claimer
// (claimer.go), which claims for the watchers' free room. A watcher holds
// at most its window of unconfirmed events (1 until it confirms its first,
// then the topic's watch_window); the pump (order.go) hands queued timers
// in due order to the watcher with the most room. An event not confirmed
// within the topic's lease ends its watcher, and a watcher that ends
// (closed, gone, or ended so) gives its unconfirmed events back at once:
// each counts as a failed attempt and is due again, for another watcher
// or the target; events it had not been sent go straight back to the
// queue. So a watcher that stops reading holds at most its window, for at
// most the lease, and a timer is never lost or sent early (only due
// timers are claimed).
//
// A watcher that does not confirm (a tap, such as curl -N) takes nothing:
// it gets a copy of each delivery of the topic as it starts, and drops
// copies (counting them) when it reads too slowly.

// errUnconfirmed is the failed attempt of a timer whose event was not
// confirmed.
var errUnconfirmed = errors.New("the watcher did not confirm the event (it went away, or its ack wait ran out)")

// tapBuffer is how many copies a tap may have waiting to be written.
const tapBuffer = 64

type holdState int

const (
	holdQueued   holdState = iota // waiting in the topic's queue
	holdAssigned                  // given to a watcher (sent, or about to be)
	holdResolved                  // settled one way or another
)

// holdResult is how a hold ends.
type holdResult int

const (
	holdConfirmed   holdResult = iota + 1 // the watcher confirmed it: ack
	holdUnconfirmed                       // sent, not confirmed: a failed attempt, due again at once
	holdNobody                            // never sent; the last watcher left: the target takes it
	holdReleased                          // the server stops: due again at once, not counted
	holdLapsed                            // claimed, queued past its lease: the store hands it out again
)

// hold is a fired timer on its way to a confirming watcher.
type hold struct {
	msg   *Message
	state holdState // guarded by tr.wmu
	// Exactly one of: done, on which a worker's handler waits (the worker
	// keeps the lease), and store, a timer the claimer leased.
	done  chan holdResult
	store *storeHold

	// While assigned (guarded by tr.wmu).
	eventID  string
	w        *Watcher
	sent     bool      // taken by the writer: it may have reached the client
	sentAt   time.Time // when it was taken
	deadline time.Time
}

// settlements are hold results to apply once tr.wmu is released.
type settlements []settlement

type settlement struct {
	h *hold
	r holdResult
}

func (s *settlements) add(h *hold, r holdResult) { *s = append(*s, settlement{h, r}) }

// run applies the results: a waiting handler gets its own, the claimer's
// holds are settled in the store.
func (s settlements) run(tr *topicRun) {
	var store settlements
	for _, x := range s {
		if x.h.done != nil {
			x.h.done <- x.r // buffer 1; a hold is resolved once
		} else {
			store = append(store, x)
		}
	}
	if len(store) > 0 {
		tr.settleStore(store)
	}
}

// WatchOptions configure a watcher.
type WatchOptions struct {
	// Confirm makes a confirming watcher, which takes the topic's timers
	// and confirms each event with Ack. Without it the watcher is a tap:
	// it sees copies and takes nothing.
	Confirm bool
	// OnEnd, if set, is called (once, on another goroutine) when the
	// dispatcher ends the watcher: one of its events was not confirmed in
	// time. Gone is closed then too.
	OnEnd func()
}

// Event is one event for a watcher to write.
type Event struct {
	// ID is the event id: a confirming watcher's client confirms it with
	// Ack. Unique per event; a timer sent again gets a new one.
	ID string
	// Msg is the timer.
	Msg *Message
	// Missed is, for a tap, how many copies were dropped (its buffer was
	// full: it reads too slowly) since it took its previous event.
	Missed int
}

// Watcher receives a topic's fired timers while it is connected: a
// confirming watcher takes them (see Ack), a tap sees copies. While a
// topic has at least one confirming watcher its target receives nothing;
// several confirming watchers of one topic share its timers.
type Watcher struct {
	tr      *topicRun
	id      string
	confirm bool
	onEnd   func()
	ready   chan struct{} // buffer 1: Next may have something
	gone    chan struct{} // closed when the watcher ended
	once    sync.Once

	// Guarded by tr.wmu.
	seq      uint64
	outbox   []*hold          // assigned, not yet taken by the writer
	pending  map[string]*hold // assigned and unconfirmed, by event id
	proven   bool             // confirmed an event: its window is open
	taps     []*Message       // a tap's copies to write
	missed   int
	ended    bool
	reason   string
	expiry   *time.Timer
	expiryAt time.Time
}

// Watch connects a watcher to topic, starting the topic's worker if needed.
// Close it when done.
func (d *Dispatcher) Watch(topic string, o WatchOptions) (*Watcher, error) {
	if !d.Serves(topic) {
		return nil, ErrNotServed
	}
	tr := d.ensure(topic)
	if tr == nil {
		d.mu.Lock()
		closing := d.closing
		d.mu.Unlock()
		if closing {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("topic %q cannot be delivered (see the server log)", topic)
	}
	w := &Watcher{
		tr: tr, id: newWatcherID(), confirm: o.Confirm, onEnd: o.OnEnd,
		ready: make(chan struct{}, 1), gone: make(chan struct{}),
	}
	tr.wmu.Lock()
	defer tr.wmu.Unlock()
	if !o.Confirm {
		tr.taps = append(tr.taps, w)
		return w, nil
	}
	w.pending = map[string]*hold{}
	tr.confirmers = append(tr.confirmers, w)
	if tr.session == nil {
		ss := &watchSession{stop: make(chan struct{})}
		ss.claimer = newClaimer(tr, ss.stop)
		tr.session = ss
		d.wg.Add(2)
		go func() { defer d.wg.Done(); tr.pump(ss) }()
		go func() { defer d.wg.Done(); ss.claimer.run() }()
	}
	signal(tr.credit)
	tr.session.claimer.wake()
	return w, nil
}

// newWatcherID returns 16 random base32 characters: event ids are the
// watcher's id and a sequence number, so they cannot be guessed.
func newWatcherID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return base32.StdEncoding.EncodeToString(b[:])
}

// Ready is signalled when Next may have an event.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Gone is closed when the watcher has ended (Close, Release, or the
// dispatcher ended it: see Reason).
func (w *Watcher) Gone() <-chan struct{} { return w.gone }

// Reason says why the dispatcher ended the watcher; "" if it did not.
func (w *Watcher) Reason() string {
	w.tr.wmu.Lock()
	defer w.tr.wmu.Unlock()
	return w.reason
}

// Next returns the next event to write, if any. For a confirming watcher
// the event counts as sent from here on: if the watcher ends before it is
// confirmed, its timer is due again (a failed attempt).
func (w *Watcher) Next() (Event, bool) {
	tr := w.tr
	tr.wmu.Lock()
	defer tr.wmu.Unlock()
	if w.ended {
		return Event{}, false
	}
	var ev Event
	switch {
	case w.confirm && len(w.outbox) > 0:
		h := w.outbox[0]
		w.outbox[0] = nil
		w.outbox = w.outbox[1:]
		h.sent, h.sentAt = true, time.Now()
		ev = Event{ID: h.eventID, Msg: h.msg}
	case !w.confirm && len(w.taps) > 0:
		w.seq++
		ev = Event{ID: w.id + "-" + strconv.FormatUint(w.seq, 10), Msg: w.taps[0], Missed: w.missed}
		w.taps[0] = nil
		w.taps = w.taps[1:]
		w.missed = 0
	default:
		return Event{}, false
	}
	if len(w.outbox) > 0 || len(w.taps) > 0 {
		signal(w.ready)
	}
	return ev, true
}

// Close disconnects the watcher: its unconfirmed events are due again at
// once (each a failed attempt), those not sent yet go to the other
// watchers, or to the target when it was the last one.
func (w *Watcher) Close() { w.end("", false) }

// Release disconnects the watcher because the server stops: its timers
// are due again at once, without counting an attempt, for the next server.
func (w *Watcher) Release() { w.end("", true) }

func (w *Watcher) end(why string, release bool) {
	tr := w.tr
	tr.wmu.Lock()
	s := tr.endLocked(w, why, release)
	tr.wmu.Unlock()
	s.run(tr)
	tr.d.mu.Lock()
	tr.lastSeen = time.Now()
	tr.d.mu.Unlock()
}

// endLocked ends w; tr.wmu is held.
func (tr *topicRun) endLocked(w *Watcher, why string, release bool) (s settlements) {
	if w.ended {
		return nil
	}
	w.ended, w.reason = true, why
	w.once.Do(func() { close(w.gone) })
	if w.expiry != nil {
		w.expiry.Stop()
	}
	if !w.confirm {
		tr.taps = remove(tr.taps, w)
		w.taps = nil
		return nil
	}
	tr.confirmers = remove(tr.confirmers, w)
	for id, h := range w.pending {
		delete(tr.pending, id)
		switch {
		case release:
			h.state = holdResolved
			s.add(h, holdReleased)
		case h.sent:
			h.state = holdResolved
			s.add(h, holdUnconfirmed)
		default:
			// Never written: back in line, not an attempt.
			h.state, h.w, h.eventID = holdQueued, nil, ""
			heap.Push(&tr.queue, h)
			signal(tr.kick)
		}
	}
	w.pending, w.outbox = nil, nil
	if len(tr.confirmers) > 0 {
		signal(tr.credit)
		tr.session.claimer.wake()
		return s
	}
	// The last one: the session ends, and the queue goes to the target
	// (or back to the store when the server stops).
	if ss := tr.session; ss != nil {
		tr.session = nil
		close(ss.stop)
	}
	r := holdNobody
	if release {
		r = holdReleased
	}
	for tr.queue.Len() > 0 {
		h := heap.Pop(&tr.queue).(*hold)
		if h.state != holdResolved {
			h.state = holdResolved
			s.add(h, r)
		}
	}
	return s
}

func remove(ws []*Watcher, w *Watcher) []*Watcher {
	for i, x := range ws {
		if x == w {
			return append(ws[:i], ws[i+1:]...)
		}
	}
	return ws
}

// room is how many more events w may be given; tr.wmu is held.
func (w *Watcher) room() int {
	limit := 1
	if w.proven {
		limit = w.tr.window
	}
	return limit - len(w.pending)
}

// roomiest returns the confirming watcher that may take an event, those
// that have confirmed one first, then the one with the most room; nil if
// none has room. tr.wmu is held.
func (tr *topicRun) roomiest() *Watcher {
	var best *Watcher
	bestRoom := 0
	n := len(tr.confirmers)
	for i := range n {
		w := tr.confirmers[(tr.rr+i)%n]
		r := w.room()
		if r <= 0 {
			continue
		}
		if best == nil || w.proven && !best.proven || w.proven == best.proven && r > bestRoom {
			best, bestRoom = w, r
		}
	}
	if best != nil {
		tr.rr++
	}
	return best
}

// assign gives h to w; tr.wmu is held.
func (w *Watcher) assign(h *hold) {
	tr := w.tr
	w.seq++
	h.eventID = w.id + "-" + strconv.FormatUint(w.seq, 10)
	h.w, h.state, h.sent = w, holdAssigned, false
	h.deadline = time.Now().Add(tr.ackWait)
	if h.store != nil && h.store.leaseEnd.Before(h.deadline) {
		h.deadline = h.store.leaseEnd
	}
	w.pending[h.eventID] = h
	tr.pending[h.eventID] = h
	w.outbox = append(w.outbox, h)
	signal(w.ready)
	if w.expiryAt.IsZero() || h.deadline.Before(w.expiryAt) {
		w.expiryAt = h.deadline
		d := time.Until(h.deadline)
		if w.expiry == nil {
			w.expiry = time.AfterFunc(d, func() { tr.expire(w) })
		} else {
			w.expiry.Reset(d)
		}
	}
}

// expire ends w if one of its events is past its deadline, else waits for
// the next deadline.
func (tr *topicRun) expire(w *Watcher) {
	tr.wmu.Lock()
	if w.ended {
		tr.wmu.Unlock()
		return
	}
	now := time.Now()
	var first *hold
	for _, h := range w.pending {
		if first == nil || h.deadline.Before(first.deadline) {
			first = h
		}
	}
	if first == nil {
		w.expiryAt = time.Time{}
		tr.wmu.Unlock()
		return
	}
	if first.deadline.After(now) {
		w.expiryAt = first.deadline
		w.expiry.Reset(first.deadline.Sub(now))
		tr.wmu.Unlock()
		return
	}
	why := fmt.Sprintf("event %s (timer %q) was not confirmed within %s", first.eventID, first.msg.ID, tr.ackWait)
	s := tr.endLocked(w, why, false)
	tr.wmu.Unlock()
	tr.d.log.Info("watcher ended: an event was not confirmed in time; its timers are due again", "topic", tr.name, "why", why)
	s.run(tr)
	if w.onEnd != nil {
		w.onEnd()
	}
}

// Ack confirms events of topic by id: each one's timer is delivered (and
// acked in the store). It returns how many it confirmed and the ids it
// did not know: not sent, already confirmed, or given back (their watcher
// ended or their time ran out), whose timers are, or will be, sent again.
func (d *Dispatcher) Ack(topic string, ids []string) (acked int, unknown []string) {
	d.mu.Lock()
	tr := d.topics[topic]
	d.mu.Unlock()
	if tr == nil {
		return 0, ids
	}
	var s settlements
	tr.wmu.Lock()
	for _, id := range ids {
		h := tr.pending[id]
		if h == nil || !h.sent {
			unknown = append(unknown, id)
			continue
		}
		w := h.w
		delete(tr.pending, id)
		delete(w.pending, id)
		w.proven = true
		h.state = holdResolved
		s.add(h, holdConfirmed)
		acked++
	}
	if acked > 0 {
		signal(tr.credit)
		if tr.session != nil {
			tr.session.claimer.wake()
		}
	}
	tr.wmu.Unlock()
	s.run(tr)
	return acked, unknown
}

// offer queues msg for the confirming watchers and returns its hold, or
// nil when there are none (the caller delivers to the target).
func (tr *topicRun) offer(msg *Message) *hold {
	tr.wmu.Lock()
	defer tr.wmu.Unlock()
	if len(tr.confirmers) == 0 {
		return nil
	}
	h := &hold{msg: msg, done: make(chan holdResult, 1)}
	heap.Push(&tr.queue, h)
	signal(tr.kick)
	return h
}

// abandon gives up a hold whose handler's context ended (lease lost,
// shutdown): a later confirmation of its event is refused.
func (tr *topicRun) abandon(h *hold) {
	tr.wmu.Lock()
	defer tr.wmu.Unlock()
	switch h.state {
	case holdQueued:
		h.state = holdResolved // the pump drops it
	case holdAssigned:
		h.state = holdResolved
		delete(tr.pending, h.eventID)
		if w := h.w; w != nil {
			delete(w.pending, h.eventID)
			for i, x := range w.outbox {
				if x == h {
					w.outbox = append(w.outbox[:i], w.outbox[i+1:]...)
					break
				}
			}
		}
		signal(tr.credit)
	}
}

// tapCopy gives each tap a copy of msg.
func (tr *topicRun) tapCopy(msg *Message) {
	tr.wmu.Lock()
	defer tr.wmu.Unlock()
	for _, w := range tr.taps {
		if len(w.taps) >= tapBuffer {
			w.missed++
			continue
		}
		w.taps = append(w.taps, msg)
		signal(w.ready)
	}
}

// stallAfter is how long an event may wait for its confirmation before
// the claimer steps in (see wantClaims); a quarter of the ack wait when
// that is shorter.
const stallAfter = time.Second

// wantClaims is how many timers the claimer should claim: none while
// every sent event is confirmed within stallAfter (the topic's worker then
// feeds the watchers alone, in due order: its handler slots are free
// again within milliseconds), else the confirming watchers' free room,
// less what waits in the queue. The claimer's timers may overtake older
// ones that the worker holds for a free handler slot (the embedded
// store claims ahead of its slots), which is why it waits for a stall.
func (tr *topicRun) wantClaims() int {
	tr.wmu.Lock()
	defer tr.wmu.Unlock()
	stalled := time.Now().Add(-min(stallAfter, tr.ackWait/4))
	late := false
	for _, h := range tr.pending {
		if h.sent && h.sentAt.Before(stalled) {
			late = true
			break
		}
	}
	if !late {
		return 0
	}
	room := 0
	for _, w := range tr.confirmers {
		room += max(w.room(), 0)
	}
	return max(room-tr.queue.Len(), 0)
}

// watchers counts the topic's watchers, both kinds.
func (tr *topicRun) watchers() int {
	tr.wmu.Lock()
	defer tr.wmu.Unlock()
	return len(tr.confirmers) + len(tr.taps)
}

// releaseWatchers ends every watcher of the topic, releasing their timers
// (the server stops).
func (tr *topicRun) releaseWatchers() {
	tr.wmu.Lock()
	var s settlements
	for _, w := range append(append([]*Watcher(nil), tr.confirmers...), tr.taps...) {
		s = append(s, tr.endLocked(w, "the server is shutting down", true)...)
	}
	tr.wmu.Unlock()
	s.run(tr)
}
