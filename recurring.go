package ontime

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/schedule"
)

// Recurring timers: a timer with a schedule (schedule.Every, schedule.Cron)
// that fires once per tick across every worker of its topic. It lives in
// the store like any timer: a worker claims a tick under a lease, and the
// tick's settlement and the arming of the next tick are one atomic, fenced
// store operation, so no leader, no scheduler in memory, and a crash
// between them cannot lose or double the schedule. See docs/recurring.md.
//
// Semantics:
//   - each tick is delivered at least once, and once across the fleet
//     while no worker dies; a tick whose worker dies is delivered again
//     when its lease runs out (the only duplicate);
//   - the handler sees the tick's scheduled instant and number
//     (Message.Tick), to be idempotent per tick;
//   - a failing tick is retried by the topic's retry policy; a tick that
//     is dead-lettered (or dropped) ends, and the schedule keeps running:
//     the dead letter is a copy under id#tick;
//   - no overlap: the next tick is armed only when the current one is
//     settled, so two ticks of one schedule never run at once; a tick that
//     runs past the next tick's instant makes that tick late (it fires at
//     once, or is folded into the missed-ticks policy), never concurrent;
//   - missed ticks (a store outage, every worker stopped, a slow tick)
//     follow the schedule's MissedPolicy: FireOnce (default) fires one
//     tick for all the missed ones; FireEach(n) fires at most n of them,
//     one after the other;
//   - never early: a tick is due at its instant on the store's clock.

// Tick is a recurring timer's tick as its handler sees it (Message.Tick).
// The zero Tick is a plain timer's.
type Tick struct {
	// N numbers the ticks armed for the schedule: 1, 2, 3, ... (ticks a
	// missed-ticks policy skipped are not numbered). A publish that
	// replaces the schedule starts again at 1.
	N int64
	// At is the tick's scheduled instant (Message.Due is later when the
	// tick is retried).
	At time.Time
	// Schedule is the schedule's canonical spec (schedule.Parse reads it).
	Schedule string
}

// MissedPolicy says what a recurring timer does with the ticks it missed:
// ticks whose instant passed while no tick could run (a store outage,
// every worker stopped, a tick that ran longer than the interval). The
// zero value is FireOnce.
type MissedPolicy struct {
	each  bool
	bound int
}

// FireOnce fires one tick for all the missed ones: the first missed
// tick (the one that was armed) fires late, the others are skipped, and the
// schedule goes on with its first tick after now. It is the default.
func FireOnce() MissedPolicy { return MissedPolicy{} }

// FireEach fires the missed ticks one after the other, at most bound of
// them for one outage: the first missed tick (the one that was armed), late,
// then the latest bound-1 of the others, oldest first; the ones between are
// skipped. FireEach(1) is FireOnce. A bound below 1 is 1.
func FireEach(bound int) MissedPolicy { return MissedPolicy{each: true, bound: max(bound, 1)} }

// String returns "once" or "each:<bound>".
func (p MissedPolicy) String() string {
	if p.each {
		return "each:" + strconv.Itoa(p.bound)
	}
	return "once"
}

// OnMissed sets a recurring timer's missed-ticks policy
// (PublishRecurring). Publish refuses it.
func OnMissed(p MissedPolicy) PublishOption {
	return func(_ *Timer, m *publishMode) { m.missed = &p }
}

// Jitter spreads a recurring timer's ticks over window (PublishRecurring):
// each tick is due at its instant plus schedule.JitterFor(id, instant,
// window), the same on every server, so a fleet's identical schedules do
// not all fire at once. Jitter only delays: a tick is never due before its
// instant, and the handler sees the instant (Message.Tick.At). Keep window
// below the schedule's interval. Publish refuses it; a window that is not
// positive is refused too.
func Jitter(window time.Duration) PublishOption {
	return func(_ *Timer, m *publishMode) { m.jitter = &window }
}

// A recurring timer's spec in the store is the schedule's canonical spec,
// then its options that are not the defaults, each as ";<key>=<value>":
// ";missed=each:<bound>", ";jitter=<Go duration>".
const (
	missedKey = "missed="
	jitterKey = "jitter="
)

func encodeSpec(s schedule.Schedule, p MissedPolicy, jitter time.Duration) string {
	out := s.String()
	if p.each {
		out += ";" + missedKey + p.String()
	}
	if jitter > 0 {
		out += ";" + jitterKey + jitter.String()
	}
	return out
}

// recurringSpec is a parsed stored spec.
type recurringSpec struct {
	sched  schedule.Schedule
	missed MissedPolicy
	jitter time.Duration
	canon  string // the schedule's part
}

func parseSpec(spec string) (*recurringSpec, error) {
	parts := strings.Split(spec, ";")
	s, err := schedule.Parse(parts[0])
	if err != nil {
		return nil, err
	}
	r := &recurringSpec{sched: s, canon: parts[0]}
	for _, o := range parts[1:] {
		switch {
		case strings.HasPrefix(o, missedKey):
			b, ok := strings.CutPrefix(o[len(missedKey):], "each:")
			n, err := strconv.Atoi(b)
			if !ok || err != nil || n < 1 {
				return nil, invalidf("recurring spec %q: unknown missed-ticks policy %q", spec, o)
			}
			r.missed = FireEach(n)
		case strings.HasPrefix(o, jitterKey):
			d, err := time.ParseDuration(o[len(jitterKey):])
			if err != nil || d <= 0 {
				return nil, invalidf("recurring spec %q: bad jitter %q", spec, o)
			}
			r.jitter = d
		default:
			return nil, invalidf("recurring spec %q: unknown option %q", spec, o)
		}
	}
	return r, nil
}

// tick is the tick numbered n at instant at of the timer id: due at the
// instant plus its jitter.
func (r *recurringSpec) tick(id string, at time.Time, n int64) ontimedriver.Tick {
	t := ontimedriver.Tick{Due: at, N: n}
	if r.jitter > 0 {
		t.Due, t.At = at.Add(schedule.JitterFor(id, at, r.jitter)), at
	}
	return t
}

// specCache keeps parsed specs: a worker parses a schedule once, not per
// tick.
var specCache sync.Map // string -> *recurringSpec

func cachedSpec(spec string) (*recurringSpec, error) {
	if v, ok := specCache.Load(spec); ok {
		return v.(*recurringSpec), nil
	}
	r, err := parseSpec(spec)
	if err != nil {
		return nil, err
	}
	specCache.Store(spec, r)
	return r, nil
}

// maxCatchUpWalk bounds how many missed ticks FireEach walks to find the
// oldest of the last few (a 200 ms schedule after a week's outage has 3
// million): past it, they are found from now backwards.
const maxCatchUpWalk = 100_000

// nextTick is the tick to arm when the tick at cur (number n) settles, at
// now: the schedule's first tick after cur, unless that has passed (the
// ticks in (cur, now] were missed while this tick waited for a worker or
// ran); then the missed-ticks policy decides. This late tick stood for the
// first of them; FireOnce skips the others (the next tick is the first
// after now), FireEach(b) fires the last b-1 of them, oldest first, one
// after the other, and skips the older ones. ok is false when the schedule
// has no tick left (it ends).
func (r *recurringSpec) nextTick(id string, cur time.Time, n int64, now time.Time) (ontimedriver.Tick, bool) {
	at, ok := r.nextInstant(cur, now)
	if !ok {
		return ontimedriver.Tick{}, false
	}
	return r.tick(id, at, n+1), true
}

// nextInstant is nextTick's instant.
func (r *recurringSpec) nextInstant(cur time.Time, now time.Time) (time.Time, bool) {
	first := r.sched.Next(cur)
	if first.IsZero() {
		return time.Time{}, false
	}
	if first.After(now) {
		return first, true
	}
	keep := 0
	if r.missed.each {
		keep = r.missed.bound - 1
	}
	if keep == 0 {
		next := r.sched.Next(now)
		return next, !next.IsZero()
	}
	// the oldest of the last keep ticks in (cur, now]
	ring := make([]time.Time, 0, keep)
	k, walked := 0, 0
	for t := first; !t.IsZero() && !t.After(now); t = r.sched.Next(t) {
		if walked++; walked > maxCatchUpWalk {
			return r.lastFew(keep, now), true
		}
		if len(ring) < keep {
			ring = append(ring, t)
		} else {
			ring[k] = t
			k = (k + 1) % keep
		}
	}
	if len(ring) < keep {
		return ring[0], true
	}
	return ring[k], true
}

// lastFew finds the oldest of the last keep ticks at or before now,
// looking back from now over growing windows.
func (r *recurringSpec) lastFew(keep int, now time.Time) time.Time {
	for w := time.Second; w <= 1<<61; w *= 2 {
		if len(schedule.Missed(r.sched, now.Add(-w), now, keep+1)) > keep {
			ts := schedule.Missed(r.sched, now.Add(-w), now, maxCatchUpWalk)
			return ts[max(len(ts)-keep, 0)]
		}
	}
	return schedule.Latest(r.sched, time.Time{}, now)
}

// recurring returns the store's Recurring implementation, or an error
// wrapping ErrUnsupported.
func (c *Client) recurring() (ontimedriver.Recurring, error) {
	r, ok := ontimedriver.RecurringOf(c.drv)
	if !ok {
		return nil, fmt.Errorf("%w: %T keeps no recurring timers", ontimedriver.ErrUnsupported, c.orig)
	}
	return r, nil
}

// ErrUnsupported is returned (wrapped) when the store cannot do what was
// asked: the faststream-compatible Redis layout keeps no recurring timers.
var ErrUnsupported = ontimedriver.ErrUnsupported

// PublishRecurring publishes a recurring timer: body is delivered to
// topic's handler once per tick of sched, under the timer id id. Its first
// tick is sched's first tick after now (the local clock; a tick is still
// never claimed before its instant on the store's clock).
//
// Publishing an id that exists replaces it (upsert): the new schedule and
// body, tick numbers starting again at 1, and a tick that is running
// cannot arm the old schedule's next tick (its settlement is refused as a
// lost lease). With IfAbsent an existing id is left alone and ErrExists
// returned. Options: IfAbsent, WithHeaders, WithHeader,
// WithCorrelationID, OnMissed, Jitter and WaitReplicas (the write of the
// recurring timer waits for the replicas, as Publish's does); In, At and
// WithID are refused (the schedule decides when, id names the timer).
//
// The store must keep recurring timers (the native Redis layout and the
// embedded store do); the faststream-compatible layout refuses with an
// error wrapping ErrUnsupported.
func (c *Client) PublishRecurring(ctx context.Context, topic, id string, sched schedule.Schedule, body any, opts ...PublishOption) (time.Time, error) {
	t := Timer{ID: id, Body: body}
	var m publishMode
	for _, o := range opts {
		o(&t, &m)
	}
	if m.delaySet || !t.At.IsZero() || m.idSet {
		return time.Time{}, invalidf("PublishRecurring: In, At and WithID do not apply (the schedule says when, id names the timer)")
	}
	if m.ack.Replicas < 0 || m.ack.Timeout < 0 {
		return time.Time{}, invalidf("WaitReplicas(%d, %v): want n >= 0 and timeout >= 0", m.ack.Replicas, m.ack.Timeout)
	}
	if m.ack.Replicas > 0 {
		ctx = ontimedriver.WithReplicaAck(ctx, m.ack)
	}
	if err := schedule.Validate(sched); err != nil {
		return time.Time{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var pol MissedPolicy
	if m.missed != nil {
		pol = *m.missed
	}
	var jitter time.Duration
	if m.jitter != nil {
		if jitter = *m.jitter; jitter <= 0 {
			return time.Time{}, invalidf("PublishRecurring: jitter %v is not positive", jitter)
		}
	}
	full, err := c.fullTopic(topic)
	if err != nil {
		return time.Time{}, err
	}
	r, err := c.recurring()
	if err != nil {
		return time.Time{}, err
	}
	first := sched.Next(time.Now())
	if first.IsZero() {
		return time.Time{}, invalidf("PublishRecurring: schedule %q has no tick after now", sched.String())
	}
	nt, err := c.encodeTimer(&t)
	if err != nil {
		return time.Time{}, err
	}
	spec := encodeSpec(sched, pol, jitter)
	if err := ontimedriver.ValidateSpec(spec); err != nil {
		return time.Time{}, err
	}
	rs, err := cachedSpec(spec)
	if err != nil {
		return time.Time{}, err
	}
	tk := rs.tick(id, first, 1)
	if err := ontimedriver.ValidateDue(tk.Due); err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	res, err := r.ScheduleRecurring(ctx, full, ontimedriver.NewRecurring{ID: id, Spec: spec, At: tk.Due, TickAt: first, Tick: 1, Payload: nt.Payload}, scheduleMode(m.ifAbsent))
	reportStoreCall(ctx, c.drv, "schedule_recurring", full, start, err)
	if err != nil {
		return time.Time{}, err
	}
	return res.Due, res.Err
}

// Pause pauses the recurring timer id of topic: no tick of it is claimed
// until Resume (a tick running now finishes, retries included, and the
// tick it arms is held). Pausing a paused schedule changes nothing.
// ErrNotFound when topic has no recurring timer id.
func (c *Client) Pause(ctx context.Context, topic, id string) error {
	full, r, err := c.recurringCall(topic, id)
	if err != nil {
		return err
	}
	start := time.Now()
	err = r.PauseRecurring(ctx, full, id)
	reportStoreCall(ctx, c.drv, "pause_recurring", full, start, err)
	return err
}

// Resume resumes a paused recurring timer: its next tick is the
// schedule's first tick after now (the ticks that passed while it was
// paused are skipped, not missed). Resuming a running schedule changes
// nothing. ErrNotFound when topic has no recurring timer id.
func (c *Client) Resume(ctx context.Context, topic, id string) error {
	full, r, err := c.recurringCall(topic, id)
	if err != nil {
		return err
	}
	ti, err := c.drv.Get(ctx, full, id)
	if err != nil {
		return err
	}
	if ti.Recurring == nil {
		return ontimedriver.ErrNotFound
	}
	rs, err := cachedSpec(ti.Recurring.Spec)
	if err != nil {
		return err
	}
	next := rs.sched.Next(time.Now())
	if next.IsZero() {
		return invalidf("Resume: schedule %q has no tick after now", rs.canon)
	}
	start := time.Now()
	err = r.ResumeRecurring(ctx, full, id, rs.tick(id, next, ti.Recurring.Tick+1))
	reportStoreCall(ctx, c.drv, "resume_recurring", full, start, err)
	// A tick leased now arms the next tick itself when it settles (and
	// reports the ticks it missed): nothing was skipped.
	if err == nil && ti.Recurring.Paused && ti.State == ontimedriver.StateScheduled && len(c.hooks.unfired) > 0 {
		c.skippedTicks(ctx, rs, full, id, ti.Recurring.TickAt, next)
	}
	return err
}

func (c *Client) recurringCall(topic, id string) (string, ontimedriver.Recurring, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return "", nil, err
	}
	if err := ontimedriver.ValidateID(id); err != nil {
		return "", nil, err
	}
	r, err := c.recurring()
	if err != nil {
		return "", nil, err
	}
	return full, r, nil
}

// RecurringInfo is a recurring timer's schedule as Get and List show it
// (TimerInfo.Recurring).
type RecurringInfo struct {
	// Schedule is the schedule's canonical spec (schedule.Parse reads
	// it), Missed its missed-ticks policy and Jitter its jitter window.
	Schedule string
	Missed   MissedPolicy
	Jitter   time.Duration
	// Tick is the next tick to fire (or the one firing): its number and
	// scheduled instant.
	Tick Tick
	// Paused reports a paused schedule.
	Paused bool
	// LastTick is the number of the last tick settled (0: none yet) and
	// LastOutcome its outcome: "ack" (done or dropped) or "dead".
	LastTick    int64
	LastOutcome string
}

func recurringInfo(ri *ontimedriver.RecurringInfo) *RecurringInfo {
	if ri == nil {
		return nil
	}
	out := &RecurringInfo{Schedule: ri.Spec, Paused: ri.Paused, LastTick: ri.LastTick, LastOutcome: ri.LastOutcome}
	if rs, err := cachedSpec(ri.Spec); err == nil {
		out.Schedule, out.Missed, out.Jitter = rs.canon, rs.missed, rs.jitter
	}
	out.Tick = Tick{N: ri.Tick, At: ri.TickAt, Schedule: out.Schedule}
	return out
}

// tickOf is a claimed timer's Tick (zero for a plain timer).
func tickOf(t *ontimedriver.ClaimedTimer) Tick {
	if t.Schedule == "" {
		return Tick{}
	}
	canon, _, _ := strings.Cut(t.Schedule, ";")
	at := t.TickAt
	if at.IsZero() {
		at = t.Due
	}
	return Tick{N: t.Tick, At: at, Schedule: canon}
}

// withNextTick completes the Ack or Dead of a recurring timer's tick with
// the next tick to arm in the same store call. A spec that does not parse
// (written by a newer ontime, or damaged) ends nothing: the settlement
// goes without Next, which ends the schedule, and is logged.
func (e *executor) withNextTick(d *delivery, s *ontimedriver.Settlement) {
	if d.t.Schedule == "" || (s.Kind != ontimedriver.Ack && s.Kind != ontimedriver.Dead) {
		return
	}
	rs, err := cachedSpec(d.t.Schedule)
	if err != nil {
		e.log.Error("ontime: recurring timer's schedule does not parse; this tick ends it", "topic", e.topic, "id", d.t.ID, "spec", d.t.Schedule, "err", err)
		return
	}
	cur := d.t.TickAt
	if cur.IsZero() {
		cur = d.t.Due
	}
	next, ok := rs.nextTick(d.t.ID, cur, d.t.Tick, time.Now())
	if !ok {
		e.log.Info("ontime: recurring timer's schedule has no more ticks; it ends", "topic", e.topic, "id", d.t.ID, "spec", rs.canon)
		return
	}
	s.Next = &next
	if len(e.hooks.unfired) > 0 {
		at := next.At
		if at.IsZero() {
			at = next.Due
		}
		e.missedTicks(d.ctx, rs, d.t.ID, cur, at)
	}
}
