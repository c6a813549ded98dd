package ontimebolt

import (
	"bytes"
	"encoding/binary"
	"errors"

	"go.etcd.io/bbolt"
)

// stores are the store-wide data buckets inside a transaction.
type stores struct {
	meta, timers, farTimers, queue, future, leases, dead, deadIdx *bbolt.Bucket

	// sched holds the schedule entries of recurring timers (bucket r,
	// created with the first one: nil in a store that never had one); tx
	// creates it.
	sched *bbolt.Bucket
	tx    *bbolt.Tx

	// near is the instant that splits the timers: a timer claimable
	// earlier has its record in t and its claim index entry in q, a later
	// one in u and f (see "Near and far" in layout.go). Readers look in
	// both.
	near int64
}

// fillPercent is how full bbolt fills a page of the timers and the claim
// index before it splits it (bbolt's default is half). Their keys are
// mostly written in order (UUIDv7 ids; instants that grow), so a page that
// splits is seldom written into again: at half full, every page of these
// buckets would stay half empty, and every commit would write twice the
// pages it needs.
const fillPercent = 0.9

// dataBucketsOf binds the data buckets of tx; a missing one means damage.
// Claim index entries written through it go to q before near, else to f.
func dataBucketsOf(tx *bbolt.Tx, path string, near int64) (*stores, error) {
	s := &stores{
		meta:      tx.Bucket(bucketTopicMeta),
		timers:    tx.Bucket(bucketTimers),
		farTimers: tx.Bucket(bucketFarTimers),
		queue:     tx.Bucket(bucketQueue),
		future:    tx.Bucket(bucketFuture),
		leases:    tx.Bucket(bucketLeases),
		dead:      tx.Bucket(bucketDead),
		deadIdx:   tx.Bucket(bucketDeadIdx),
		sched:     tx.Bucket(bucketSched),
		tx:        tx,
		near:      near,
	}
	if s.meta == nil || s.timers == nil || s.farTimers == nil || s.queue == nil || s.future == nil || s.leases == nil || s.dead == nil || s.deadIdx == nil {
		return nil, corruptError(path, "a bucket of the store is missing")
	}
	if tx.Writable() {
		for _, b := range []*bbolt.Bucket{s.timers, s.farTimers, s.queue, s.future} {
			b.FillPercent = fillPercent
		}
	}
	return s, nil
}

// putClaimable writes a claim index entry to q or f, by its instant.
func (s *stores) putClaimable(key []byte, us int64) error {
	if us < s.near {
		return s.queue.Put(key, nil)
	}
	return s.future.Put(key, nil)
}

// deleteClaimable deletes a claim index entry from q and f (a key that is
// not there costs a lookup and writes nothing).
func (s *stores) deleteClaimable(key []byte) error {
	if err := s.queue.Delete(key); err != nil {
		return err
	}
	return s.future.Delete(key)
}

// topicBuckets is one topic's view of the data buckets inside a
// transaction, plus counter deltas that flush writes back.
type topicBuckets struct {
	path, name string
	prefix     []byte // tp(topic): the prefix of the topic's q, l, x and y keys
	*stores

	dn, dd int64 // pending changes to the topic's counts
}

// lookup returns the topic's view of tx's buckets. A topic that holds
// nothing has no keys: every lookup in it finds nothing.
func (d *Driver) lookup(tx *bbolt.Tx, topic string) (*topicBuckets, error) {
	s, err := dataBucketsOf(tx, d.path, d.near.Load())
	if err != nil {
		return nil, err
	}
	return s.topic(d.path, topic), nil
}

// topic returns a topic's view of s.
func (s *stores) topic(path, topic string) *topicBuckets {
	return &topicBuckets{path: path, name: topic, prefix: topicPrefix(topic), stores: s}
}

func (tb *topicBuckets) corrupt(kind, id string, err error) error {
	return corruptError(tb.path, "topic %q: %s %q: %v", tb.name, kind, id, err)
}

// key returns the full key of the topic's index entry (or dead letter)
// whose part after the prefix is suffix.
func (tb *topicBuckets) key(suffix []byte) []byte {
	k := make([]byte, len(tb.prefix)+len(suffix))
	n := copy(k, tb.prefix)
	copy(k[n:], suffix)
	return k
}

// idx is indexKey in this topic.
func (tb *topicBuckets) idx(us int64, id string) []byte { return indexKey(tb.prefix, us, id) }

// cursor walks the keys of one topic in b, returning the part of each key
// after the topic's prefix (nil past the topic's last key).
type topicCursor struct {
	c      *bbolt.Cursor
	prefix []byte
}

func (tb *topicBuckets) cursor(b *bbolt.Bucket) topicCursor {
	return topicCursor{c: b.Cursor(), prefix: tb.prefix}
}

// first returns the topic's first key.
func (tc topicCursor) first() []byte {
	k, _ := tc.c.Seek(tc.prefix)
	return tc.own(k)
}

// seek returns the topic's first key at or after suffix.
func (tc topicCursor) seek(suffix []byte) []byte {
	k, _ := tc.c.Seek(append(bytes.Clone(tc.prefix), suffix...))
	return tc.own(k)
}

// next returns the topic's next key.
func (tc topicCursor) next() []byte {
	k, _ := tc.c.Next()
	return tc.own(k)
}

func (tc topicCursor) own(k []byte) []byte {
	if k == nil || !bytes.HasPrefix(k, tc.prefix) {
		return nil
	}
	return k[len(tc.prefix):]
}

// claimCursor walks the topic's claim index, q and f merged, in key order
// (claimable instant, then id), returning the part of each key after the
// topic's prefix.
type claimCursor struct {
	q, f   topicCursor
	kq, kf []byte
	fromQ  bool // the key last returned came from q
}

func (tb *topicBuckets) claimCursor() *claimCursor {
	return &claimCursor{q: tb.cursor(tb.queue), f: tb.cursor(tb.future)}
}

func (m *claimCursor) first() []byte {
	m.kq, m.kf = m.q.first(), m.f.first()
	return m.pick()
}

func (m *claimCursor) seek(suffix []byte) []byte {
	m.kq, m.kf = m.q.seek(suffix), m.f.seek(suffix)
	return m.pick()
}

func (m *claimCursor) next() []byte {
	if m.fromQ {
		m.kq = m.q.next()
	} else {
		m.kf = m.f.next()
	}
	return m.pick()
}

func (m *claimCursor) pick() []byte {
	switch {
	case m.kq == nil && m.kf == nil:
		return nil
	case m.kf == nil || (m.kq != nil && bytes.Compare(m.kq, m.kf) <= 0):
		m.fromQ = true
		return m.kq
	}
	m.fromQ = false
	return m.kf
}

// rawTimer returns a timer's stored record, from t or u, or nil.
func (s *stores) rawTimer(key []byte) []byte {
	if raw := s.timers.Get(key); raw != nil {
		return raw
	}
	return s.farTimers.Get(key)
}

// getTimer loads a timer. found is false when there is none; err wraps
// ErrCorrupt when there is one that does not decode.
func (tb *topicBuckets) getTimer(id string) (rec record, found bool, err error) {
	key := timerKey(tb.name, id)
	raw := tb.rawTimer(key)
	if raw == nil {
		return rec, false, nil
	}
	rec, err = decodeRecord(key, raw)
	if err != nil {
		return rec, true, tb.corrupt("timer", id, err)
	}
	return rec, true, nil
}

// hasTimer reports whether the topic has a timer with that id.
func (tb *topicBuckets) hasTimer(id string) bool {
	return tb.rawTimer(timerKey(tb.name, id)) != nil
}

// putTimer writes a timer and its index entries. The caller has removed the
// entries of the previous version (unindex).
func (tb *topicBuckets) putTimer(id string, rec *record) error {
	key := timerKey(tb.name, id)
	in, other := tb.timers, tb.farTimers
	if rec.claimable() >= tb.near {
		in, other = other, in
	}
	// The previous version may be in the other bucket.
	if err := other.Delete(key); err != nil {
		return err
	}
	if err := in.Put(key, rec.encode(key)); err != nil {
		return err
	}
	if err := tb.putClaimable(tb.idx(rec.claimable(), id), rec.claimable()); err != nil {
		return err
	}
	if rec.leased() {
		return tb.leases.Put(tb.idx(rec.leaseUntil, id), nil)
	}
	return nil
}

// unindex deletes the index entries of a stored timer.
func (tb *topicBuckets) unindex(id string, rec *record) error {
	if err := tb.deleteClaimable(tb.idx(rec.claimable(), id)); err != nil {
		return err
	}
	if rec.leased() {
		return tb.leases.Delete(tb.idx(rec.leaseUntil, id))
	}
	return nil
}

// removeTimer deletes a stored timer with its index entries.
func (tb *topicBuckets) removeTimer(id string, rec *record) error {
	if err := tb.unindex(id, rec); err != nil {
		return err
	}
	tb.dn--
	if err := tb.deleteSched(id); err != nil {
		return err
	}
	return tb.deleteRecord(timerKey(tb.name, id))
}

// removeDamagedTimer deletes a timer whose record does not decode. Its index
// keys are unknown, so the topic's indexes are searched (slow, and only
// ever needed after damage).
func (tb *topicBuckets) removeDamagedTimer(id string) error {
	if err := tb.deleteByID(tb.queue, id); err != nil {
		return err
	}
	if err := tb.deleteByID(tb.future, id); err != nil {
		return err
	}
	if err := tb.deleteByID(tb.leases, id); err != nil {
		return err
	}
	if err := tb.deleteSched(id); err != nil {
		return err
	}
	tb.dn--
	return tb.deleteRecord(timerKey(tb.name, id))
}

// deleteRecord deletes a timer's record from t and u.
func (s *stores) deleteRecord(key []byte) error {
	if err := s.timers.Delete(key); err != nil {
		return err
	}
	return s.farTimers.Delete(key)
}

// deleteByID deletes every index entry of the topic in b that names id.
func (tb *topicBuckets) deleteByID(b *bbolt.Bucket, id string) error {
	var keys [][]byte
	c := tb.cursor(b)
	for k := c.first(); k != nil; k = c.next() {
		if _, kid, ok := splitKey(k); ok && string(kid) == id {
			keys = append(keys, tb.key(k))
		}
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// deadKey is a dead letter's key in x.
func (tb *topicBuckets) deadKey(id string) []byte { return tb.key([]byte(id)) }

// getDead loads a dead letter.
func (tb *topicBuckets) getDead(id string) (rec deadRecord, found bool, err error) {
	key := tb.deadKey(id)
	raw := tb.dead.Get(key)
	if raw == nil {
		return rec, false, nil
	}
	rec, err = decodeDead(key, raw)
	if err != nil {
		return rec, true, tb.corrupt("dead letter", id, err)
	}
	return rec, true, nil
}

// bury writes a dead letter, replacing one with the same id.
func (tb *topicBuckets) bury(id string, rec *deadRecord) error {
	old, found, err := tb.getDead(id)
	switch {
	case err != nil:
		if err := tb.removeDamagedDead(id); err != nil {
			return err
		}
	case found:
		if err := tb.removeDead(id, &old); err != nil {
			return err
		}
	}
	key := tb.deadKey(id)
	if err := tb.dead.Put(key, rec.encode(key)); err != nil {
		return err
	}
	tb.dd++
	return tb.deadIdx.Put(tb.idx(rec.diedAt, id), nil)
}

// removeDead deletes a dead letter and its index entry.
func (tb *topicBuckets) removeDead(id string, rec *deadRecord) error {
	if err := tb.deadIdx.Delete(tb.idx(rec.diedAt, id)); err != nil {
		return err
	}
	tb.dd--
	return tb.dead.Delete(tb.deadKey(id))
}

func (tb *topicBuckets) removeDamagedDead(id string) error {
	if err := tb.deleteByID(tb.deadIdx, id); err != nil {
		return err
	}
	tb.dd--
	return tb.dead.Delete(tb.deadKey(id))
}

// head returns the first claimable instant of the topic.
func (tb *topicBuckets) head() (int64, bool) {
	us, _, ok := splitKey(tb.claimCursor().first())
	return us, ok
}

// counts returns the topic's counts of timers and dead letters.
func (tb *topicBuckets) counts() (n, d int64, err error) {
	v := tb.meta.Get([]byte(tb.name))
	if v == nil {
		return 0, 0, nil
	}
	n, d, err = decodeCounts(v)
	if err != nil {
		return 0, 0, corruptError(tb.path, "topic %q: counts: %v", tb.name, err)
	}
	return n, d, nil
}

// flush writes the count deltas. A topic left with no timers and no dead
// letters loses its entry in m, so that it costs nothing in the file.
func (tb *topicBuckets) flush() error {
	if tb.dn == 0 && tb.dd == 0 {
		return nil
	}
	n, d, err := tb.counts()
	if err != nil {
		return err
	}
	n, d = max(n+tb.dn, 0), max(d+tb.dd, 0)
	tb.dn, tb.dd = 0, 0
	if n == 0 && d == 0 {
		return tb.meta.Delete([]byte(tb.name))
	}
	return tb.meta.Put([]byte(tb.name), encodeCounts(n, d))
}

// A topic's entry in m: a version byte (1), then the counts of timers and
// dead letters as uvarints.
const countsVersion = 1

func encodeCounts(n, d int64) []byte {
	b := make([]byte, 1, 1+2*binary.MaxVarintLen64)
	b[0] = countsVersion
	b = binary.AppendUvarint(b, uint64(n))
	return binary.AppendUvarint(b, uint64(d))
}

var errBadCounts = errors.New("bad counts")

func decodeCounts(b []byte) (n, d int64, err error) {
	if len(b) < 1 || b[0] != countsVersion {
		return 0, 0, errBadCounts
	}
	dec := decoder{b: b[1:]}
	un, ud := dec.uvarint(), dec.uvarint()
	if dec.err != nil || len(dec.b) != 0 || un > 1<<62 || ud > 1<<62 {
		return 0, 0, errBadCounts
	}
	return int64(un), int64(ud), nil
}
