package ontimebolt

import (
	"bytes"
	"context"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// ListDead pages through a topic's dead letters, oldest death first. See
// ontimedriver.Driver.
func (d *Driver) ListDead(ctx context.Context, topic string, opts ontimedriver.ListOptions) (*ontimedriver.DeadPage, error) {
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
	page := &ontimedriver.DeadPage{}
	err = d.view(func(tx *bbolt.Tx) error {
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		var last []byte
		c := tb.cursor(tb.deadIdx)
		for k := seekAfter(c, after); k != nil; k = c.next() {
			ts, idb, ok := splitKey(k)
			if !ok {
				continue
			}
			if ts >= before {
				break
			}
			id := string(idb)
			rec, found, err := tb.getDead(id)
			if err != nil {
				return err
			}
			if !found || rec.diedAt != ts {
				continue
			}
			if len(page.Dead) == limit {
				page.NextCursor = encodeCursor(last)
				break
			}
			page.Dead = append(page.Dead, ontimedriver.DeadLetter{
				ID:      id,
				Due:     fromMicros(rec.due),
				DiedAt:  fromMicros(rec.diedAt),
				Attempt: int(rec.attempt),
				Reason:  rec.reason,
				Error:   rec.errText,
				Payload: bytes.Clone(rec.payload),
			})
			last = bytes.Clone(k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// deadIDs returns the ids to work on: the given ones, or with all every
// dead letter of the topic.
func deadIDs(tb *topicBuckets, ids []string, all bool) []string {
	if !all {
		return ids
	}
	every := []string{}
	c := tb.cursor(tb.dead)
	for k := c.first(); k != nil; k = c.next() {
		every = append(every, string(k))
	}
	return every
}

// ReplayDead moves the dead letters ids names back to scheduled, due now,
// attempt 0; empty ids replay nothing. The last error text is kept. See
// ontimedriver.Driver.
func (d *Driver) ReplayDead(ctx context.Context, topic string, ids []string) (int, error) {
	if len(ids) == 0 {
		if d.closed.Load() {
			return 0, ontimedriver.ErrClosed
		}
		return 0, nil
	}
	return d.replayDead(ctx, topic, ids, false)
}

// ReplayAllDead moves every dead letter of the topic back to scheduled. See
// ontimedriver.Driver.
func (d *Driver) ReplayAllDead(ctx context.Context, topic string) (int, error) {
	return d.replayDead(ctx, topic, nil, true)
}

func (d *Driver) replayDead(ctx context.Context, topic string, ids []string, all bool) (int, error) {
	var (
		n int
		w wake
	)
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		n, w = 0, wake{}
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		w.start(tb)
		nowUs := floorMicros(time.Now())
		for _, id := range deadIDs(tb, ids, all) {
			dead, found, err := tb.getDead(id)
			if !found || err != nil {
				continue // a damaged dead letter cannot be replayed; PurgeDead removes it
			}
			if tb.hasTimer(id) {
				continue // a live timer has the id: the dead letter stays
			}
			if err := tb.removeDead(id, &dead); err != nil {
				return err
			}
			rec := record{due: nowUs, lastError: dead.errText, payload: dead.payload}
			if err := tb.putTimer(id, &rec); err != nil {
				return err
			}
			tb.dn++
			n++
		}
		w.finish(tb)
		return tb.flush()
	})
	if err != nil {
		return 0, err
	}
	if w.fire {
		d.notify(topic, w.at)
	}
	return n, nil
}

// PurgeDead deletes the dead letters ids names; empty ids delete nothing.
// See ontimedriver.Driver.
func (d *Driver) PurgeDead(ctx context.Context, topic string, ids []string) (int, error) {
	if len(ids) == 0 {
		if d.closed.Load() {
			return 0, ontimedriver.ErrClosed
		}
		return 0, nil
	}
	return d.purgeDead(ctx, topic, ids, false)
}

// PurgeAllDead deletes every dead letter of the topic. See
// ontimedriver.Driver.
func (d *Driver) PurgeAllDead(ctx context.Context, topic string) (int, error) {
	return d.purgeDead(ctx, topic, nil, true)
}

func (d *Driver) purgeDead(ctx context.Context, topic string, ids []string, all bool) (int, error) {
	var n int
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		n = 0
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		for _, id := range deadIDs(tb, ids, all) {
			dead, found, err := tb.getDead(id)
			switch {
			case !found:
				continue
			case err != nil:
				err = tb.removeDamagedDead(id)
			default:
				err = tb.removeDead(id, &dead)
			}
			if err != nil {
				return err
			}
			n++
		}
		return tb.flush()
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// GetDead returns one dead letter of topic by id, or
// ontimedriver.ErrNotFound. See ontimedriver.DeadLetterGetter.
func (d *Driver) GetDead(ctx context.Context, topic, id string) (*ontimedriver.DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *ontimedriver.DeadLetter
	err := d.view(func(tx *bbolt.Tx) error {
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		rec, found, err := tb.getDead(id)
		if err != nil {
			return err
		}
		if !found {
			return ontimedriver.ErrNotFound
		}
		out = &ontimedriver.DeadLetter{
			ID:      id,
			Due:     fromMicros(rec.due),
			DiedAt:  fromMicros(rec.diedAt),
			Attempt: int(rec.attempt),
			Reason:  rec.reason,
			Error:   rec.errText,
			Payload: bytes.Clone(rec.payload),
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
