package ontimebolt

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Recurring timers (ontimedriver.Recurring). A recurring timer is an
// ordinary timer (record in t or u, claim index entry in q or f) plus a
// schedule entry in bucket r under the timer's key:
//
//	"<tick>,<tick µs>,<paused 0|1>,<last tick>,<last outcome>,<held due µs>,<spec>"
//
// sealed like a record (version, CRC-32C over the key and the entry). A
// paused schedule's timer is due at pausedMicros (the last microsecond of
// year 9999, never claimable), and the entry keeps the due time of its
// held tick, which Get and List report. Claim reads the entry of each
// claimed timer when the bucket exists; Settle with Next rewrites the
// record for the next tick and the entry, in the one transaction of the
// settlement; removing a timer (ack, dead, cancel, a plain upsert)
// removes its entry.

// pausedMicros is the due time of a paused schedule's tick: never reached.
var pausedMicros = ceilMicros(ontimedriver.MaxDue)

// schedEntry is a decoded schedule entry.
type schedEntry struct {
	tick, lastTick int64
	tickAt         int64 // the tick's scheduled instant (µs)
	paused         bool
	lastOutcome    string
	heldDue        int64 // the held tick's due time while paused
	spec           string
}

func (e *schedEntry) encode(key []byte) []byte {
	p := "0"
	if e.paused {
		p = "1"
	}
	s := strconv.FormatInt(e.tick, 10) + "," + strconv.FormatInt(e.tickAt, 10) + "," + p + "," + strconv.FormatInt(e.lastTick, 10) + "," + e.lastOutcome + "," +
		strconv.FormatInt(e.heldDue, 10) + "," + e.spec
	b := make([]byte, headerLen, headerLen+len(s))
	return seal(key, append(b, s...))
}

func decodeSched(key, b []byte) (schedEntry, error) {
	body, err := open(recordVersion, key, b)
	if err != nil {
		return schedEntry{}, err
	}
	f := strings.SplitN(string(body), ",", 7)
	if len(f) != 7 || (f[2] != "0" && f[2] != "1") {
		return schedEntry{}, errBadRecord
	}
	var e schedEntry
	var err1, err2, err3, err4 error
	e.tick, err1 = strconv.ParseInt(f[0], 10, 64)
	e.tickAt, err4 = strconv.ParseInt(f[1], 10, 64)
	e.lastTick, err2 = strconv.ParseInt(f[3], 10, 64)
	e.heldDue, err3 = strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return schedEntry{}, errBadRecord
	}
	e.paused, e.lastOutcome, e.spec = f[2] == "1", f[4], f[6]
	return e, nil
}

func (e *schedEntry) info() *ontimedriver.RecurringInfo {
	return &ontimedriver.RecurringInfo{Spec: e.spec, Tick: e.tick, TickAt: fromMicros(e.tickAt), Paused: e.paused, LastTick: e.lastTick, LastOutcome: e.lastOutcome}
}

// getSched loads a timer's schedule entry; found is false for a plain
// timer.
func (tb *topicBuckets) getSched(id string) (e schedEntry, found bool, err error) {
	if tb.sched == nil {
		return e, false, nil
	}
	key := timerKey(tb.name, id)
	raw := tb.sched.Get(key)
	if raw == nil {
		return e, false, nil
	}
	e, err = decodeSched(key, raw)
	if err != nil {
		return e, true, tb.corrupt("schedule entry", id, err)
	}
	return e, true, nil
}

// putSched writes a schedule entry, creating bucket r with the first.
func (tb *topicBuckets) putSched(id string, e *schedEntry) error {
	if tb.sched == nil {
		b, err := tb.tx.CreateBucketIfNotExists(bucketSched)
		if err != nil {
			return err
		}
		tb.sched = b
	}
	key := timerKey(tb.name, id)
	return tb.sched.Put(key, e.encode(key))
}

// deleteSched deletes a timer's schedule entry, if any.
func (tb *topicBuckets) deleteSched(id string) error {
	if tb.sched == nil {
		return nil
	}
	return tb.sched.Delete(timerKey(tb.name, id))
}

// withSched adds the schedule entry of a timer to what Get and List report.
func (tb *topicBuckets) withSched(ti *ontimedriver.TimerInfo) error {
	e, found, err := tb.getSched(ti.ID)
	if err != nil || !found {
		return err
	}
	ti.Recurring = e.info()
	if e.paused && !ti.Due.Before(fromMicros(pausedMicros)) {
		ti.Due = fromMicros(e.heldDue)
	}
	return nil
}

// RecurringSupported reports true: the embedded store keeps recurring
// timers.
func (d *Driver) RecurringSupported() bool { return true }

// ScheduleRecurring writes a recurring timer in one transaction. See
// ontimedriver.Recurring.
func (d *Driver) ScheduleRecurring(ctx context.Context, topic string, t ontimedriver.NewRecurring, mode ontimedriver.ScheduleMode) (ontimedriver.ScheduleResult, error) {
	if t.ID == "" {
		return ontimedriver.ScheduleResult{}, fmt.Errorf("%w: a recurring timer has an empty id", ontimedriver.ErrInvalid)
	}
	if err := ontimedriver.ValidateSpec(t.Spec); err != nil {
		return ontimedriver.ScheduleResult{}, fmt.Errorf("recurring timer %q: %w", t.ID, err)
	}
	if err := ontimedriver.ValidateDue(t.At); err != nil {
		return ontimedriver.ScheduleResult{}, fmt.Errorf("recurring timer %q: %w", t.ID, err)
	}
	if !t.TickAt.IsZero() {
		if err := ontimedriver.ValidateDue(t.TickAt); err != nil {
			return ontimedriver.ScheduleResult{}, fmt.Errorf("recurring timer %q: tick instant: %w", t.ID, err)
		}
	}
	if t.Tick < 1 {
		return ontimedriver.ScheduleResult{}, fmt.Errorf("%w: recurring timer %q: tick %d is not positive", ontimedriver.ErrInvalid, t.ID, t.Tick)
	}
	var (
		result ontimedriver.ScheduleResult
		w      wake
	)
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		result = ontimedriver.ScheduleResult{}
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		w.start(tb)
		due := ceilMicros(t.At)
		old, found, err := tb.getTimer(t.ID)
		if found && mode == ontimedriver.IfAbsent {
			result.Err = ontimedriver.ErrExists
			return nil
		}
		e := schedEntry{tick: t.Tick, tickAt: due, spec: t.Spec}
		if !t.TickAt.IsZero() {
			e.tickAt = ceilMicros(t.TickAt)
		}
		if prev, ok, perr := tb.getSched(t.ID); ok && perr == nil {
			e.lastTick, e.lastOutcome = prev.lastTick, prev.lastOutcome
		}
		switch {
		case err != nil:
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
		if err := tb.putSched(t.ID, &e); err != nil {
			return err
		}
		result.Due = fromMicros(due)
		w.finish(tb)
		return tb.flush()
	})
	if err != nil {
		return ontimedriver.ScheduleResult{}, err
	}
	if w.fire {
		d.notify(topic, w.at)
	}
	return result, nil
}

// PauseRecurring pauses a recurring timer. See ontimedriver.Recurring.
func (d *Driver) PauseRecurring(ctx context.Context, topic, id string) error {
	return d.pauseResume(ctx, topic, id, true, ontimedriver.Tick{})
}

// ResumeRecurring resumes a paused recurring timer. See
// ontimedriver.Recurring.
func (d *Driver) ResumeRecurring(ctx context.Context, topic, id string, next ontimedriver.Tick) error {
	if err := ontimedriver.ValidateDue(next.Due); err != nil {
		return fmt.Errorf("recurring timer %q: next tick: %w", id, err)
	}
	if err := ontimedriver.ValidateDue(next.Instant()); err != nil {
		return fmt.Errorf("recurring timer %q: next tick's instant: %w", id, err)
	}
	return d.pauseResume(ctx, topic, id, false, next)
}

func (d *Driver) pauseResume(ctx context.Context, topic, id string, pause bool, next ontimedriver.Tick) error {
	var (
		result error
		w      wake
	)
	err := d.write(ctx, topic, func(tx *bbolt.Tx) error {
		result = nil
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		w.start(tb)
		e, found, err := tb.getSched(id)
		if err != nil {
			return err
		}
		rec, rfound, err := tb.getTimer(id)
		if err != nil {
			return err
		}
		if !found || !rfound {
			result = ontimedriver.ErrNotFound
			return nil
		}
		if e.paused == pause {
			return nil
		}
		e.paused = pause
		if !rec.leased() {
			if err := tb.unindex(id, &rec); err != nil {
				return err
			}
			if pause {
				e.heldDue, rec.due = rec.due, pausedMicros
			} else {
				e.tick, e.heldDue = next.N, 0
				e.tickAt = ceilMicros(next.Instant())
				rec.due, rec.attempt, rec.lastError = ceilMicros(next.Due), 0, ""
			}
			if err := tb.putTimer(id, &rec); err != nil {
				return err
			}
		}
		if err := tb.putSched(id, &e); err != nil {
			return err
		}
		w.finish(tb)
		return tb.flush()
	})
	if err != nil {
		return err
	}
	if w.fire {
		d.notify(topic, w.at)
	}
	return result
}

// armNext settles a recurring timer's tick with a next tick (Ack or Dead
// with Next): the record becomes the next tick's (attempt 0, no lease, due
// at next, or held while paused) and the entry records the outcome. A dead
// tick is copied to the dead letters under DeadTickID. It reports false,
// changing nothing, when the timer has no schedule entry (a plain timer:
// the caller settles it as usual).
func (tb *topicBuckets) armNext(op ontimedriver.Settlement, rec *record, nowUs int64) (bool, error) {
	e, found, err := tb.getSched(op.ID)
	if err != nil || !found {
		return false, err
	}
	outcome := "ack"
	if op.Kind == ontimedriver.Dead {
		outcome = "dead"
		errText := rec.lastError
		if op.Error != "" {
			errText = truncateError(op.Error)
		}
		err := tb.bury(ontimedriver.DeadTickID(op.ID, e.tick), &deadRecord{
			due:     rec.due,
			diedAt:  nowUs,
			attempt: rec.attempt,
			reason:  op.Reason,
			errText: errText,
			payload: rec.payload,
		})
		if err != nil {
			return false, err
		}
	}
	if err := tb.unindex(op.ID, rec); err != nil {
		return false, err
	}
	due := ceilMicros(op.Next.Due)
	e.lastTick, e.lastOutcome, e.tick, e.tickAt = e.tick, outcome, op.Next.N, ceilMicros(op.Next.Instant())
	rec.token, rec.leaseUntil, rec.attempt, rec.lastError, rec.due = 0, 0, 0, "", due
	if e.paused {
		e.heldDue, rec.due = due, pausedMicros
	}
	if err := tb.putTimer(op.ID, rec); err != nil {
		return false, err
	}
	return true, tb.putSched(op.ID, &e)
}

// deadID is the id a dead timer is stored under: a recurring timer's tick
// dies as DeadTickID.
func (tb *topicBuckets) deadID(id string) (string, error) {
	e, found, err := tb.getSched(id)
	if err != nil || !found {
		return id, err
	}
	return ontimedriver.DeadTickID(id, e.tick), nil
}

// claimedSched fills a claimed timer's spec and tick.
func (tb *topicBuckets) claimedSched(c *ontimedriver.ClaimedTimer) error {
	e, found, err := tb.getSched(c.ID)
	if err != nil || !found {
		return err
	}
	c.Schedule, c.Tick, c.TickAt = e.spec, e.tick, fromMicros(e.tickAt)
	return nil
}

var _ ontimedriver.Recurring = (*Driver)(nil)

var _ ontimedriver.RecurringLister = (*Driver)(nil)

// ListRecurring returns a page of a topic's recurring timers by id, in one
// read transaction. See ontimedriver.RecurringLister. Bucket r is keyed by
// id first (timerKey), so a page walks the keys of the store's schedule
// entries (of every topic: the recurring timers only, never the plain
// ones), keeps the topic's ids after the cursor and reads the page's
// timers.
func (d *Driver) ListRecurring(ctx context.Context, topic, cursor string, limit int) (*ontimedriver.Page, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	after, err := decodeRecurringCursor(cursor)
	if err != nil {
		return nil, err
	}
	limit = ontimedriver.RecurringPageLimit(limit)
	page := &ontimedriver.Page{Timers: []ontimedriver.TimerInfo{}}
	err = d.view(func(tx *bbolt.Tx) error {
		nowUs := floorMicros(time.Now())
		tb, err := d.lookup(tx, topic)
		if err != nil || tb.sched == nil {
			return err
		}
		var ids []string
		c := tb.sched.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			id, tp, ok := splitTimerKey(k)
			if !ok || string(tp) != topic || (after != "" && string(id) <= after) {
				continue
			}
			ids = append(ids, string(id))
		}
		slices.Sort(ids)
		if len(ids) > limit {
			ids = ids[:limit]
			page.NextCursor = encodeRecurringCursor(ids[limit-1])
		}
		for _, id := range ids {
			rec, found, err := tb.getTimer(id)
			if err != nil {
				return err
			}
			if !found {
				continue // an entry without its timer: not a timer to list
			}
			ti := timerInfo(id, &rec, nowUs)
			if err := tb.withSched(&ti); err != nil {
				return err
			}
			page.Timers = append(page.Timers, ti)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// recurringCursorVersion starts a ListRecurring cursor, so that a List
// cursor is refused as one.
const recurringCursorVersion = 'r'

// encodeRecurringCursor is ListRecurring's cursor: the last id listed.
func encodeRecurringCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{recurringCursorVersion}, id...))
}

// decodeRecurringCursor reads a ListRecurring cursor; "" for none.
func decodeRecurringCursor(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 2 || b[0] != recurringCursorVersion {
		return "", fmt.Errorf("%w: malformed cursor %q", ontimedriver.ErrInvalid, s)
	}
	return string(b[1:]), nil
}
