package ontimeredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
)

// maxClaim bounds one Claim: a script passes the claimed ids to variadic
// commands at once, and Lua's stack allows a few thousand values.
const maxClaim = 1000

// maxErrorText bounds the error text kept with a retried or dead timer.
const maxErrorText = 1024

// Schedule writes timers in one script call. See ontimedriver.Driver.
func (d *Driver) Schedule(ctx context.Context, topic string, timers []ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	if len(timers) == 0 {
		return nil, nil
	}
	if s := d.sharded(topic); s != nil {
		return d.scheduleSharded(ctx, s, timers, mode)
	}
	k := d.keys(topic)
	args := make([]any, 0, 3+3*len(timers))
	m := "0"
	if mode == ontimedriver.IfAbsent {
		m = "1"
	}
	args = append(args, m, k.wake)
	if !d.compat {
		args = append(args, topic)
	}
	unit := int64(1) // the compatible layout counts microseconds
	if d.compat {
		unit = 1000
	}
	for _, t := range timers {
		if t.Delay < 0 {
			return nil, fmt.Errorf("%w: timer %q has negative delay %v", ontimedriver.ErrInvalid, t.ID, t.Delay)
		}
		if !t.At.IsZero() {
			if err := ontimedriver.ValidateDue(t.At); err != nil {
				return nil, fmt.Errorf("timer %q: %w", t.ID, err)
			}
		}
		// One value for the due time: absolute, or "+" and a delay from
		// the store's clock.
		var due string
		switch {
		case !t.At.IsZero():
			due = strconv.FormatInt(ceilMs(t.At)*unit, 10)
		case t.Delay == 0:
			due = "+0:0" // due now, the usual case: no per-timer strings
		default:
			due = "+" + delaySpec(t.Delay)
		}
		args = append(args, t.ID, due, t.Payload)
	}
	s := sSchedule
	ks := d.withRegistry(d.withIndex([]string{k.due, k.msg, k.lease, k.sched, k.shards}))
	extra := 2 // the clock and the index hint
	if d.compat {
		s = sCSchedule
		ks = []string{k.due, k.msg}
		extra = 0
	}
	var res any
	var err error
	if ack := d.ack(ctx); ack.Replicas > 0 {
		res, err = d.evalWait(ctx, s, ks, ack, args...)
	} else {
		res, err = d.eval(ctx, s, ks, args...)
	}
	if err != nil {
		return nil, shardedRefusal(topic, err)
	}
	a, err := replyArray(res)
	if err != nil || len(a) != len(timers)+extra {
		return nil, errReply
	}
	if extra > 0 {
		d.hintAfter(ctx, topic, a[len(timers)], hintLower, a[len(timers)+1], false)
	}
	d.registerAfter(topic)
	out := make([]ontimedriver.ScheduleResult, len(timers))
	for i, v := range a[:len(timers)] {
		n := replyInt(v)
		switch {
		case n == -1:
			out[i].Err = ontimedriver.ErrExists
		case d.compat:
			out[i].Due = usTime(n)
		default:
			out[i].Due = msTime(n)
		}
	}
	return out, nil
}

// Claim leases up to max due timers in one script call. See
// ontimedriver.Driver.
func (d *Driver) Claim(ctx context.Context, topic string, max int, lease time.Duration) (*ontimedriver.ClaimResult, error) {
	if max <= 0 {
		return nil, fmt.Errorf("%w: claim max %d", ontimedriver.ErrInvalid, max)
	}
	if lease <= 0 {
		return nil, fmt.Errorf("%w: lease %v", ontimedriver.ErrInvalid, lease)
	}
	max = min(max, maxClaim)
	if s := d.sharded(topic); s != nil {
		return d.claimSharded(ctx, s, max, lease)
	}
	if d.compat {
		return d.claimCompat(ctx, topic, max, lease)
	}
	return d.claimNative(ctx, topic, max, lease, 0, 0)
}

// claimNative is Claim in the native layout. A claim across the shards of
// a sharded topic (until > 0) gives every shard the same lease deadline,
// until (ms; used when after the shard's clock), and claims no timer due
// after upto (ms).
func (d *Driver) claimNative(ctx context.Context, topic string, max int, lease time.Duration, until, upto int64) (*ontimedriver.ClaimResult, error) {
	k := d.keys(topic)
	args := []any{max, durMs(lease), topic}
	if until > 0 {
		args = append(args, until, upto)
	}
	res, err := d.eval(ctx, sClaim, d.withIndex([]string{k.due, k.msg, k.lease, k.seq, k.dead, k.dmsg, k.sched}), args...)
	if err != nil {
		return nil, err
	}
	a, err := replyArray(res)
	if err != nil || len(a) < 5 {
		return nil, errReply
	}
	d.hintAfter(ctx, topic, a[0], hintExact, a[2], true)
	out := &ontimedriver.ClaimResult{Now: usTime(replyInt(a[0]))}
	leaseUntil := msTime(replyInt(a[1]))
	if n := replyStr(a[2]); n != "" {
		out.Next = msTime(replyInt(a[2]))
	}
	// n timers (id, record), then pairs (index, attempt) for the timers
	// whose attempt is not their record's attempt + 1.
	n := int(replyInt(a[4]))
	if n < 0 || n > maxClaim || len(a) < 5+2*n || (len(a)-5-2*n)%2 != 0 {
		return nil, errReply
	}
	out.Timers = make([]ontimedriver.ClaimedTimer, n)
	if n == 0 {
		return out, nil
	}
	// The k-th claimed timer's token is the first token + k.
	first, err := strconv.ParseInt(replyStr(a[3]), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: first token %q", errReply, replyStr(a[3]))
	}
	for k := range n {
		v := a[5+2*k:]
		r, ok := parseRecord(replyStr(v[1]))
		if !ok {
			return nil, fmt.Errorf("%w: claimed record of %q", errReply, replyStr(v[0]))
		}
		out.Timers[k] = ontimedriver.ClaimedTimer{
			ID:         replyStr(v[0]),
			Token:      strconv.FormatInt(first+int64(k), 10),
			Due:        msTime(r.due),
			Attempt:    r.attempt + 1,
			LeaseUntil: leaseUntil,
			Payload:    r.payload,
		}
	}
	for o := a[5+2*n:]; len(o) >= 2; o = o[2:] {
		k := replyInt(o[0])
		if k < 0 {
			// a recurring timer: -(k+1), its schedule entry
			k = -k - 1
			if k >= int64(n) {
				return nil, errReply
			}
			e, ok := parseSchedEntry(replyStr(o[1]))
			if !ok {
				return nil, fmt.Errorf("%w: schedule entry of %q", errReply, out.Timers[k].ID)
			}
			out.Timers[k].Schedule, out.Timers[k].Tick, out.Timers[k].TickAt = e.Spec, e.Tick, e.TickAt
			continue
		}
		if k >= int64(n) {
			return nil, errReply
		}
		out.Timers[k].Attempt = int(replyInt(o[1]))
	}
	return out, nil
}

func (d *Driver) claimCompat(ctx context.Context, topic string, max int, lease time.Duration) (*ontimedriver.ClaimResult, error) {
	k := d.keys(topic)
	res, err := d.eval(ctx, sCClaim, []string{k.due, k.msg}, max, durMs(lease)*1000)
	if err != nil {
		return nil, err
	}
	a, err := replyArray(res)
	if err != nil || len(a) < 2 || (len(a)-2)%5 != 0 {
		return nil, errReply
	}
	out := &ontimedriver.ClaimResult{Now: usTime(replyInt(a[0]))}
	if n := replyStr(a[1]); n != "" {
		if out.Next, err = d.scoreTime(n); err != nil {
			return nil, err
		}
	}
	out.Timers = make([]ontimedriver.ClaimedTimer, 0, (len(a)-2)/5)
	for i := 2; i < len(a); i += 5 {
		due, err := d.scoreTime(replyStr(a[i+2]))
		if err != nil {
			return nil, err
		}
		out.Timers = append(out.Timers, ontimedriver.ClaimedTimer{
			ID:         replyStr(a[i]),
			Token:      replyStr(a[i+1]),
			Due:        due,
			Attempt:    1,
			LeaseUntil: msTime(floorDiv(replyInt(a[i+3]), 1000)),
			Payload:    []byte(replyStr(a[i+4])),
		})
	}
	return out, nil
}

// kindArg is each settle kind as the settle scripts read it.
var kindArg = [...]any{ontimedriver.Ack: "0", ontimedriver.Retry: "1", ontimedriver.Snooze: "2", ontimedriver.Dead: "3"}

// raiseOnly reports whether a settle of ops can only raise its topic's
// head: acks and dead letters remove timers; a retry, a snooze or a
// recurring timer's next tick writes a due time that may be earlier than
// the head.
func raiseOnly(ops []ontimedriver.Settlement) bool {
	for _, op := range ops {
		if (op.Kind != ontimedriver.Ack && op.Kind != ontimedriver.Dead) || op.Next != nil {
			return false
		}
	}
	return true
}

// Settle applies outcomes in one script call, each fenced by its token.
func (d *Driver) Settle(ctx context.Context, topic string, ops []ontimedriver.Settlement) ([]error, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	if s := d.sharded(topic); s != nil {
		return d.settleSharded(ctx, s, ops)
	}
	k := d.keys(topic)
	args := make([]any, 0, 2+3*len(ops))
	args = append(args, k.wake)
	if !d.compat {
		args = append(args, topic)
	}
	for _, op := range ops {
		if op.Delay < 0 {
			return nil, fmt.Errorf("%w: settlement of %q has negative delay %v", ontimedriver.ErrInvalid, op.ID, op.Delay)
		}
		if op.Kind < ontimedriver.Ack || op.Kind > ontimedriver.Dead {
			return nil, fmt.Errorf("%w: settlement of %q has unknown kind %d", ontimedriver.ErrInvalid, op.ID, int(op.Kind))
		}
		next := op.Next != nil && !d.compat && (op.Kind == ontimedriver.Ack || op.Kind == ontimedriver.Dead)
		if next {
			if err := ontimedriver.ValidateDue(op.Next.Due); err != nil {
				return nil, fmt.Errorf("settlement of %q: next tick: %w", op.ID, err)
			}
			if err := ontimedriver.ValidateDue(op.Next.Instant()); err != nil {
				return nil, fmt.Errorf("settlement of %q: next tick's instant: %w", op.ID, err)
			}
		}
		// kind, id, token + ","; an ack needs nothing more.
		kind := kindArg[op.Kind]
		if next {
			kind = "4"
			if op.Kind == ontimedriver.Dead {
				kind = "5"
			}
		}
		args = append(args, kind, op.ID, op.Token+",")
		if op.Kind == ontimedriver.Ack && !next {
			continue
		}
		errText := op.Error
		if len(errText) > maxErrorText {
			errText = errText[:maxErrorText]
		}
		args = append(args, delaySpec(op.Delay), op.Reason, errText)
		if next {
			args = append(args, strconv.FormatInt(ceilMs(op.Next.Due), 10), strconv.FormatInt(op.Next.N, 10), strconv.FormatInt(ceilMs(op.Next.Instant()), 10))
		}
	}
	s, ks := sSettle, d.withIndex([]string{k.due, k.msg, k.lease, k.dead, k.dmsg, k.sched})
	if d.compat {
		s, ks = sCSettle, []string{k.due, k.msg}
		if d.opt.CompatDeadLetters {
			ks = append(ks, k.dead, k.dmsg)
		}
	}
	res, err := d.eval(ctx, s, ks, args...)
	if err != nil {
		return nil, err
	}
	a, err := replyArray(res)
	if err != nil || (len(a) != len(ops) && (d.compat || len(a) != len(ops)+2)) {
		return nil, errReply
	}
	if len(a) == len(ops)+2 {
		// an outcome was applied: the topic's new head
		d.hintAfter(ctx, topic, a[len(ops)], hintExact, a[len(ops)+1], raiseOnly(ops))
	}
	out := make([]error, len(ops))
	for i, v := range a[:len(ops)] {
		if replyInt(v) != 1 {
			out[i] = ontimedriver.ErrLeaseLost
		} else if d.compat && !d.opt.CompatDeadLetters && ops[i].Kind == ontimedriver.Dead {
			d.log.Warn("ontimeredis: dead letter deleted (the compatible layout keeps none; set CompatDeadLetters to keep them)",
				"topic", topic, "id", ops[i].ID, "reason", ops[i].Reason, "error", ops[i].Error)
		}
	}
	return out, nil
}

// Extend pushes lease deadlines, fenced by token.
func (d *Driver) Extend(ctx context.Context, topic string, leases []ontimedriver.Lease, lease time.Duration) ([]error, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	if lease <= 0 {
		return nil, fmt.Errorf("%w: lease %v", ontimedriver.ErrInvalid, lease)
	}
	if s := d.sharded(topic); s != nil {
		return d.extendSharded(ctx, s, leases, lease)
	}
	k := d.keys(topic)
	var (
		res any
		err error
	)
	args := make([]any, 0, 1+2*len(leases))
	if d.compat {
		args = append(args, durMs(lease)*1000)
	} else {
		args = append(args, durMs(lease))
	}
	for _, l := range leases {
		args = append(args, l.ID, l.Token)
	}
	if d.compat {
		res, err = d.eval(ctx, sCExtend, []string{k.due, k.msg}, args...)
	} else {
		res, err = d.eval(ctx, sExtend, []string{k.due, k.msg, k.lease}, args...)
	}
	if err != nil {
		return nil, err
	}
	a, err := replyArray(res)
	if err != nil {
		return nil, err
	}
	if len(a) != len(leases) {
		return nil, errReply
	}
	out := make([]error, len(leases))
	for i, v := range a {
		if replyInt(v) != 1 {
			out[i] = ontimedriver.ErrLeaseLost
		}
	}
	return out, nil
}

// Cancel deletes a scheduled or leased timer.
func (d *Driver) Cancel(ctx context.Context, topic, id string) error {
	if s := d.sharded(topic); s != nil {
		topic = s.names[s.of(id)]
	}
	k := d.keys(topic)
	var (
		res any
		err error
	)
	if d.compat {
		res, err = d.eval(ctx, sCCancel, []string{k.due, k.msg}, id)
		if err != nil {
			return err
		}
		if replyInt(res) == 0 {
			return ontimedriver.ErrNotFound
		}
		return nil
	}
	res, err = d.eval(ctx, sCancel, d.withIndex([]string{k.due, k.msg, k.lease, k.sched}), id, topic)
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
	if replyInt(a[2]) == 1 {
		// the topic emptied: it leaves the index
		d.hintAfter(ctx, topic, a[1], hintExact, "", true)
	}
	return nil
}

// CancelBatch deletes the scheduled or leased timers ids names, in one
// script: atomic, one round trip. The compatible layout's script touches
// only the two keys the Python library writes. See ontimedriver.Driver.
func (d *Driver) CancelBatch(ctx context.Context, topic string, ids []string) ([]error, error) {
	if len(ids) == 0 {
		if d.closed.Load() {
			return nil, errClosed
		}
		return []error{}, nil
	}
	if s := d.sharded(topic); s != nil {
		return d.cancelBatchSharded(ctx, s, ids)
	}
	k := d.keys(topic)
	args := make([]any, 0, len(ids)+1)
	var (
		res any
		err error
	)
	if d.compat {
		for _, id := range ids {
			args = append(args, id)
		}
		res, err = d.eval(ctx, sCCancelN, []string{k.due, k.msg}, args...)
		if err != nil {
			return nil, err
		}
		return cancelResults(replyStr(res), len(ids))
	}
	args = append(args, topic)
	for _, id := range ids {
		args = append(args, id)
	}
	res, err = d.eval(ctx, sCancelN, d.withIndex([]string{k.due, k.msg, k.lease, k.sched}), args...)
	if err != nil {
		return nil, err
	}
	a, err := replyArray(res)
	if err != nil || len(a) != 3 {
		return nil, errReply
	}
	out, err := cancelResults(replyStr(a[0]), len(ids))
	if err != nil {
		return nil, err
	}
	if replyInt(a[2]) == 1 {
		// the topic emptied: it leaves the index
		d.hintAfter(ctx, topic, a[1], hintExact, "", true)
	}
	return out, nil
}

// cancelResults turns the scripts' string of '1' (deleted) and '0' (none)
// into CancelBatch's results.
func cancelResults(s string, n int) ([]error, error) {
	if len(s) != n {
		return nil, fmt.Errorf("%w: %d results for %d ids", errReply, len(s), n)
	}
	out := make([]error, n)
	for i := range n {
		switch s[i] {
		case '1':
		case '0':
			out[i] = ontimedriver.ErrNotFound
		default:
			return nil, fmt.Errorf("%w: result %q", errReply, s[i])
		}
	}
	return out, nil
}

// record is a parsed native record.
type record struct {
	attempt int
	due     int64
	err     string
	payload []byte
}

// parseRecord reads <attempt>,<dueMs>,<errLen>:<err><envelope>.
func parseRecord(s string) (record, bool) {
	var r record
	f := make([]string, 0, 2)
	rest := s
	for range 2 {
		i := strings.IndexByte(rest, ',')
		if i < 0 {
			return r, false
		}
		f = append(f, rest[:i])
		rest = rest[i+1:]
	}
	i := strings.IndexByte(rest, ':')
	if i < 0 {
		return r, false
	}
	el, err := strconv.Atoi(rest[:i])
	if err != nil || el < 0 || el > len(rest)-i-1 {
		return r, false
	}
	a, err1 := strconv.Atoi(f[0])
	due, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || a < 0 {
		return r, false
	}
	rest = rest[i+1:]
	return record{attempt: a, due: due, err: rest[:el], payload: []byte(rest[el:])}, true
}

// parseLease reads a lease entry, <token>,<attempt> or, for the entry that
// converted the lease hash to a hash table, <token>,<attempt>,<padding>.
func parseLease(s string) (token string, attempt int, ok bool) {
	token, rest, ok := strings.Cut(s, ",")
	if !ok {
		return "", 0, false
	}
	a, _, _ := strings.Cut(rest, ",")
	n, err := strconv.Atoi(a)
	return token, n, err == nil
}

// deadRecord is a parsed dead record.
type deadRecord struct {
	attempt     int
	due         int64
	reason, err string
	payload     []byte
	wellFormed  bool
}

// parseDead reads <attempt>,<dueMs>,<reasonLen>,<errLen>:<reason><err><envelope>.
func parseDead(s string) deadRecord {
	bad := deadRecord{payload: []byte(s), reason: ontimedriver.ReasonUndecodable}
	f := make([]string, 0, 3)
	rest := s
	for range 3 {
		i := strings.IndexByte(rest, ',')
		if i < 0 {
			return bad
		}
		f = append(f, rest[:i])
		rest = rest[i+1:]
	}
	i := strings.IndexByte(rest, ':')
	if i < 0 {
		return bad
	}
	a, e1 := strconv.Atoi(f[0])
	due, e2 := strconv.ParseInt(f[1], 10, 64)
	rl, e3 := strconv.Atoi(f[2])
	el, e4 := strconv.Atoi(rest[:i])
	rest = rest[i+1:]
	if e1 != nil || e2 != nil || e3 != nil || e4 != nil || rl < 0 || el < 0 || rl+el > len(rest) {
		return bad
	}
	return deadRecord{attempt: a, due: due, reason: rest[:rl], err: rest[rl : rl+el], payload: []byte(rest[rl+el:]), wellFormed: true}
}

// Get returns one scheduled or leased timer.
func (d *Driver) Get(ctx context.Context, topic, id string) (*ontimedriver.TimerInfo, error) {
	if s := d.sharded(topic); s != nil {
		topic = s.names[s.of(id)]
	}
	k := d.keys(topic)
	if d.compat {
		res, err := d.eval(ctx, sCGet, []string{k.due, k.msg}, id)
		if err != nil {
			return nil, err
		}
		a, err := replyArray(res)
		if err != nil || len(a) != 4 {
			return nil, errReply
		}
		score, env := replyStr(a[1]), replyStr(a[3])
		if score == "" || replyInt(a[2]) != 1 {
			return nil, ontimedriver.ErrNotFound
		}
		due, err := d.scoreTime(score)
		if err != nil {
			return nil, err
		}
		return &ontimedriver.TimerInfo{ID: id, Due: due, State: ontimedriver.StateScheduled, Payload: []byte(env)}, nil
	}
	res, err := d.eval(ctx, sGet, []string{k.due, k.msg, k.lease, k.sched}, id)
	if err != nil {
		return nil, err
	}
	a, err := replyArray(res)
	if err != nil || len(a) != 5 {
		return nil, errReply
	}
	ti, err := d.info(id, replyInt(a[0]), replyStr(a[1]), replyStr(a[3]), replyStr(a[2]))
	if err != nil {
		return nil, err
	}
	if se := replyStr(a[4]); se != "" {
		if e, ok := parseSchedEntry(se); ok {
			ti.Recurring = e
		}
	}
	return ti, nil
}

// info builds a native TimerInfo from the due score, the record and the
// lease entry. A timer is leased while it has a lease entry and its score
// (the lease deadline) is in the future; an expired lease shows as
// scheduled, with the attempts its claims counted.
func (d *Driver) info(id string, now int64, score, rec, lease string) (*ontimedriver.TimerInfo, error) {
	if score == "" || rec == "" {
		return nil, ontimedriver.ErrNotFound
	}
	sc, _ := strconv.ParseFloat(score, 64)
	r, ok := parseRecord(rec)
	if !ok {
		// Not an ontime record: show it as it is; the next claim
		// dead-letters it.
		return &ontimedriver.TimerInfo{ID: id, Due: msTime(int64(sc)), State: ontimedriver.StateScheduled, Payload: []byte(rec)}, nil
	}
	ti := &ontimedriver.TimerInfo{ID: id, Due: msTime(r.due), State: ontimedriver.StateScheduled, Attempt: r.attempt, LastError: r.err, Payload: r.payload}
	if _, attempt, ok := parseLease(lease); ok {
		ti.Attempt = attempt
		if int64(sc) > now {
			ti.State = ontimedriver.StateLeased
			ti.LeaseUntil = msTime(int64(sc))
		}
	}
	return ti, nil
}

// List pages a topic's timers by the instant they become claimable.
func (d *Driver) List(ctx context.Context, topic string, opts ontimedriver.ListOptions) (*ontimedriver.Page, error) {
	k := d.keys(topic)
	before := ""
	if !opts.Before.IsZero() {
		if d.compat {
			before = strconv.FormatFloat(float64(opts.Before.UnixMicro())/1e6, 'f', 6, 64)
		} else {
			before = strconv.FormatInt(ceilMs(opts.Before), 10)
		}
	}
	if s := d.sharded(topic); s != nil {
		return d.listSharded(ctx, s, before, opts)
	}
	lease := k.lease
	if d.compat {
		lease = ""
	}
	now, items, next, err := d.page(ctx, k.due, k.msg, lease, before, opts)
	if err != nil {
		return nil, err
	}
	p := &ontimedriver.Page{Timers: make([]ontimedriver.TimerInfo, 0, len(items)), NextCursor: next}
	for _, it := range items {
		if !it.exists {
			continue // an orphan; the next claim removes it
		}
		if d.compat {
			due, err := d.scoreTime(it.score)
			if err != nil {
				return nil, err
			}
			p.Timers = append(p.Timers, ontimedriver.TimerInfo{ID: it.id, Due: due, State: ontimedriver.StateScheduled, Payload: []byte(it.value)})
			continue
		}
		ti, err := d.info(it.id, now, it.score, it.value, it.lease)
		if err != nil {
			return nil, err
		}
		p.Timers = append(p.Timers, *ti)
	}
	if !d.compat && len(p.Timers) > 0 {
		if err := d.listRecurring(ctx, k, p.Timers); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Count counts a topic's timers by state.
func (d *Driver) Count(ctx context.Context, topic string) (ontimedriver.Counts, error) {
	k := d.keys(topic)
	if d.closed.Load() {
		return ontimedriver.Counts{}, errClosed
	}
	if s := d.sharded(topic); s != nil {
		return d.countSharded(ctx, s)
	}
	if d.compat {
		pipe := d.rdb.Pipeline()
		all := pipe.ZCard(ctx, k.due)
		dead := pipe.ZCard(ctx, k.dead)
		if _, err := bounded(d, ctx, pipe.Exec); err != nil {
			return ontimedriver.Counts{}, fmt.Errorf("ontimeredis: count: %w", err)
		}
		c := ontimedriver.Counts{Scheduled: all.Val()}
		if d.opt.CompatDeadLetters {
			c.Dead = dead.Val()
		}
		return c, nil
	}
	res, err := d.eval(ctx, sCount, []string{k.due, k.lease, k.dead})
	if err != nil {
		return ontimedriver.Counts{}, err
	}
	a, err := replyArray(res)
	if err != nil || len(a) != 3 {
		return ontimedriver.Counts{}, errReply
	}
	all, leased := replyInt(a[0]), replyInt(a[1])
	return ontimedriver.Counts{Scheduled: all - leased, Leased: leased, Dead: replyInt(a[2])}, nil
}

// CountTopics counts the timers of each of topics in a few round trips
// whatever their number. See ontimedriver.TopicCounter. One Redis:
// count_topics.lua per 500 topics, in one pipeline. A Cluster: one
// pipeline of plain commands (countPlain), then one of the count script
// for the topics that hold a lease or a dead letter. The compatible
// layout: two ZCARDs per topic, in one pipeline. A node that lost the
// script (a restart, SCRIPT FLUSH) answers NOSCRIPT inside the pipeline,
// where go-redis cannot fall back: those topics are counted again one by
// one with Count, which loads it.
func (d *Driver) CountTopics(ctx context.Context, topics []string) ([]ontimedriver.Counts, error) {
	if d.closed.Load() {
		return nil, errClosed
	}
	out := make([]ontimedriver.Counts, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	if names, owner, sharded := d.expandTopics(topics); sharded {
		parts, err := d.CountTopics(ctx, names)
		if err != nil {
			return nil, err
		}
		for j, c := range parts {
			o := &out[owner[j]]
			o.Scheduled += c.Scheduled
			o.Leased += c.Leased
			o.Dead += c.Dead
		}
		return out, nil
	}
	if d.compat {
		pipe := d.rdb.Pipeline()
		all := make([]*redis.IntCmd, len(topics))
		dead := make([]*redis.IntCmd, len(topics))
		for i, t := range topics {
			k := d.keys(t)
			all[i] = pipe.ZCard(ctx, k.due)
			if d.opt.CompatDeadLetters {
				dead[i] = pipe.ZCard(ctx, k.dead)
			}
		}
		if _, err := bounded(d, ctx, pipe.Exec); err != nil {
			return nil, fmt.Errorf("ontimeredis: count topics: %w", err)
		}
		for i := range topics {
			out[i].Scheduled = all[i].Val()
			if dead[i] != nil {
				out[i].Dead = dead[i].Val()
			}
		}
		return out, nil
	}
	if d.idx == idxScripts {
		return d.countTopicsScript(ctx, topics, out)
	}
	todo, err := d.countPlain(ctx, topics, out)
	if err != nil {
		return nil, err
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		pipe := d.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(todo))
		for j, i := range todo {
			k := d.countKeys(topics[i])
			cmds[j] = pipe.EvalSha(ctx, sCount.sha, k[:])
		}
		if _, err := bounded(d, ctx, pipe.Exec); err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return nil, fmt.Errorf("ontimeredis: count topics: %w", err)
		}
		var again []int
		loaded := false
		for j, c := range cmds {
			i := todo[j]
			if err := c.Err(); err != nil {
				if !redis.HasErrorPrefix(err, "NOSCRIPT") {
					return nil, fmt.Errorf("ontimeredis: count topics: %w", err)
				}
				if attempt > 0 || !loaded {
					// Count runs EVAL, which loads the script on the node:
					// the first topic that found it missing is counted so,
					// and the others are asked again in one pipeline (then
					// one by one: a Cluster's other nodes).
					n, err := d.Count(ctx, topics[i])
					if err != nil {
						return nil, err
					}
					out[i] = n
					loaded = true
					continue
				}
				again = append(again, i)
				continue
			}
			a, err := replyArray(c.Val())
			if err != nil || len(a) != 3 {
				return nil, errReply
			}
			all, leased := replyInt(a[0]), replyInt(a[1])
			out[i] = ontimedriver.Counts{Scheduled: all - leased, Leased: leased, Dead: replyInt(a[2])}
		}
		todo = again
	}
	return out, nil
}

// countPlain is the first step of CountTopics where a script cannot span
// topics (a Cluster): plain commands in one pipeline, EXISTS of the lease
// hash and the dead zset and ZCARD of the due zset per topic, which cost
// Redis a fraction of a script call each. A topic with neither a lease nor
// a dead letter (most of them, in a store with many) is counted so; the
// indexes of the others are returned, to be counted by count.lua.
func (d *Driver) countPlain(ctx context.Context, topics []string, out []ontimedriver.Counts) ([]int, error) {
	pipe := d.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(topics))
	all := make([]*redis.IntCmd, len(topics))
	for i, t := range topics {
		k := d.countKeys(t)
		exists[i] = pipe.Exists(ctx, k[1], k[2])
		all[i] = pipe.ZCard(ctx, k[0])
	}
	if _, err := bounded(d, ctx, pipe.Exec); err != nil {
		return nil, fmt.Errorf("ontimeredis: count topics: %w", err)
	}
	var todo []int
	for i := range topics {
		if exists[i].Val() > 0 {
			todo = append(todo, i)
		} else {
			out[i] = ontimedriver.Counts{Scheduled: all[i].Val()}
		}
	}
	return todo, nil
}

// countKeys returns the keys count.lua reads of topic (native layout):
// its due zset, lease hash and dead zset, as keys names them, cut from one
// string (one allocation instead of keys' seven: CountTopics and Topics
// build them for thousands of topics per call).
func (d *Driver) countKeys(topic string) [3]string {
	p := d.opt.Prefix
	s := p + "{" + topic + "}:due" + p + "{" + topic + "}:lease" + p + "{" + topic + "}:dead"
	n := len(p) + len(topic) + 3 // the length of "{topic}:" after the prefix
	return [3]string{s[:n+3], s[n+3 : 2*n+8], s[2*n+8:]}
}

// countTopicsBatch is the number of topics one count_topics.lua call
// counts.
const countTopicsBatch = 500

// countTopicsScript is CountTopics on one Redis: count_topics.lua per
// batch of topics, every batch in one pipeline. The script is loaded first
// (one EVAL of the first batch) when Redis does not know it.
func (d *Driver) countTopicsScript(ctx context.Context, topics []string, out []ontimedriver.Counts) ([]ontimedriver.Counts, error) {
	read := func(start int, res any) error {
		a, err := replyArray(res)
		if err != nil || len(a) != 3*min(countTopicsBatch, len(topics)-start) {
			return errReply
		}
		for j := 0; j < len(a); j += 3 {
			all, leased := replyInt(a[j]), replyInt(a[j+1])
			out[start+j/3] = ontimedriver.Counts{Scheduled: all - leased, Leased: leased, Dead: replyInt(a[j+2])}
		}
		return nil
	}
	keysOf := func(start int) []string {
		batch := topics[start:min(start+countTopicsBatch, len(topics))]
		ks := make([]string, 0, 3*len(batch))
		for _, t := range batch {
			k := d.countKeys(t)
			ks = append(ks, k[:]...)
		}
		return ks
	}
	for loaded := false; ; loaded = true {
		pipe := d.rdb.Pipeline()
		var cmds []*redis.Cmd
		for start := 0; start < len(topics); start += countTopicsBatch {
			cmds = append(cmds, pipe.EvalSha(ctx, sCountTop.sha, keysOf(start)))
		}
		_, err := bounded(d, ctx, pipe.Exec)
		if err == nil {
			for b, c := range cmds {
				if err := read(b*countTopicsBatch, c.Val()); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		if !redis.HasErrorPrefix(err, "NOSCRIPT") || loaded {
			return nil, fmt.Errorf("ontimeredis: count topics: %w", err)
		}
		// EVAL runs the script and leaves it in Redis's cache.
		if _, err := d.eval(ctx, sCountTop, keysOf(0)); err != nil {
			return nil, err
		}
	}
}

func (d *Driver) deadEnabled() bool { return !d.compat || d.opt.CompatDeadLetters }

// ListDead pages a topic's dead letters, oldest death first.
func (d *Driver) ListDead(ctx context.Context, topic string, opts ontimedriver.ListOptions) (*ontimedriver.DeadPage, error) {
	if !d.deadEnabled() {
		if opts.Cursor != "" {
			if _, _, err := decodeCursor(opts.Cursor); err != nil {
				return nil, err
			}
		}
		return &ontimedriver.DeadPage{Dead: []ontimedriver.DeadLetter{}}, nil
	}
	k := d.keys(topic)
	before := ""
	if !opts.Before.IsZero() {
		before = strconv.FormatInt(ceilMs(opts.Before), 10)
	}
	if s := d.sharded(topic); s != nil {
		return d.listDeadSharded(ctx, s, before, opts)
	}
	_, items, next, err := d.page(ctx, k.dead, k.dmsg, "", before, opts)
	if err != nil {
		return nil, err
	}
	p := &ontimedriver.DeadPage{Dead: make([]ontimedriver.DeadLetter, 0, len(items)), NextCursor: next}
	for _, it := range items {
		if !it.exists {
			continue
		}
		died, _ := strconv.ParseFloat(it.score, 64)
		r := parseDead(it.value)
		p.Dead = append(p.Dead, ontimedriver.DeadLetter{
			ID: it.id, Due: msTime(r.due), DiedAt: msTime(int64(died)), Attempt: r.attempt,
			Reason: r.reason, Error: r.err, Payload: r.payload,
		})
	}
	return p, nil
}

// deadIDs returns all dead-letter ids of a topic.
func (d *Driver) deadIDs(ctx context.Context, k keys) ([]string, error) {
	ids, err := bounded(d, ctx, func(ctx context.Context) ([]string, error) { return d.rdb.ZRange(ctx, k.dead, 0, -1).Result() })
	if err != nil {
		return nil, fmt.Errorf("ontimeredis: dead letters: %w", err)
	}
	return ids, nil
}

// ReplayDead moves the dead letters ids names back to scheduled, due now.
// Empty ids replay nothing.
func (d *Driver) ReplayDead(ctx context.Context, topic string, ids []string) (int, error) {
	return d.replayDead(ctx, topic, ids, false)
}

// ReplayAllDead moves every dead letter of the topic back to scheduled.
func (d *Driver) ReplayAllDead(ctx context.Context, topic string) (int, error) {
	return d.replayDead(ctx, topic, nil, true)
}

func (d *Driver) replayDead(ctx context.Context, topic string, ids []string, all bool) (int, error) {
	if d.closed.Load() {
		return 0, errClosed
	}
	if !d.deadEnabled() {
		return 0, nil
	}
	if s := d.sharded(topic); s != nil {
		if all {
			return d.sumSharded(s, func(name string) (int, error) { return d.replayDead(ctx, name, nil, true) })
		}
		return d.idsSharded(s, ids, func(name string, ids []string) (int, error) { return d.replayDead(ctx, name, ids, false) })
	}
	k := d.keys(topic)
	if all {
		var err error
		if ids, err = d.deadIDs(ctx, k); err != nil {
			return 0, err
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if d.compat {
		return d.evalChunks(ctx, sCReplay, []string{k.due, k.msg, k.dead, k.dmsg}, []any{k.wake}, ids, countReply)
	}
	return d.evalChunks(ctx, sReplay, d.withIndex([]string{k.due, k.msg, k.dead, k.dmsg}), []any{k.wake, topic}, ids, func(res any) (int, error) {
		a, err := replyArray(res)
		if err != nil || len(a) != 3 {
			return 0, errReply
		}
		d.hintAfter(ctx, topic, a[1], hintLower, a[2], false)
		return int(replyInt(a[0])), nil
	})
}

// countReply reads a script's reply that is a count.
func countReply(res any) (int, error) { return int(replyInt(res)), nil }

// evalChunks runs s over ids in chunks of 500 (args first in each call)
// and sums the counts that each reads from a call's reply.
func (d *Driver) evalChunks(ctx context.Context, s *script, keys []string, args []any, ids []string, each func(any) (int, error)) (int, error) {
	total := 0
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		a := make([]any, 0, len(args)+len(chunk))
		a = append(a, args...)
		for _, id := range chunk {
			a = append(a, id)
		}
		res, err := d.eval(ctx, s, keys, a...)
		if err != nil {
			return total, err
		}
		n, err := each(res)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// PurgeDead deletes the dead letters ids names. Empty ids delete nothing.
func (d *Driver) PurgeDead(ctx context.Context, topic string, ids []string) (int, error) {
	if d.closed.Load() {
		return 0, errClosed
	}
	if !d.deadEnabled() || len(ids) == 0 {
		return 0, nil
	}
	if s := d.sharded(topic); s != nil {
		return d.idsSharded(s, ids, func(name string, ids []string) (int, error) { return d.PurgeDead(ctx, name, ids) })
	}
	k := d.keys(topic)
	return d.evalChunks(ctx, sPurge, []string{k.dead, k.dmsg}, []any{"ids"}, ids, countReply)
}

// PurgeAllDead deletes every dead letter of the topic.
func (d *Driver) PurgeAllDead(ctx context.Context, topic string) (int, error) {
	if d.closed.Load() {
		return 0, errClosed
	}
	if !d.deadEnabled() {
		return 0, nil
	}
	if s := d.sharded(topic); s != nil {
		return d.sumSharded(s, func(name string) (int, error) { return d.PurgeAllDead(ctx, name) })
	}
	k := d.keys(topic)
	res, err := d.eval(ctx, sPurge, []string{k.dead, k.dmsg}, "all")
	if err != nil {
		return 0, err
	}
	return int(replyInt(res)), nil
}

// GetDead returns one dead letter of topic by id (ZSCORE and HGET in one
// round trip), or ontimedriver.ErrNotFound. See
// ontimedriver.DeadLetterGetter.
func (d *Driver) GetDead(ctx context.Context, topic, id string) (*ontimedriver.DeadLetter, error) {
	if d.closed.Load() {
		return nil, errClosed
	}
	if !d.deadEnabled() {
		return nil, ontimedriver.ErrNotFound
	}
	if s := d.sharded(topic); s != nil {
		topic = s.names[s.of(id)]
	}
	k := d.keys(topic)
	type reply struct {
		died *redis.FloatCmd
		rec  *redis.StringCmd
	}
	r, err := bounded(d, ctx, func(ctx context.Context) (reply, error) {
		var r reply
		_, err := d.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			r.died = p.ZScore(ctx, k.dead, id)
			r.rec = p.HGet(ctx, k.dmsg, id)
			return nil
		})
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("ontimeredis: dead letter: %w", err)
	}
	died, err1 := r.died.Result()
	rec, err2 := r.rec.Result()
	if errors.Is(err1, redis.Nil) || errors.Is(err2, redis.Nil) {
		return nil, ontimedriver.ErrNotFound
	}
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("ontimeredis: dead letter: %w", errors.Join(err1, err2))
	}
	dr := parseDead(rec)
	return &ontimedriver.DeadLetter{
		ID: id, Due: msTime(dr.due), DiedAt: msTime(int64(died)), Attempt: dr.attempt,
		Reason: dr.reason, Error: dr.err, Payload: dr.payload,
	}, nil
}
