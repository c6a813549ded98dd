package ontimebolt

import (
	"bytes"
	"fmt"

	"go.etcd.io/bbolt"
)

// deepCheck is the record-level half of Options.CheckOnOpen (checkPages,
// run before bbolt maps the file, is the page-level half, so every page this
// walk reads is known to be sound): every record decodes and matches its
// index entries and counters.
func (d *Driver) deepCheck() error {
	return d.view(func(tx *bbolt.Tx) error {
		topics := tx.Bucket(bucketTopics)
		return topics.ForEachBucket(func(name []byte) error {
			tb, err := lookupTopic(tx, d.path, string(name))
			if err != nil {
				return err
			}
			if err := checkTopic(tb); err != nil {
				return corruptError(d.path, "topic %q: %v", name, err)
			}
			return nil
		})
	})
}

// checkTopic compares a topic's records, indexes and counters.
func checkTopic(tb *topicBuckets) error {
	var timers, leased int64
	err := tb.timers.ForEach(func(k, v []byte) error {
		id := string(k)
		rec, err := decodeRecord(id, v)
		if err != nil {
			return fmt.Errorf("timer %q: %v", id, err)
		}
		timers++
		if !hasKey(tb.queue, indexKey(rec.claimable(), id)) {
			return fmt.Errorf("timer %q: missing from the claim index", id)
		}
		if rec.leased() {
			leased++
			if !hasKey(tb.leases, indexKey(rec.leaseUntil, id)) {
				return fmt.Errorf("timer %q: missing from the lease index", id)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n := tb.counter(keyCount); n != timers {
		return fmt.Errorf("timer counter says %d, there are %d", n, timers)
	}
	if err := checkIndex(tb.queue, timers, "claim", func(ts int64, id string) bool {
		rec, found, err := tb.getTimer(id)
		return found && err == nil && rec.claimable() == ts
	}); err != nil {
		return err
	}
	if err := checkIndex(tb.leases, leased, "lease", func(ts int64, id string) bool {
		rec, found, err := tb.getTimer(id)
		return found && err == nil && rec.leased() && rec.leaseUntil == ts
	}); err != nil {
		return err
	}

	var dead int64
	err = tb.dead.ForEach(func(k, v []byte) error {
		id := string(k)
		rec, err := decodeDead(id, v)
		if err != nil {
			return fmt.Errorf("dead letter %q: %v", id, err)
		}
		dead++
		if !hasKey(tb.deadIdx, indexKey(rec.diedAt, id)) {
			return fmt.Errorf("dead letter %q: missing from the dead index", id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n := tb.counter(keyDeadCount); n != dead {
		return fmt.Errorf("dead counter says %d, there are %d", n, dead)
	}
	return checkIndex(tb.deadIdx, dead, "dead", func(ts int64, id string) bool {
		rec, found, err := tb.getDead(id)
		return found && err == nil && rec.diedAt == ts
	})
}

// checkIndex checks that every entry of an index matches its record and
// that the index has want entries.
func checkIndex(b *bbolt.Bucket, want int64, name string, matches func(ts int64, id string) bool) error {
	var n int64
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		ts, id, ok := splitKey(k)
		if !ok || !matches(ts, string(id)) {
			return fmt.Errorf("%s index entry %x matches no record", name, k)
		}
		n++
	}
	if n != want {
		return fmt.Errorf("%s index has %d entries, want %d", name, n, want)
	}
	return nil
}

func hasKey(b *bbolt.Bucket, key []byte) bool {
	k, _ := b.Cursor().Seek(key)
	return bytes.Equal(k, key)
}
