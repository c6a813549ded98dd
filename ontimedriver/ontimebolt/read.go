package ontimebolt

import (
	"bytes"
	"context"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Get returns one scheduled or leased timer. See ontimedriver.Driver.
func (d *Driver) Get(ctx context.Context, topic, id string) (*ontimedriver.TimerInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var info *ontimedriver.TimerInfo
	err := d.view(func(tx *bbolt.Tx) error {
		nowUs := floorMicros(time.Now())
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		rec, found, err := tb.getTimer(id)
		if !found {
			return ontimedriver.ErrNotFound
		}
		if err != nil {
			return err
		}
		ti := timerInfo(id, &rec, nowUs)
		if err := tb.withSched(&ti); err != nil {
			return err
		}
		info = &ti
		return nil
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

func timerInfo(id string, rec *record, nowUs int64) ontimedriver.TimerInfo {
	ti := ontimedriver.TimerInfo{
		ID:        id,
		Due:       fromMicros(rec.due),
		State:     ontimedriver.StateScheduled,
		Attempt:   int(rec.attempt),
		LastError: rec.lastError,
		Payload:   bytes.Clone(rec.payload),
	}
	if rec.leased() && rec.leaseUntil > nowUs {
		ti.State = ontimedriver.StateLeased
		ti.LeaseUntil = fromMicros(rec.leaseUntil)
	}
	return ti
}

// List pages through a topic's timers in claim order (due time, or lease
// deadline while leased, then id). See ontimedriver.Driver. The cursor is
// the position after the last timer returned, so timers claimed or
// rescheduled between pages can be seen twice or not at all, as with any
// live index.
func (d *Driver) List(ctx context.Context, topic string, opts ontimedriver.ListOptions) (*ontimedriver.Page, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit, err := pageLimit(opts.Limit)
	if err != nil {
		return nil, err
	}
	after, err := decodeCursor(opts.Cursor)
	if err != nil {
		return nil, err
	}
	before := beforeMicros(opts.Before)
	page := &ontimedriver.Page{}
	err = d.view(func(tx *bbolt.Tx) error {
		nowUs := floorMicros(time.Now())
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		var last []byte
		c := tb.claimCursor()
		for k := seekAfter(c, after); k != nil; k = c.next() {
			ts, idb, ok := splitKey(k)
			if !ok {
				continue
			}
			if ts >= before {
				break
			}
			id := string(idb)
			rec, found, err := tb.getTimer(id)
			if err != nil {
				return err
			}
			if !found || rec.claimable() != ts {
				continue // an entry Claim will clean up
			}
			if len(page.Timers) == limit {
				page.NextCursor = encodeCursor(last)
				break
			}
			ti := timerInfo(id, &rec, nowUs)
			if err := tb.withSched(&ti); err != nil {
				return err
			}
			page.Timers = append(page.Timers, ti)
			last = bytes.Clone(k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// keyCursor is a topicCursor or a claimCursor.
type keyCursor interface {
	first() []byte
	seek(suffix []byte) []byte
	next() []byte
}

// seekAfter positions c on the topic's first key after the cursor key, or
// on its first key when there is no cursor.
func seekAfter(c keyCursor, after []byte) []byte {
	if after == nil {
		return c.first()
	}
	k := c.seek(after)
	if bytes.Equal(k, after) {
		k = c.next()
	}
	return k
}

// Count counts a topic's timers. The totals are kept as counters; live
// leases are counted in the lease index, which holds only leased timers.
// See ontimedriver.Driver.
func (d *Driver) Count(ctx context.Context, topic string) (ontimedriver.Counts, error) {
	if err := ctx.Err(); err != nil {
		return ontimedriver.Counts{}, err
	}
	var counts ontimedriver.Counts
	err := d.view(func(tx *bbolt.Tx) error {
		var err error
		counts, err = d.countIn(tx, topic, floorMicros(time.Now()))
		return err
	})
	return counts, err
}

// countIn counts a topic's timers in tx, leases live after nowUs.
func (d *Driver) countIn(tx *bbolt.Tx, topic string, nowUs int64) (ontimedriver.Counts, error) {
	var counts ontimedriver.Counts
	tb, err := d.lookup(tx, topic)
	if err != nil {
		return counts, err
	}
	c := tb.cursor(tb.leases)
	for k := c.seek(tsKey(nil, nowUs+1)); k != nil; k = c.next() {
		counts.Leased++
	}
	n, dead, err := tb.counts()
	if err != nil {
		return counts, err
	}
	counts.Scheduled = max(n-counts.Leased, 0)
	counts.Dead = dead
	return counts, nil
}

var _ ontimedriver.TopicCounter = (*Driver)(nil)

// CountTopics counts the timers of each of topics in one read
// transaction. See ontimedriver.TopicCounter.
func (d *Driver) CountTopics(ctx context.Context, topics []string) ([]ontimedriver.Counts, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]ontimedriver.Counts, len(topics))
	err := d.view(func(tx *bbolt.Tx) error {
		nowUs := floorMicros(time.Now())
		for i, t := range topics {
			c, err := d.countIn(tx, t, nowUs)
			if err != nil {
				return err
			}
			out[i] = c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Topics lists the topics holding at least one timer or dead letter. See
// ontimedriver.Driver.
func (d *Driver) Topics(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var topics []string
	err := d.view(func(tx *bbolt.Tx) error {
		topics = []string{}
		all := tx.Bucket(bucketTopicMeta)
		if all == nil {
			return corruptError(d.path, "bucket %q is missing", bucketTopicMeta)
		}
		// m holds exactly the topics with a timer or a dead letter, in byte
		// order, which for topic names (ASCII) is sorted order.
		return all.ForEach(func(name, v []byte) error {
			n, dead, err := decodeCounts(v)
			if err != nil {
				return corruptError(d.path, "topic %q: counts: %v", name, err)
			}
			if n > 0 || dead > 0 {
				topics = append(topics, string(name))
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return topics, nil
}
