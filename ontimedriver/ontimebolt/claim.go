package ontimebolt

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Claim leases up to limit claimable timers, oldest first. See
// ontimedriver.Driver. A limit or lease that is not positive is an error
// wrapping ontimedriver.ErrInvalid.
//
// A timer whose stored record is damaged is not returned: Claim moves it to
// the dead letters with reason ReasonCorrupt (its raw bytes as the payload)
// and logs it, so one bad record cannot stall a topic.
func (d *Driver) Claim(ctx context.Context, topic string, limit int, lease time.Duration) (*ontimedriver.ClaimResult, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: claim max %d is not positive", ontimedriver.ErrInvalid, limit)
	}
	if lease <= 0 {
		return nil, fmt.Errorf("%w: lease %v is not positive", ontimedriver.ErrInvalid, lease)
	}
	var (
		res         *ontimedriver.ClaimResult
		quarantined []string
	)
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		now := time.Now()
		nowUs := floorMicros(now)
		res = &ontimedriver.ClaimResult{Now: fromMicros(nowUs)}
		quarantined = nil
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}

		// Collect first, write after: writing while a cursor walks the same
		// bucket can make it skip keys.
		type candidate struct {
			key []byte
			id  string
			rec record
			bad error  // the record does not decode
			raw []byte // the damaged record
		}
		var (
			cands  []candidate
			stale  [][]byte
			leased int
		)
		c := tb.claimCursor()
		for k := c.first(); k != nil && leased < limit; k = c.next() {
			ts, idb, ok := splitKey(k)
			if !ok {
				stale = append(stale, tb.key(k))
				continue
			}
			if ts > nowUs {
				break
			}
			id := string(idb)
			tkey := timerKey(topic, id)
			raw := tb.rawTimer(tkey)
			if raw == nil {
				stale = append(stale, tb.key(k)) // orphan: no record
				continue
			}
			rec, err := decodeRecord(tkey, raw)
			if err != nil {
				cands = append(cands, candidate{key: bytes.Clone(k), id: id, bad: err, raw: bytes.Clone(raw)})
				continue
			}
			if rec.claimable() != ts {
				stale = append(stale, tb.key(k)) // not the record's entry
				continue
			}
			cands = append(cands, candidate{key: bytes.Clone(k), id: id, rec: rec})
			leased++
		}
		for _, k := range stale {
			if err := tb.deleteClaimable(k); err != nil {
				return err
			}
		}

		deadline := addMicros(now, lease)
		res.Timers = make([]ontimedriver.ClaimedTimer, 0, leased)
		for _, c := range cands {
			if c.bad != nil {
				ts, _, _ := splitKey(c.key)
				if err := tb.removeDamagedTimer(c.id); err != nil {
					return err
				}
				err := tb.bury(c.id, &deadRecord{
					due:     ts,
					diedAt:  nowUs,
					reason:  ReasonCorrupt,
					errText: c.bad.Error(),
					payload: c.raw,
				})
				if err != nil {
					return err
				}
				quarantined = append(quarantined, c.id+": "+c.bad.Error())
				continue
			}
			rec := c.rec
			if err := tb.unindex(c.id, &rec); err != nil {
				return err
			}
			seq, err := tb.timers.NextSequence()
			if err != nil {
				return err
			}
			rec.token, rec.leaseUntil, rec.attempt = seq, deadline, rec.attempt+1
			if err := tb.putTimer(c.id, &rec); err != nil {
				return err
			}
			ct := ontimedriver.ClaimedTimer{
				ID:         c.id,
				Token:      formatToken(seq),
				Due:        fromMicros(rec.due),
				Attempt:    int(rec.attempt),
				LeaseUntil: fromMicros(deadline),
				Payload:    bytes.Clone(rec.payload),
			}
			if err := tb.claimedSched(&ct); err != nil {
				return err
			}
			res.Timers = append(res.Timers, ct)
		}
		if next, ok := tb.head(); ok {
			res.Next = fromMicros(next)
		}
		return tb.flush()
	})
	if err != nil {
		return nil, err
	}
	for _, q := range quarantined {
		d.log.Error("ontimebolt: damaged timer record moved to the dead letters",
			"path", d.path, "topic", topic, "timer", q, "reason", ReasonCorrupt)
	}
	return res, nil
}

// Settle applies handled timers' outcomes, each fenced by its lease token.
// See ontimedriver.Driver. A negative Delay or an unknown Kind fails the
// whole call with an error wrapping ontimedriver.ErrInvalid, and nothing is
// applied (as the Redis driver does).
func (d *Driver) Settle(ctx context.Context, topic string, ops []ontimedriver.Settlement) ([]error, error) {
	for _, op := range ops {
		if op.Delay < 0 {
			return nil, fmt.Errorf("%w: settlement of %q has negative delay %v", ontimedriver.ErrInvalid, op.ID, op.Delay)
		}
		if op.Kind < ontimedriver.Ack || op.Kind > ontimedriver.Dead {
			return nil, fmt.Errorf("%w: settlement of %q has unknown kind %d", ontimedriver.ErrInvalid, op.ID, int(op.Kind))
		}
		if op.Next != nil {
			if err := ontimedriver.ValidateDue(op.Next.Due); err != nil {
				return nil, fmt.Errorf("settlement of %q: next tick: %w", op.ID, err)
			}
			if err := ontimedriver.ValidateDue(op.Next.Instant()); err != nil {
				return nil, fmt.Errorf("settlement of %q: next tick's instant: %w", op.ID, err)
			}
		}
	}
	var (
		results []error
		w       wake
	)
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		results = make([]error, len(ops))
		w = wake{}
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		w.start(tb)
		now := time.Now()
		nowUs := floorMicros(now)
		for i, op := range ops {
			rec, err := tb.fenced(op.Lease)
			if err != nil {
				results[i] = err
				continue
			}
			if op.Next != nil && (op.Kind == ontimedriver.Ack || op.Kind == ontimedriver.Dead) {
				armed, err := tb.armNext(op, &rec, nowUs)
				if err != nil {
					return err
				}
				if armed {
					continue
				}
			}
			switch op.Kind {
			case ontimedriver.Ack:
				err = tb.removeTimer(op.ID, &rec)
			case ontimedriver.Retry, ontimedriver.Snooze:
				if err := tb.unindex(op.ID, &rec); err != nil {
					return err
				}
				rec.token, rec.leaseUntil = 0, 0
				rec.due = addMicros(now, op.Delay)
				if op.Kind == ontimedriver.Snooze {
					rec.attempt -= min(rec.attempt, 1)
				} else if op.Error != "" {
					rec.lastError = truncateError(op.Error)
				}
				err = tb.putTimer(op.ID, &rec)
			case ontimedriver.Dead:
				// a recurring timer's tick dies under DeadTickID
				deadID, derr := tb.deadID(op.ID)
				if derr != nil {
					return derr
				}
				if err := tb.removeTimer(op.ID, &rec); err != nil {
					return err
				}
				errText := rec.lastError
				if op.Error != "" {
					errText = truncateError(op.Error)
				}
				err = tb.bury(deadID, &deadRecord{
					due:     rec.due,
					diedAt:  nowUs,
					attempt: rec.attempt,
					reason:  op.Reason,
					errText: errText,
					payload: rec.payload,
				})
			default: // refused before the transaction
				return fmt.Errorf("%w: unknown settle kind %d", ontimedriver.ErrInvalid, int(op.Kind))
			}
			if err != nil {
				return err
			}
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

// Extend pushes lease deadlines to now + lease, fenced by token. See
// ontimedriver.Driver.
func (d *Driver) Extend(ctx context.Context, topic string, leases []ontimedriver.Lease, lease time.Duration) ([]error, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("%w: lease %v is not positive", ontimedriver.ErrInvalid, lease)
	}
	var results []error
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		results = make([]error, len(leases))
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		deadline := addMicros(time.Now(), lease)
		for i, l := range leases {
			rec, err := tb.fenced(l)
			if err != nil {
				results[i] = err
				continue
			}
			if err := tb.unindex(l.ID, &rec); err != nil {
				return err
			}
			rec.leaseUntil = deadline
			if err := tb.putTimer(l.ID, &rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// fenced loads the timer a lease names, or returns ErrLeaseLost when the
// token is not the timer's current one.
func (tb *topicBuckets) fenced(l ontimedriver.Lease) (record, error) {
	rec, found, err := tb.getTimer(l.ID)
	if !found {
		return rec, ontimedriver.ErrLeaseLost
	}
	if err != nil {
		return rec, err
	}
	tok, ok := parseToken(l.Token)
	if !ok || !rec.leased() || rec.token != tok {
		return rec, ontimedriver.ErrLeaseLost
	}
	return rec, nil
}
