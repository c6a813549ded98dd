package ontimebolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// Format 1 ("ontimebolt/1"), the layout before this one, kept one bucket
// per topic under a "topics" bucket, and never deleted it:
//
//	topics/<topic>              bucket; its sequence numbered lease tokens
//	  n, d                      counts of timers and dead letters, 8 bytes big-endian
//	  t  id -> timer record (version 1: its checksum covers the id)
//	  q  ts id -> ""    l  ts id -> ""    x  id -> dead record    y  ts id -> ""
//
// Open migrates such a file to format 2 in place, in transactions of at
// most migrateChunk keys each, so that a file of any size is migrated
// without holding it all in memory. The format marker says
// "ontimebolt/1>2" from the first of them to the last, so that a crash in
// the middle is resumed by the next Open (every transaction moves keys
// from the old buckets to the new ones atomically: nothing is lost or
// copied twice), and an older version of ontime refuses the file instead
// of reading half of it.
var (
	formatV1        = []byte("ontimebolt/1")
	formatMigrating = []byte("ontimebolt/1>2")

	bucketV1Topics  = []byte("topics")
	keyV1Count      = []byte("n")
	keyV1DeadCount  = []byte("d")
	recordVersionV1 = byte(1)
)

// migrateChunk is how many keys one migration transaction moves.
const migrateChunk = 20_000

// migrate moves a format 1 (or half-migrated) file to format 2.
func (d *Driver) migrate(o *Options) error {
	start := time.Now()
	d.log.Info("ontimebolt: migrating the store file to format 2 (one-time; a crash in the middle is resumed at the next open)", "path", d.path)
	chunk := o.migrateChunk
	if chunk <= 0 {
		chunk = migrateChunk
	}
	txs, topics, keys := 0, 0, 0
	step := func(fn func(tx *bbolt.Tx) error) error {
		if o.migrateHook != nil {
			if err := o.migrateHook(txs); err != nil {
				return err
			}
		}
		txs++
		return d.update(fn)
	}
	err := step(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(keyFormat, formatMigrating); err != nil {
			return err
		}
		return createDataBuckets(tx)
	})
	if err != nil {
		return d.migrateError(err)
	}
	for {
		var done bool
		err := step(func(tx *bbolt.Tx) error {
			moved, finished, err := migrateStep(tx, d.path, chunk, d.near.Load())
			keys += moved
			if finished {
				topics++
			}
			done = moved == 0 && !finished
			return err
		})
		if err != nil {
			return d.migrateError(err)
		}
		if done {
			break
		}
	}
	err = step(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucketV1Topics); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyFormat, formatV2)
	})
	if err != nil {
		return d.migrateError(err)
	}
	d.log.Info("ontimebolt: store file migrated to format 2; its old pages are free and reused, and `ontime compact` gives them back to the file system",
		"path", d.path, "topics", topics, "keys", keys, "transactions", txs, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func (d *Driver) migrateError(err error) error {
	return fmt.Errorf("ontimebolt: %s: migrate the store file from format 1 to 2 (the next open resumes it): %w", d.path, err)
}

func createDataBuckets(tx *bbolt.Tx) error {
	for _, name := range dataBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// migrateStep moves up to chunk keys of the first format 1 topic left. When
// that topic's buckets are empty it writes the topic's counts, raises the
// token sequence above the topic's and deletes the topic's bucket
// (finished). moved is 0 and finished false when no topic is left.
func migrateStep(tx *bbolt.Tx, path string, chunk int, near int64) (moved int, finished bool, err error) {
	old := tx.Bucket(bucketV1Topics)
	if old == nil {
		return 0, false, nil
	}
	name, _ := old.Cursor().First()
	for name != nil && old.Bucket(name) == nil {
		// A plain value under "topics" was never written by format 1:
		// leave it to the bucket's deletion.
		name, _ = old.Cursor().Seek(prefixEnd(name))
	}
	if name == nil {
		return 0, false, nil
	}
	topic := string(name)
	root := old.Bucket(name)
	s, err := dataBucketsOf(tx, path, near)
	if err != nil {
		return 0, false, err
	}
	prefix := topicPrefix(topic)
	prefixed := func(k []byte) []byte { return append(bytes.Clone(prefix), k...) }
	putIn := func(b *bbolt.Bucket) func(k, v []byte) error { return func(k, v []byte) error { return b.Put(k, v) } }
	for _, sub := range []struct {
		name []byte
		put  func(k, v []byte) error
		key  func(k []byte) []byte
		val  func(oldKey, newKey, v []byte) []byte
	}{
		{bucketQueue, func(k, _ []byte) error {
			us, _, _ := splitKey(k[len(prefix):])
			return s.putClaimable(k, us)
		}, prefixed, nil},
		{bucketLeases, putIn(s.leases), prefixed, nil},
		{bucketDeadIdx, putIn(s.deadIdx), prefixed, nil},
		{bucketTimers, func(k, v []byte) error {
			in := s.timers
			if body, err := open(recordVersion, k, v); err == nil {
				if rec, err := decodeRecordBody(body); err == nil && rec.claimable() >= s.near {
					in = s.farTimers
				}
			}
			return in.Put(k, v)
		}, func(k []byte) []byte { return timerKey(topic, string(k)) }, resealV1},
		{bucketDead, putIn(s.dead), prefixed, resealV1},
	} {
		b := root.Bucket(sub.name)
		if b == nil {
			continue
		}
		type kv struct{ k, v []byte }
		var batch []kv
		c := b.Cursor()
		for k, v := c.First(); k != nil && moved+len(batch) < chunk; k, v = c.Next() {
			batch = append(batch, kv{bytes.Clone(k), bytes.Clone(v)})
		}
		for _, e := range batch {
			nk := sub.key(e.k)
			v := e.v
			if sub.val != nil {
				v = sub.val(e.k, nk, v)
			}
			if err := sub.put(nk, v); err != nil {
				return moved, false, err
			}
			if err := b.Delete(e.k); err != nil {
				return moved, false, err
			}
		}
		moved += len(batch)
		if moved >= chunk {
			return moved, false, nil
		}
	}
	// Every key of the topic is moved: its counts, its tokens, its bucket.
	n, dn := v1Counter(root, keyV1Count), v1Counter(root, keyV1DeadCount)
	if n > 0 || dn > 0 {
		if err := s.meta.Put([]byte(topic), encodeCounts(n, dn)); err != nil {
			return moved, false, err
		}
	}
	if seq := root.Sequence(); seq > s.timers.Sequence() {
		if err := s.timers.SetSequence(seq); err != nil {
			return moved, false, err
		}
	}
	return moved, true, old.DeleteBucket(name)
}

// resealV1 turns a format 1 record (timer or dead letter, stored under its
// id) into a format 2 one stored under newKey: the same fields, a checksum
// over the new key. A record that does not check out is copied as it is,
// so that the damage is reported where format 1 would have reported it.
func resealV1(id, newKey, v []byte) []byte {
	body, err := open(recordVersionV1, id, v)
	if err != nil {
		return v
	}
	out := make([]byte, headerLen+len(body))
	copy(out[headerLen:], body)
	return seal(newKey, out)
}

func v1Counter(root *bbolt.Bucket, key []byte) int64 {
	v := root.Get(key)
	if len(v) != 8 {
		return 0
	}
	return max(int64(binary.BigEndian.Uint64(v)), 0)
}
