package ontimebolt

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

var _ ontimedriver.TopicIndex = (*Driver)(nil)

// Limits of DueTopics.
const (
	// maxDueTopics caps DueTopics's limit.
	maxDueTopics = 1000
	// maxPassedOver is how many index entries DueTopics passes over (topics
	// that do not match the pattern, or due ones beyond the limit while it
	// looks for Next) before it gives up looking; Next is then zero.
	maxPassedOver = 1000
)

// topicIndex is the in-memory index of topics by the instant their next
// timer becomes claimable: the first key of each topic's q bucket. It is
// built at Open and set after every committed write transaction for the
// topics that transaction wrote (see Driver.runBatch), so it never shows a
// write that was rolled back.
//
// It is a binary min-heap ordered by (instant, topic), with each entry
// knowing its position so that an update is one heap.Fix (O(log n)), and a
// map from topic to entry. Queries walk the heap in order without changing
// it (a second, small heap holds the frontier of positions to visit), so a
// query costs O(k log k) for the k entries it visits, whatever the size of
// the index.
type topicIndex struct {
	mu      sync.Mutex
	heap    []*indexEntry
	byTopic map[string]*indexEntry

	// visited counts the entries queries have looked at, for the tests.
	visited atomic.Int64
}

type indexEntry struct {
	topic string
	at    int64 // microseconds, as in the q keys
	pos   int   // index in topicIndex.heap
}

func entryLess(a, b *indexEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.topic < b.topic
}

func newTopicIndex() *topicIndex {
	return &topicIndex{byTopic: make(map[string]*indexEntry)}
}

// A headUpdate is a topic's new head: its first claimable instant, or ok
// false when it holds no timers.
type headUpdate struct {
	topic string
	at    int64
	ok    bool
}

// apply sets the heads of a committed transaction.
func (x *topicIndex) apply(ups []headUpdate) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, u := range ups {
		if u.ok {
			x.set(u.topic, u.at)
		} else {
			x.remove(u.topic)
		}
	}
}

// load fills an empty index with the heads of the topics that have
// timers (Open), building the heap at once (O(n)); on an index that is not
// empty it is apply.
func (x *topicIndex) load(ups []headUpdate) {
	x.mu.Lock()
	if len(x.heap) > 0 {
		x.mu.Unlock()
		x.apply(ups)
		return
	}
	defer x.mu.Unlock()
	entries := make([]indexEntry, 0, len(ups))
	x.heap = make([]*indexEntry, 0, len(ups))
	x.byTopic = make(map[string]*indexEntry, len(ups))
	for _, u := range ups {
		if !u.ok {
			continue
		}
		if e := x.byTopic[u.topic]; e != nil { // a topic given twice: its earlier instant
			e.at = min(e.at, u.at)
			continue
		}
		entries = append(entries, indexEntry{topic: u.topic, at: u.at, pos: len(x.heap)})
		e := &entries[len(entries)-1]
		x.heap = append(x.heap, e)
		x.byTopic[u.topic] = e
	}
	for i := len(x.heap)/2 - 1; i >= 0; i-- {
		x.down(i)
	}
}

// set puts or moves a topic's entry. The caller holds mu.
func (x *topicIndex) set(topic string, at int64) {
	if e := x.byTopic[topic]; e != nil {
		if e.at != at {
			e.at = at
			x.fix(e.pos)
		}
		return
	}
	e := &indexEntry{topic: topic, at: at, pos: len(x.heap)}
	x.byTopic[topic] = e
	x.heap = append(x.heap, e)
	x.up(e.pos)
}

// remove drops a topic's entry, if any. The caller holds mu.
func (x *topicIndex) remove(topic string) {
	e := x.byTopic[topic]
	if e == nil {
		return
	}
	delete(x.byTopic, topic)
	last := len(x.heap) - 1
	i := e.pos
	if i != last {
		x.swap(i, last)
	}
	x.heap[last] = nil
	x.heap = x.heap[:last]
	if i != last {
		x.fix(i)
	}
}

func (x *topicIndex) swap(i, j int) {
	h := x.heap
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}

func (x *topicIndex) fix(i int) {
	if !x.down(i) {
		x.up(i)
	}
}

func (x *topicIndex) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !entryLess(x.heap[i], x.heap[p]) {
			return
		}
		x.swap(i, p)
		i = p
	}
}

func (x *topicIndex) down(i0 int) bool {
	i, n := i0, len(x.heap)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && entryLess(x.heap[r], x.heap[c]) {
			c = r
		}
		if !entryLess(x.heap[c], x.heap[i]) {
			break
		}
		x.swap(i, c)
		i = c
	}
	return i > i0
}

// get returns a topic's indexed instant (for the tests).
func (x *topicIndex) get(topic string) (int64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.byTopic[topic]; e != nil {
		return e.at, true
	}
	return 0, false
}

// due returns up to limit topics matching pattern with an instant at or
// before now, earliest first, and the earliest instant after now of a
// matching topic (ok false when there is none, or when maxPassedOver
// entries were passed over before it was found).
//
// It visits the heap's entries in order with a frontier heap of positions:
// an entry's children are visited only after it, so the walk stops as soon
// as it has its answer, having looked at the entries before that answer
// and their children only.
func (x *topicIndex) due(now int64, pattern string, limit int) (topics []string, ats []int64, next int64, ok bool) {
	all := pattern == "*"
	topics = []string{}
	x.mu.Lock()
	defer x.mu.Unlock()
	h := x.heap
	if len(h) == 0 {
		return topics, ats, 0, false
	}
	var (
		f       = frontier{h: h, pos: make([]int, 0, 16)}
		passed  int
		visited int64
	)
	defer func() { x.visited.Add(visited) }()
	f.push(0)
	for len(f.pos) > 0 {
		i := f.pop()
		e := h[i]
		visited++
		match := all || ontimedriver.MatchTopic(pattern, e.topic)
		switch {
		case match && e.at > now:
			return topics, ats, e.at, true
		case match && len(topics) < limit:
			topics = append(topics, e.topic)
			ats = append(ats, e.at)
		default:
			if passed++; passed > maxPassedOver {
				return topics, ats, 0, false
			}
		}
		if c := 2*i + 1; c < len(h) {
			f.push(c)
			if c+1 < len(h) {
				f.push(c + 1)
			}
		}
	}
	return topics, ats, 0, false
}

// through returns every topic whose instant is before target, earliest
// first, walking the heap as due does: its cost grows with the topics it
// returns, not with the index's size.
func (x *topicIndex) through(target int64) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	h := x.heap
	var topics []string
	if len(h) == 0 {
		return topics
	}
	f := frontier{h: h, pos: make([]int, 0, 16)}
	f.push(0)
	for len(f.pos) > 0 {
		i := f.pop()
		if h[i].at >= target {
			break
		}
		topics = append(topics, h[i].topic)
		if c := 2*i + 1; c < len(h) {
			f.push(c)
			if c+1 < len(h) {
				f.push(c + 1)
			}
		}
	}
	return topics
}

// frontier is a min-heap of positions in an entry heap, ordered by their
// entries.
type frontier struct {
	h   []*indexEntry
	pos []int
}

func (f *frontier) less(i, j int) bool { return entryLess(f.h[f.pos[i]], f.h[f.pos[j]]) }

func (f *frontier) push(p int) {
	f.pos = append(f.pos, p)
	i := len(f.pos) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !f.less(i, parent) {
			break
		}
		f.pos[i], f.pos[parent] = f.pos[parent], f.pos[i]
		i = parent
	}
}

func (f *frontier) pop() int {
	top := f.pos[0]
	last := len(f.pos) - 1
	f.pos[0] = f.pos[last]
	f.pos = f.pos[:last]
	i, n := 0, last
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && f.less(r, c) {
			c = r
		}
		if !f.less(c, i) {
			break
		}
		f.pos[i], f.pos[c] = f.pos[c], f.pos[i]
		i = c
	}
	return top
}

// topicHeads reads the heads of the given topics in tx. A topic that cannot
// be read (a damaged file) is given the earliest instant, so that a worker
// claims it and meets the error instead of the index hiding the topic.
func (d *Driver) topicHeads(tx *bbolt.Tx, topics []string) []headUpdate {
	ups := make([]headUpdate, 0, len(topics))
	for _, t := range topics {
		at, ok, err := d.readHead(tx, t)
		if err != nil {
			at, ok = minMicros, true
		}
		ups = append(ups, headUpdate{topic: t, at: at, ok: ok})
	}
	return ups
}

// batchTopics returns the distinct topics a batch of requests writes, in
// the order they first appear.
func batchTopics(batch []*request) []string {
	var (
		topics []string
		seen   map[string]struct{} // for large batches only
	)
	if len(batch) > 16 {
		seen = make(map[string]struct{}, len(batch))
	}
	for _, r := range batch {
		if r.topic == "" {
			continue
		}
		if seen != nil {
			if _, ok := seen[r.topic]; ok {
				continue
			}
			seen[r.topic] = struct{}{}
		} else if slices.Contains(topics, r.topic) {
			continue
		}
		topics = append(topics, r.topic)
	}
	return topics
}

// refreshIndex re-reads the heads of topics after a commit that failed
// (whether it reached the disk is unknown; bbolt goes on with the state
// before it, which is what later transactions see).
func (d *Driver) refreshIndex(topics []string) {
	if len(topics) == 0 {
		return
	}
	var ups []headUpdate
	err := d.view(func(tx *bbolt.Tx) error {
		ups = d.topicHeads(tx, topics)
		return nil
	})
	if err != nil {
		ups = ups[:0]
		for _, t := range topics {
			ups = append(ups, headUpdate{topic: t, at: minMicros, ok: true})
		}
	}
	d.idx.apply(ups)
}

// buildIndex fills the index from the file: the first key of every topic
// in q and in f, walking the two buckets side by side in topic order and
// stepping past each topic's other keys (a few Next calls, or one seek
// past a topic with many), so Open reads no timer record, about one page
// per topic with timers (fewer when their keys share pages), and nothing
// of a topic without. A key that does not parse (a damaged page) is
// logged and skipped; a page that cannot be read fails Open with
// ErrCorrupt.
func (d *Driver) buildIndex() error {
	var (
		ups     []headUpdate
		damaged int
	)
	err := d.view(func(tx *bbolt.Tx) error {
		s, err := dataBucketsOf(tx, d.path, 0)
		if err != nil {
			return err
		}
		q, f := newHeadCursor(s.queue), newHeadCursor(s.future)
		for q.k != nil || f.k != nil {
			c := 0
			switch {
			case q.k == nil:
				c = 1
			case f.k == nil:
				c = -1
			default:
				c = bytes.Compare(q.prefix, f.prefix)
			}
			switch {
			case c < 0:
				ups = append(ups, headUpdate{topic: string(q.topic), at: q.at, ok: true})
				q.nextTopic()
			case c > 0:
				ups = append(ups, headUpdate{topic: string(f.topic), at: f.at, ok: true})
				f.nextTopic()
			default:
				ups = append(ups, headUpdate{topic: string(q.topic), at: min(q.at, f.at), ok: true})
				q.nextTopic()
				f.nextTopic()
			}
		}
		damaged = q.damaged + f.damaged
		return nil
	})
	if err != nil {
		return fmt.Errorf("ontimebolt: %s: build the topic index: %w", d.path, err)
	}
	if damaged > 0 {
		d.log.Error("ontimebolt: claim index keys that do not parse were skipped; the file is probably damaged (Options.CheckOnOpen checks it)",
			"path", d.path, "keys", damaged)
	}
	d.idx.load(ups)
	return nil
}

// headCursor walks a claim index bucket topic by topic: k is a topic's
// first key, with its prefix, topic and instant; nil past the last.
type headCursor struct {
	c         *bbolt.Cursor
	k, prefix []byte
	topic     []byte
	at        int64
	damaged   int
}

func newHeadCursor(b *bbolt.Bucket) *headCursor {
	h := &headCursor{c: b.Cursor()}
	h.k, _ = h.c.First()
	h.parse()
	return h
}

// parse reads the key at k, stepping over keys that do not parse.
func (h *headCursor) parse() {
	for h.k != nil {
		topic, rest, ok := splitTopic(h.k)
		var at int64
		if ok {
			at, _, ok = splitKey(rest)
		}
		if ok {
			h.topic, h.at, h.prefix = topic, at, h.k[:len(h.k)-len(rest)]
			return
		}
		h.damaged++
		h.k, _ = h.c.Next()
	}
}

// nextTopic moves to the next topic's first key: a few steps when the
// topic has few keys (the usual case with many topics), else one seek
// past them.
func (h *headCursor) nextTopic() {
	prefix := h.prefix
	for range 4 {
		if h.k, _ = h.c.Next(); h.k == nil || !bytes.HasPrefix(h.k, prefix) {
			h.parse()
			return
		}
	}
	if end := prefixEnd(prefix); end != nil {
		h.k, _ = h.c.Seek(end)
	} else {
		h.k = nil
	}
	h.parse()
}

// readHead reads a topic's head (as topicBuckets.head), turning a panic or
// fault on a damaged page into an error.
func (d *Driver) readHead(tx *bbolt.Tx, topic string) (at int64, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading the file failed: %v", r)
		}
	}()
	tb, err := d.lookup(tx, topic)
	if err != nil {
		return 0, false, err
	}
	at, ok = tb.head()
	return at, ok, nil
}

// TopicIndexed reports true: the store always keeps the topic index.
func (d *Driver) TopicIndexed() bool { return true }

// DueTopics returns up to limit topics matching pattern whose next timer is
// claimable now, earliest first, and the earliest instant after now of a
// matching topic. See ontimedriver.TopicIndex and "Topic index" in the
// package documentation. A pattern that ontimedriver.ValidatePattern
// refuses, or a limit below 1, is an error wrapping ontimedriver.ErrInvalid;
// a limit over 1000 is taken as 1000.
func (d *Driver) DueTopics(ctx context.Context, pattern string, within time.Duration, limit int) (*ontimedriver.DueTopicsResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ontimedriver.ValidatePattern(pattern); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: due topics limit %d is not positive", ontimedriver.ErrInvalid, limit)
	}
	if within < 0 {
		return nil, fmt.Errorf("%w: due topics within %s is negative", ontimedriver.ErrInvalid, within)
	}
	limit = min(limit, maxDueTopics)
	if d.closed.Load() {
		return nil, ontimedriver.ErrClosed
	}
	nowUs := floorMicros(time.Now())
	topics, ats, next, ok := d.idx.due(nowUs+within.Microseconds(), pattern, limit)
	res := &ontimedriver.DueTopicsResult{Topics: topics, At: make([]time.Time, len(ats)), Now: fromMicros(nowUs)}
	for i, at := range ats {
		res.At[i] = fromMicros(at)
	}
	if ok {
		res.Next = fromMicros(next)
	}
	return res, nil
}
