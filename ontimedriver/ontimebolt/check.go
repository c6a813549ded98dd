package ontimebolt

import (
	"bytes"
	"fmt"

	"go.etcd.io/bbolt"
)

// deepCheck is the record-level half of Options.CheckOnOpen (checkPages,
// run before bbolt maps the file, is the page-level half, so every page this
// walk reads is known to be sound): every record decodes and matches its
// index entries, and every topic's counts match its records.
func (d *Driver) deepCheck() error {
	return d.view(func(tx *bbolt.Tx) error {
		s, err := dataBucketsOf(tx, d.path, 0)
		if err != nil {
			return err
		}
		if err := checkStore(s); err != nil {
			return corruptError(d.path, "%v", err)
		}
		return nil
	})
}

// topicCount is what checkStore counts per topic.
type topicCount struct{ timers, leased, dead int64 }

// checkStore compares the records, the indexes and the counts.
func checkStore(s *stores) error {
	counts := map[string]*topicCount{}
	count := func(topic []byte) *topicCount {
		c := counts[string(topic)]
		if c == nil {
			c = &topicCount{}
			counts[string(topic)] = c
		}
		return c
	}
	checkRecord := func(k, v []byte) error {
		idb, topic, ok := splitTimerKey(k)
		if !ok {
			return fmt.Errorf("timer key %x does not parse", k)
		}
		id := string(idb)
		tb := s.topic("", string(topic))
		rec, err := decodeRecord(k, v)
		if err != nil {
			return fmt.Errorf("topic %q: timer %q: %v", topic, id, err)
		}
		c := count(topic)
		c.timers++
		if k := tb.idx(rec.claimable(), id); !hasKey(s.queue, k) && !hasKey(s.future, k) {
			return fmt.Errorf("topic %q: timer %q: missing from the claim index", topic, id)
		}
		if rec.leased() {
			c.leased++
			if !hasKey(s.leases, tb.idx(rec.leaseUntil, id)) {
				return fmt.Errorf("topic %q: timer %q: missing from the lease index", topic, id)
			}
		}
		return nil
	}
	err := s.timers.ForEach(checkRecord)
	if err == nil {
		err = s.farTimers.ForEach(func(k, v []byte) error {
			if s.timers.Get(k) != nil {
				id, topic, _ := splitTimerKey(k)
				return fmt.Errorf("topic %q: timer %q: a record in t and in u", topic, id)
			}
			return checkRecord(k, v)
		})
	}
	if err != nil {
		return err
	}
	if err := checkIndex(s, []*bbolt.Bucket{s.queue, s.future}, "claim", func(c *topicCount) int64 { return c.timers }, counts,
		func(tb *topicBuckets, ts int64, id string) bool {
			rec, found, err := tb.getTimer(id)
			return found && err == nil && rec.claimable() == ts
		}); err != nil {
		return err
	}
	if err := checkIndex(s, []*bbolt.Bucket{s.leases}, "lease", func(c *topicCount) int64 { return c.leased }, counts,
		func(tb *topicBuckets, ts int64, id string) bool {
			rec, found, err := tb.getTimer(id)
			return found && err == nil && rec.leased() && rec.leaseUntil == ts
		}); err != nil {
		return err
	}

	err = s.dead.ForEach(func(k, v []byte) error {
		topic, idb, ok := splitTopic(k)
		if !ok {
			return fmt.Errorf("dead letter key %x does not parse", k)
		}
		id := string(idb)
		rec, err := decodeDead(k, v)
		if err != nil {
			return fmt.Errorf("topic %q: dead letter %q: %v", topic, id, err)
		}
		count(topic).dead++
		if !hasKey(s.deadIdx, indexKey(topicPrefix(string(topic)), rec.diedAt, id)) {
			return fmt.Errorf("topic %q: dead letter %q: missing from the dead index", topic, id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := checkIndex(s, []*bbolt.Bucket{s.deadIdx}, "dead", func(c *topicCount) int64 { return c.dead }, counts,
		func(tb *topicBuckets, ts int64, id string) bool {
			rec, found, err := tb.getDead(id)
			return found && err == nil && rec.diedAt == ts
		}); err != nil {
		return err
	}

	// Every schedule entry decodes and belongs to a timer.
	if s.sched != nil {
		err := s.sched.ForEach(func(k, v []byte) error {
			id, topic, ok := splitTimerKey(k)
			if !ok {
				return fmt.Errorf("schedule entry key %x does not parse", k)
			}
			if _, err := decodeSched(k, v); err != nil {
				return fmt.Errorf("topic %q: schedule entry of %q: %v", topic, id, err)
			}
			if s.rawTimer(k) == nil {
				return fmt.Errorf("topic %q: schedule entry of %q, which has no timer", topic, id)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}

	// Every topic with records has its counts in m, and only those.
	seen := 0
	err = s.meta.ForEach(func(k, v []byte) error {
		n, dead, err := decodeCounts(v)
		if err != nil {
			return fmt.Errorf("topic %q: counts: %v", k, err)
		}
		c := counts[string(k)]
		if c == nil {
			return fmt.Errorf("topic %q: counts say %d timers and %d dead letters, there are none", k, n, dead)
		}
		seen++
		if n != c.timers || dead != c.dead {
			return fmt.Errorf("topic %q: counts say %d timers and %d dead letters, there are %d and %d", k, n, dead, c.timers, c.dead)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if seen != len(counts) {
		for topic := range counts {
			if s.meta.Get([]byte(topic)) == nil {
				return fmt.Errorf("topic %q has records but no counts", topic)
			}
		}
	}
	return nil
}

// checkIndex checks that every entry of an index (kept in the buckets bs)
// matches its record and that each topic's index has as many entries as
// want says.
func checkIndex(s *stores, bs []*bbolt.Bucket, name string, want func(*topicCount) int64, counts map[string]*topicCount,
	matches func(tb *topicBuckets, ts int64, id string) bool) error {
	got := map[string]int64{}
	for _, b := range bs {
		c := b.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			topic, rest, ok := splitTopic(k)
			if !ok {
				return fmt.Errorf("%s index entry %x does not parse", name, k)
			}
			tb := s.topic("", string(topic))
			ts, id, ok := splitKey(rest)
			if !ok || !matches(tb, ts, string(id)) {
				return fmt.Errorf("topic %q: %s index entry %x matches no record", topic, name, rest)
			}
			got[string(topic)]++
		}
	}
	for topic, c := range counts {
		if got[topic] != want(c) {
			return fmt.Errorf("topic %q: %s index has %d entries, want %d", topic, name, got[topic], want(c))
		}
	}
	return nil
}

func hasKey(b *bbolt.Bucket, key []byte) bool {
	k, _ := b.Cursor().Seek(key)
	return bytes.Equal(k, key)
}
