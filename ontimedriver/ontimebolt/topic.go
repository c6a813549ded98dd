package ontimebolt

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"
)

// topicBuckets are one topic's buckets inside a transaction, plus counter
// deltas that flush writes back.
type topicBuckets struct {
	path, name string

	root, timers, queue, leases, dead, deadIdx *bbolt.Bucket

	dn, dd int64 // pending changes to the n and d counters
}

// lookupTopic returns the topic's buckets, or nil when the topic was never
// written.
func lookupTopic(tx *bbolt.Tx, path, topic string) (*topicBuckets, error) {
	topics := tx.Bucket(bucketTopics)
	if topics == nil {
		return nil, corruptError(path, "bucket %q is missing", bucketTopics)
	}
	root := topics.Bucket([]byte(topic))
	if root == nil {
		return nil, nil
	}
	return bindTopic(path, topic, root)
}

// createTopic returns the topic's buckets, creating them if needed.
func createTopic(tx *bbolt.Tx, path, topic string) (*topicBuckets, error) {
	topics := tx.Bucket(bucketTopics)
	if topics == nil {
		return nil, corruptError(path, "bucket %q is missing", bucketTopics)
	}
	root := topics.Bucket([]byte(topic))
	if root == nil {
		var err error
		if root, err = topics.CreateBucket([]byte(topic)); err != nil {
			return nil, fmt.Errorf("ontimebolt: %s: create topic %q: %w", path, topic, err)
		}
		for _, name := range [][]byte{bucketTimers, bucketQueue, bucketLeases, bucketDead, bucketDeadIdx} {
			if _, err := root.CreateBucket(name); err != nil {
				return nil, fmt.Errorf("ontimebolt: %s: create topic %q: %w", path, topic, err)
			}
		}
	}
	return bindTopic(path, topic, root)
}

func bindTopic(path, topic string, root *bbolt.Bucket) (*topicBuckets, error) {
	tb := &topicBuckets{
		path:    path,
		name:    topic,
		root:    root,
		timers:  root.Bucket(bucketTimers),
		queue:   root.Bucket(bucketQueue),
		leases:  root.Bucket(bucketLeases),
		dead:    root.Bucket(bucketDead),
		deadIdx: root.Bucket(bucketDeadIdx),
	}
	if tb.timers == nil || tb.queue == nil || tb.leases == nil || tb.dead == nil || tb.deadIdx == nil {
		return nil, corruptError(path, "topic %q: a bucket is missing", topic)
	}
	return tb, nil
}

func (tb *topicBuckets) corrupt(kind, id string, err error) error {
	return corruptError(tb.path, "topic %q: %s %q: %v", tb.name, kind, id, err)
}

// getTimer loads a timer. found is false when there is none; err wraps
// ErrCorrupt when there is one that does not decode.
func (tb *topicBuckets) getTimer(id string) (rec record, found bool, err error) {
	raw := tb.timers.Get([]byte(id))
	if raw == nil {
		return rec, false, nil
	}
	rec, err = decodeRecord(id, raw)
	if err != nil {
		return rec, true, tb.corrupt("timer", id, err)
	}
	return rec, true, nil
}

// putTimer writes a timer and its index entries. The caller has removed the
// entries of the previous version (unindex).
func (tb *topicBuckets) putTimer(id string, rec *record) error {
	if err := tb.timers.Put([]byte(id), rec.encode(id)); err != nil {
		return err
	}
	if err := tb.queue.Put(indexKey(rec.claimable(), id), nil); err != nil {
		return err
	}
	if rec.leased() {
		return tb.leases.Put(indexKey(rec.leaseUntil, id), nil)
	}
	return nil
}

// unindex deletes the index entries of a stored timer.
func (tb *topicBuckets) unindex(id string, rec *record) error {
	if err := tb.queue.Delete(indexKey(rec.claimable(), id)); err != nil {
		return err
	}
	if rec.leased() {
		return tb.leases.Delete(indexKey(rec.leaseUntil, id))
	}
	return nil
}

// removeTimer deletes a stored timer with its index entries.
func (tb *topicBuckets) removeTimer(id string, rec *record) error {
	if err := tb.unindex(id, rec); err != nil {
		return err
	}
	tb.dn--
	return tb.timers.Delete([]byte(id))
}

// removeDamagedTimer deletes a timer whose record does not decode. Its index
// keys are unknown, so the indexes are searched (slow, and only ever needed
// after damage).
func (tb *topicBuckets) removeDamagedTimer(id string) error {
	if err := deleteByID(tb.queue, id); err != nil {
		return err
	}
	if err := deleteByID(tb.leases, id); err != nil {
		return err
	}
	tb.dn--
	return tb.timers.Delete([]byte(id))
}

// deleteByID deletes every index entry of b that names id.
func deleteByID(b *bbolt.Bucket, id string) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if _, kid, ok := splitKey(k); ok && string(kid) == id {
			keys = append(keys, bytes.Clone(k))
		}
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// getDead loads a dead letter.
func (tb *topicBuckets) getDead(id string) (rec deadRecord, found bool, err error) {
	raw := tb.dead.Get([]byte(id))
	if raw == nil {
		return rec, false, nil
	}
	rec, err = decodeDead(id, raw)
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
	if err := tb.dead.Put([]byte(id), rec.encode(id)); err != nil {
		return err
	}
	tb.dd++
	return tb.deadIdx.Put(indexKey(rec.diedAt, id), nil)
}

// removeDead deletes a dead letter and its index entry.
func (tb *topicBuckets) removeDead(id string, rec *deadRecord) error {
	if err := tb.deadIdx.Delete(indexKey(rec.diedAt, id)); err != nil {
		return err
	}
	tb.dd--
	return tb.dead.Delete([]byte(id))
}

func (tb *topicBuckets) removeDamagedDead(id string) error {
	if err := deleteByID(tb.deadIdx, id); err != nil {
		return err
	}
	tb.dd--
	return tb.dead.Delete([]byte(id))
}

// head returns the first claimable instant of the topic.
func (tb *topicBuckets) head() (int64, bool) {
	k, _ := tb.queue.Cursor().First()
	us, _, ok := splitKey(k)
	return us, ok
}

func (tb *topicBuckets) counter(key []byte) int64 {
	v := tb.root.Get(key)
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// flush writes the counter deltas.
func (tb *topicBuckets) flush() error {
	for _, c := range []struct {
		key   []byte
		delta *int64
	}{{keyCount, &tb.dn}, {keyDeadCount, &tb.dd}} {
		if *c.delta == 0 {
			continue
		}
		n := max(tb.counter(c.key)+*c.delta, 0)
		*c.delta = 0
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, uint64(n))
		if err := tb.root.Put(c.key, v); err != nil {
			return err
		}
	}
	return nil
}
