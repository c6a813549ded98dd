package ontimeredis

import (
	"context"
	"sync"
	"time"
)

// hintWriter writes, in the background and coalesced, the writes a store
// call on a Redis Cluster makes after its script that need not hold the
// call up (on one Redis the scripts make them themselves, atomically):
//
//   - the topic index hints that can only raise a topic's entry, after a
//     claim, a cancel, or a settle of acks and dead letters only: an
//     entry left too low costs one claim that finds nothing, never a late
//     timer, so the caller need not wait for it. Hints that can lower an
//     entry (publishes, retries, snoozes, replays, a recurring timer's next
//     tick) are written before the call returns, as a worker must see the
//     new head.
//   - the additions to the topic registry (Topics lists from it).
//
// While one batch is being written, what arrives is queued and written in
// the next, one hint per topic (the newest: hints are versioned by the
// topic's clock, and hint.lua drops an older exact hint anyway) and one
// SADD for every new topic: a busy topic costs the index one write per
// round trip to the index's node, not one per call. A process that
// crashes loses what is queued, as a crash between a script and its hint
// always could: the next claim of the topic or SyncTopicIndex repairs the
// index, and the topic's next publish the registry.
//
// The driver's reads of the index and the registry (DueTopics, Topics,
// CountTopics, SyncTopicIndex) wait first for what this process queued
// before them, so a process reads its own writes.
type hintWriter struct {
	d *Driver

	mu      sync.Mutex
	hints   map[string]queuedHint // topic → newest exact hint
	reg     map[string]struct{}   // topics to add to the registry
	queued  uint64                // writes queued so far
	written uint64                // of those, how many were written (or failed)
	flushed chan struct{}         // closed, then replaced, when written grows
	started bool
	closed  bool

	kick   chan struct{} // (cap 1) something is queued
	urgent chan struct{} // (cap 1) a reader waits: write without lingering
	stop   chan struct{}
	done   chan struct{}
}

// queuedHint is one exact hint: the topic's clock (µs) and its head (ms),
// "" when the topic holds nothing.
type queuedHint struct {
	version int64
	score   string
}

// hintLinger is how long the writer lets writes gather before it writes
// them, unless a reader waits (sync): a topic claimed and acked in a loop
// costs the index one hint per linger, not one per call. The hints it
// delays can only raise an entry, so the delay costs no timer anything.
const hintLinger = 5 * time.Millisecond

// hintBatch bounds the hints and registry members of one write.
const hintBatch = 500

func (w *hintWriter) init(d *Driver) {
	w.d = d
	w.hints = map[string]queuedHint{}
	w.reg = map[string]struct{}{}
	w.flushed = make(chan struct{})
	w.kick = make(chan struct{}, 1)
	w.urgent = make(chan struct{}, 1)
	w.stop = make(chan struct{})
	w.done = make(chan struct{})
}

// hint queues an exact hint that cannot lower the topic's entry.
func (w *hintWriter) hint(topic string, version int64, score string) {
	w.mu.Lock()
	if cur, ok := w.hints[topic]; !ok || version > cur.version {
		w.hints[topic] = queuedHint{version, score}
	}
	w.enqueueLocked()
}

// register queues the addition of topic to the registry.
func (w *hintWriter) register(topic string) {
	w.mu.Lock()
	w.reg[topic] = struct{}{}
	w.enqueueLocked()
}

// enqueueLocked counts a queued write and kicks the writer; it unlocks.
func (w *hintWriter) enqueueLocked() {
	w.queued++
	if !w.started && !w.closed {
		w.started = true
		go w.run()
	}
	closed := w.closed
	w.mu.Unlock()
	if closed {
		// Close has begun: write it now, as the writer may be gone
		w.flush()
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *hintWriter) run() {
	defer close(w.done)
	linger := time.NewTimer(hintLinger)
	linger.Stop()
	for {
		urgent := false
		select {
		case <-w.kick:
		case <-w.urgent:
			urgent = true
		case <-w.stop:
			return
		}
		if !urgent {
			linger.Reset(hintLinger)
			select {
			case <-linger.C:
			case <-w.urgent:
				linger.Stop()
			case <-w.stop:
				linger.Stop()
				return
			}
		}
		w.flush()
	}
}

// flush writes what is queued: the hints in one script call and the
// registry in one SADD per hintBatch, pipelined (the index and the
// registry may live on two nodes). A failed write is logged: what it
// carried is lost, as a hint after a crash is.
func (w *hintWriter) flush() {
	w.mu.Lock()
	var hints map[string]queuedHint
	var reg map[string]struct{}
	if len(w.hints) > 0 {
		hints, w.hints = w.hints, map[string]queuedHint{}
	}
	if len(w.reg) > 0 {
		reg, w.reg = w.reg, map[string]struct{}{}
	}
	upto := w.queued
	w.mu.Unlock()
	if len(hints) > 0 || len(reg) > 0 {
		w.write(hints, reg)
	}
	w.mu.Lock()
	if upto > w.written {
		w.written = upto
		close(w.flushed)
		w.flushed = make(chan struct{})
	}
	w.mu.Unlock()
}

func (w *hintWriter) write(hints map[string]queuedHint, reg map[string]struct{}) {
	d := w.d
	ctx, cancel := context.WithTimeout(context.Background(), hintTimeout)
	defer cancel()
	quads := make([]any, 0, 4*min(len(hints), hintBatch))
	writeQuads := func() {
		if len(quads) == 0 {
			return
		}
		if err := d.writeHints(ctx, quads); err != nil {
			d.log.Warn("ontimeredis: topic index hints lost; each topic's next claim or SyncTopicIndex repairs it", "topics", len(quads)/4, "error", err)
		}
		quads = quads[:0]
	}
	for topic, h := range hints {
		kind := hintExact
		if h.score == "" {
			kind = "r"
		}
		quads = append(quads, topic, h.version, kind, h.score)
		if len(quads) == 4*hintBatch {
			writeQuads()
		}
	}
	writeQuads()
	members := make([]any, 0, min(len(reg), hintBatch))
	addMembers := func() {
		if len(members) == 0 {
			return
		}
		if _, err := bounded(d, ctx, func(ctx context.Context) (int64, error) {
			return d.rdb.SAdd(ctx, d.registryKey(), members...).Result()
		}); err != nil {
			d.log.Warn("ontimeredis: adding topics to the registry failed; Topics lists each after its next schedule", "topics", len(members), "error", err)
		}
		members = members[:0]
	}
	for topic := range reg {
		members = append(members, topic)
		if len(members) == hintBatch {
			addMembers()
		}
	}
	addMembers()
}

// sync waits until what this process queued before the call is written,
// or ctx ends.
func (w *hintWriter) sync(ctx context.Context) error {
	w.mu.Lock()
	target := w.queued
	for w.written < target {
		ch := w.flushed
		w.mu.Unlock()
		select {
		case w.urgent <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
	}
	w.mu.Unlock()
	return nil
}

// close stops the writer and writes what is queued.
func (w *hintWriter) close() {
	w.mu.Lock()
	w.closed = true
	started := w.started
	w.mu.Unlock()
	if started {
		close(w.stop)
		<-w.done
	}
	w.flush()
}
