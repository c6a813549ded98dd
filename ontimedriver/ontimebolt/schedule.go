package ontimebolt

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Schedule writes timers to a topic in one transaction, fsynced before it
// returns. A negative Delay, or an At outside ontimedriver.MinDue..MaxDue,
// fails the whole call with an error wrapping ontimedriver.ErrInvalid, and
// nothing is written. See ontimedriver.Driver.
func (d *Driver) Schedule(ctx context.Context, topic string, timers []ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	var (
		results []ontimedriver.ScheduleResult
		w       wake
	)
	if len(timers) == 0 {
		return []ontimedriver.ScheduleResult{}, ctx.Err()
	}
	for _, t := range timers {
		if t.ID == "" {
			return nil, fmt.Errorf("%w: a timer has an empty id", ontimedriver.ErrInvalid)
		}
		if t.Delay < 0 {
			return nil, fmt.Errorf("%w: timer %q has negative delay %v", ontimedriver.ErrInvalid, t.ID, t.Delay)
		}
		if !t.At.IsZero() {
			if err := ontimedriver.ValidateDue(t.At); err != nil {
				return nil, fmt.Errorf("timer %q: %w", t.ID, err)
			}
		}
	}
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		results = make([]ontimedriver.ScheduleResult, len(timers))
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		w.start(tb)
		now := time.Now()
		for i, t := range timers {
			due := addMicros(now, t.Delay)
			if !t.At.IsZero() {
				due = ceilMicros(t.At)
			}
			old, found, err := tb.getTimer(t.ID)
			switch {
			case found && mode == ontimedriver.IfAbsent:
				results[i] = ontimedriver.ScheduleResult{Err: ontimedriver.ErrExists}
				if err == nil {
					results[i].Due = fromMicros(old.due)
				}
				continue
			case err != nil:
				// A damaged record is overwritten by an upsert.
				if err := tb.removeDamagedTimer(t.ID); err != nil {
					return err
				}
			case found:
				if err := tb.removeTimer(t.ID, &old); err != nil {
					return err
				}
			}
			rec := record{due: due, payload: t.Payload}
			if err := tb.putTimer(t.ID, &rec); err != nil {
				return err
			}
			tb.dn++
			results[i] = ontimedriver.ScheduleResult{Due: fromMicros(due)}
		}
		w.finish(tb)
		return tb.flush()
	})
	if err != nil {
		return nil, err
	}
	if w.fire {
		d.notify(topic, w.at)
	}
	return results, nil
}

// Cancel deletes a scheduled or leased timer. See ontimedriver.Driver.
func (d *Driver) Cancel(ctx context.Context, topic, id string) error {
	var result error
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		result = nil
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		found, err := tb.cancel(id)
		if err != nil {
			return err
		}
		if !found {
			result = ontimedriver.ErrNotFound
		}
		return tb.flush()
	})
	if err != nil {
		return err
	}
	return result
}

// CancelBatch deletes the scheduled or leased timers ids names, in one
// transaction: all of them or, when the call fails, none. Each id's slot
// is nil or ontimedriver.ErrNotFound. See ontimedriver.Driver.
func (d *Driver) CancelBatch(ctx context.Context, topic string, ids []string) ([]error, error) {
	if len(ids) == 0 {
		if d.closed.Load() {
			return nil, ontimedriver.ErrClosed
		}
		return []error{}, nil
	}
	var results []error
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		results = make([]error, len(ids))
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		for i, id := range ids {
			found, err := tb.cancel(id)
			if err != nil {
				return err
			}
			if !found {
				results[i] = ontimedriver.ErrNotFound
			}
		}
		return tb.flush()
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// cancel deletes a scheduled or leased timer (a damaged one too) and
// reports whether there was one.
func (tb *topicBuckets) cancel(id string) (found bool, err error) {
	rec, found, err := tb.getTimer(id)
	switch {
	case !found:
		return false, nil
	case err != nil:
		return true, tb.removeDamagedTimer(id)
	}
	return true, tb.removeTimer(id, &rec)
}
