package ontimebolt

import (
	"context"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// CountDue counts a topic's timers between bounds, by the instant each
// becomes claimable, from the q index alone: one read transaction that
// walks the index keys from the first one to the last bound (no record is
// read), so its cost grows with the timers before the last bound, not with
// the whole topic. The count after the last bound is the topic's timer
// counter minus the rest. See ontimedriver.Driver.
func (d *Driver) CountDue(ctx context.Context, topic string, bounds []time.Time) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ontimedriver.ValidateDueBounds(bounds); err != nil {
		return nil, err
	}
	us := make([]int64, len(bounds))
	for i, b := range bounds {
		us[i] = ceilMicros(b)
	}
	var counts []int64
	err := d.view(func(tx *bbolt.Tx) error {
		counts = make([]int64, len(bounds)+1)
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		var seen int64
		i := 0 // the count the next key goes to
		c := tb.claimCursor()
		for k := c.first(); k != nil; k = c.next() {
			ts, _, ok := splitKey(k)
			if !ok {
				continue
			}
			for i < len(us) && ts >= us[i] {
				i++
			}
			if i == len(us) {
				break
			}
			counts[i]++
			seen++
			if seen&0xffff == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		n, _, err := tb.counts()
		if err != nil {
			return err
		}
		counts[len(us)] = max(n-seen, 0)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// FireNow makes a scheduled timer due at once, in one transaction. See
// ontimedriver.Driver.
func (d *Driver) FireNow(ctx context.Context, topic, id string) (time.Time, error) {
	var (
		due    int64
		result error
		w      wake
	)
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		due, result, w = 0, nil, wake{}
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		rec, found, err := tb.getTimer(id)
		switch {
		case !found:
			result = ontimedriver.ErrNotFound
			return nil
		case err != nil:
			return err
		}
		now := time.Now()
		nowUs := floorMicros(now)
		if rec.leased() && rec.leaseUntil > nowUs {
			result = ontimedriver.ErrLeased
			return nil
		}
		due = rec.due
		if rec.claimable() <= nowUs {
			return nil // due already: it keeps its place
		}
		w.start(tb)
		if err := tb.unindex(id, &rec); err != nil {
			return err
		}
		rec.due = ceilMicros(now)
		due = rec.due
		if err := tb.putTimer(id, &rec); err != nil {
			return err
		}
		w.finish(tb)
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	if result != nil {
		return time.Time{}, result
	}
	if w.fire {
		d.notify(topic, w.at)
	}
	return fromMicros(due), nil
}
