package ontimeredis

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Recurring timers (ontimedriver.Recurring), native layout only. A
// recurring timer is an ordinary timer of its topic plus an entry in
//
//	P{T}:sched  hash  id → "<tick>,<tick ms>,<paused 0|1>,<last tick>,<last outcome>,<spec>"
//
// which claim.lua reports with the claimed timer (one EXISTS per claim when
// the topic has none), settle.lua rewrites when it arms the next tick, and
// schedule, cancel and settle scripts delete with the timer. A paused
// schedule's tick has the score PAUSED (the last millisecond of year
// 9999), so no claim takes it.

var (
	sRecur      = mustScript("recur", "common")
	sRecurPause = mustScript("recur_pause", "common")
	sRecurList  = mustScript("list_recurring", "common")
)

var _ ontimedriver.RecurringLister = (*Driver)(nil)

// errCompatRecurring is the compatible layout's refusal.
var errCompatRecurring = fmt.Errorf("%w: recurring timers need the native layout (the faststream-compatible layout cannot keep them: the Python library would not re-arm them)", ontimedriver.ErrUnsupported)

// shardedRecurring is the refusal of a recurring timer on a sharded topic
// (Options.Shards). A dead tick is kept under "<id>#<tick>" in the shard
// of <id>, where a replay would make it a one-shot timer that Get, Cancel
// and its settlement look for in the shard of "<id>#<tick>": a recurring
// timer would need its dead ticks to route to another shard than their
// ids do.
func shardedRecurring(topic string, n int) error {
	return fmt.Errorf("%w: topic %q is sharded (%d shards, Options.Shards) and recurring timers need an unsharded topic: publish them to a topic the driver does not shard (see the package documentation)", ontimedriver.ErrUnsupported, topic, n)
}

// RecurringSupported reports whether the driver keeps recurring timers:
// true in the native layout, false in the compatible one.
func (d *Driver) RecurringSupported() bool { return !d.compat }

// ScheduleRecurring writes a recurring timer in one script call. See
// ontimedriver.Recurring. It waits for replicas as Schedule does
// (Options.WaitReplicas, ontimedriver.WithReplicaAck).
func (d *Driver) ScheduleRecurring(ctx context.Context, topic string, t ontimedriver.NewRecurring, mode ontimedriver.ScheduleMode) (ontimedriver.ScheduleResult, error) {
	if d.compat {
		return ontimedriver.ScheduleResult{}, errCompatRecurring
	}
	if err := checkRecurring(t); err != nil {
		return ontimedriver.ScheduleResult{}, err
	}
	if s := d.sharded(topic); s != nil {
		return ontimedriver.ScheduleResult{}, shardedRecurring(topic, s.n)
	}
	k := d.keys(topic)
	m := "0"
	if mode == ontimedriver.IfAbsent {
		m = "1"
	}
	ks := d.withRegistry(d.withIndex([]string{k.due, k.msg, k.lease, k.sched, k.shards}))
	tickAt := t.TickAt
	if tickAt.IsZero() {
		tickAt = t.At
	}
	args := []any{m, k.wake, topic, t.ID, strconv.FormatInt(ceilMs(t.At), 10),
		strconv.FormatInt(t.Tick, 10), t.Spec, t.Payload, strconv.FormatInt(ceilMs(tickAt), 10)}
	var res any
	var err error
	if ack := d.ack(ctx); ack.Replicas > 0 {
		res, err = d.evalWait(ctx, sRecur, ks, ack, args...)
	} else {
		res, err = d.eval(ctx, sRecur, ks, args...)
	}
	if err != nil {
		return ontimedriver.ScheduleResult{}, shardedRefusal(topic, err)
	}
	a, err := replyArray(res)
	if err != nil || len(a) != 3 {
		return ontimedriver.ScheduleResult{}, errReply
	}
	n := replyInt(a[0])
	if n == -1 {
		return ontimedriver.ScheduleResult{Err: ontimedriver.ErrExists}, nil
	}
	d.hintAfter(ctx, topic, a[1], hintLower, a[2], false)
	d.registerAfter(topic)
	return ontimedriver.ScheduleResult{Due: msTime(n)}, nil
}

func checkRecurring(t ontimedriver.NewRecurring) error {
	if err := ontimedriver.ValidateSpec(t.Spec); err != nil {
		return fmt.Errorf("recurring timer %q: %w", t.ID, err)
	}
	if err := ontimedriver.ValidateDue(t.At); err != nil {
		return fmt.Errorf("recurring timer %q: %w", t.ID, err)
	}
	if !t.TickAt.IsZero() {
		if err := ontimedriver.ValidateDue(t.TickAt); err != nil {
			return fmt.Errorf("recurring timer %q: tick instant: %w", t.ID, err)
		}
	}
	if t.Tick < 1 {
		return fmt.Errorf("%w: recurring timer %q: tick %d is not positive", ontimedriver.ErrInvalid, t.ID, t.Tick)
	}
	return nil
}

// PauseRecurring pauses a recurring timer. See ontimedriver.Recurring.
func (d *Driver) PauseRecurring(ctx context.Context, topic, id string) error {
	return d.pauseResume(ctx, topic, id, "1", ontimedriver.Tick{})
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
	return d.pauseResume(ctx, topic, id, "0", next)
}

func (d *Driver) pauseResume(ctx context.Context, topic, id, pause string, next ontimedriver.Tick) error {
	if d.compat {
		return errCompatRecurring
	}
	if s := d.sharded(topic); s != nil {
		return shardedRecurring(topic, s.n)
	}
	k := d.keys(topic)
	args := []any{pause, k.wake, topic, id}
	if pause == "0" {
		args = append(args, strconv.FormatInt(ceilMs(next.Due), 10), strconv.FormatInt(next.N, 10), strconv.FormatInt(ceilMs(next.Instant()), 10))
	}
	res, err := d.eval(ctx, sRecurPause, d.withIndex([]string{k.due, k.msg, k.lease, k.sched}), args...)
	if err != nil {
		return err
	}
	a, err := replyArray(res)
	if err != nil || len(a) != 3 {
		return errReply
	}
	if replyInt(a[0]) == 0 {
		return ontimedriver.ErrNotFound
	}
	if replyStr(a[2]) != "" {
		d.hintAfter(ctx, topic, a[1], hintLower, a[2], false)
	}
	return nil
}

// ListRecurring returns a page of a topic's recurring timers by id, in
// two round trips: HKEYS of the topic's schedule hash (the ids, sorted
// here, so that Redis spends O(recurring timers) in C and no Lua sort),
// then one script that reads, for the page's ids, what Get reads. Its cost
// grows with the topic's recurring timers, never with its plain ones. See
// ontimedriver.RecurringLister. A sharded topic (Options.Shards) holds no
// recurring timers: its pages are empty. The compatible layout refuses
// with ontimedriver.ErrUnsupported.
func (d *Driver) ListRecurring(ctx context.Context, topic, cursor string, limit int) (*ontimedriver.Page, error) {
	if d.compat {
		return nil, errCompatRecurring
	}
	after, err := decodeRecurringCursor(cursor)
	if err != nil {
		return nil, err
	}
	limit = ontimedriver.RecurringPageLimit(limit)
	p := &ontimedriver.Page{Timers: []ontimedriver.TimerInfo{}}
	if d.sharded(topic) != nil {
		return p, nil
	}
	k := d.keys(topic)
	all, err := bounded(d, ctx, func(ctx context.Context) ([]string, error) { return d.rdb.HKeys(ctx, k.sched).Result() })
	if err != nil {
		return nil, err
	}
	ids := make([]any, 0, min(len(all), limit+1))
	slices.Sort(all)
	i, _ := slices.BinarySearch(all, after)
	if i < len(all) && all[i] == after {
		i++
	}
	for _, id := range all[i:min(len(all), i+limit)] {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return p, nil
	}
	if i+limit < len(all) {
		p.NextCursor = encodeRecurringCursor(all[i+limit-1])
	}
	res, err := d.eval(ctx, sRecurList, []string{k.sched, k.due, k.msg, k.lease}, ids...)
	if err != nil {
		return nil, err
	}
	a, err := replyArray(res)
	if err != nil || len(a) != 1+4*len(ids) {
		return nil, errReply
	}
	now := replyInt(a[0])
	for j, id := range ids {
		r := a[1+4*j:]
		ti, err := d.info(id.(string), now, replyStr(r[0]), replyStr(r[2]), replyStr(r[1]))
		if err != nil {
			continue // cancelled since the HKEYS, or an entry without its timer
		}
		e, ok := parseSchedEntry(replyStr(r[3]))
		if !ok {
			continue
		}
		ti.Recurring = e
		p.Timers = append(p.Timers, *ti)
	}
	return p, nil
}

// encodeRecurringCursor is ListRecurring's cursor: the last id listed.
func encodeRecurringCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(id))
}

// decodeRecurringCursor reads a ListRecurring cursor; "" for none.
func decodeRecurringCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || ontimedriver.ValidateID(string(b)) != nil {
		return "", fmt.Errorf("%w: cursor %q is not one this driver made", ontimedriver.ErrInvalid, c)
	}
	return string(b), nil
}

// listRecurring fills the schedule entries of a page's recurring timers
// (one HMGET; an inspection, not atomic with the page).
func (d *Driver) listRecurring(ctx context.Context, k keys, timers []ontimedriver.TimerInfo) error {
	ids := make([]string, len(timers))
	for i := range timers {
		ids[i] = timers[i].ID
	}
	vals, err := bounded(d, ctx, func(ctx context.Context) ([]any, error) { return d.rdb.HMGet(ctx, k.sched, ids...).Result() })
	if err != nil {
		return err
	}
	for i, v := range vals {
		if s, ok := v.(string); ok && i < len(timers) {
			if e, ok := parseSchedEntry(s); ok {
				timers[i].Recurring = e
			}
		}
	}
	return nil
}

// parseSchedEntry reads "<tick>,<tick ms>,<paused>,<last tick>,<last
// outcome>,<spec>".
func parseSchedEntry(s string) (*ontimedriver.RecurringInfo, bool) {
	f := strings.SplitN(s, ",", 6)
	if len(f) != 6 {
		return nil, false
	}
	tick, err1 := strconv.ParseInt(f[0], 10, 64)
	at, err2 := strconv.ParseInt(f[1], 10, 64)
	last, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || (f[2] != "0" && f[2] != "1") {
		return nil, false
	}
	return &ontimedriver.RecurringInfo{Spec: f[5], Tick: tick, TickAt: msTime(at), Paused: f[2] == "1", LastTick: last, LastOutcome: f[4]}, true
}
