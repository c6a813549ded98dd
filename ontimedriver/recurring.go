package ontimedriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrUnsupported is returned (wrapped) by a store, or a store layout, that
// cannot do what was asked: the faststream-compatible Redis layout refuses
// recurring timers with it, since the Python library would not re-arm them.
var ErrUnsupported = errors.New("ontime: not supported by this store")

// Recurring is implemented by stores that keep recurring timers: a timer
// that carries a schedule spec (opaque to the store: the library writes
// and reads it) and a tick number, and whose settlement can arm its next
// tick in the same atomic, fenced store operation (Settlement.Next).
//
// # Model
//
// A recurring timer is an ordinary timer of its topic (it is claimed,
// extended, settled, listed, counted and cancelled like one) that also has
// a schedule entry: its spec, the number of the tick the timer now stands
// for, whether the schedule is paused, and the number and outcome of the
// last tick settled. Claim reports the spec and the tick number with the
// timer (ClaimedTimer.Schedule, ClaimedTimer.Tick); Get and List report
// the entry (TimerInfo.Recurring).
//
// Settling a tick with Settlement.Next set (Ack or Dead) does not delete
// the timer: in the same atomic step, fenced by the lease token, the store
// records the tick's outcome, writes the next tick (its due time, its
// number, attempt counter 0, the same payload) and drops the lease. A dead
// tick is copied to the dead letters under DeadTickID(id, tick), so the
// schedule keeps running and a dead letter never collides with it. A crash
// before the step leaves the tick leased (it comes back when the lease
// expires); a crash after it leaves the next tick armed: the schedule is
// never lost, nor doubled. Retry and Snooze of a tick keep the tick (its
// number does not change); Ack or Dead without Next end the schedule (the
// timer and its entry are deleted; a dead tick is still stored under
// DeadTickID).
//
// Schedule (the plain one) over a recurring timer's id makes it a plain
// timer (its entry is deleted); Cancel and CancelBatch delete the entry
// with the timer.
//
// A paused schedule holds no claimable tick: its timer stays (Get and List
// show it, Count counts it as scheduled) but is never claimed; a tick that
// is leased when the schedule is paused runs to its end, and the next tick
// it arms is held. Resume arms the next tick given by the caller.
type Recurring interface {
	// RecurringSupported reports whether this driver, as configured,
	// keeps recurring timers. When false, the methods return an error
	// wrapping ErrUnsupported.
	RecurringSupported() bool

	// ScheduleRecurring writes one recurring timer, due at t.At (its
	// first tick, number t.Tick). With Upsert an existing timer with the
	// id (plain or recurring, scheduled or leased) is replaced: new
	// schedule, payload and due time, attempt 0, lease dropped (its token
	// stops working, so a tick that is running cannot arm the old
	// schedule's next tick), not paused; the last outcome is kept. With
	// IfAbsent an existing id is left untouched and the result carries
	// ErrExists. t.At must be within [MinDue, MaxDue].
	ScheduleRecurring(ctx context.Context, topic string, t NewRecurring, mode ScheduleMode) (ScheduleResult, error)

	// PauseRecurring pauses a recurring timer: its tick stops being
	// claimable (a leased tick runs to its end; the tick it arms is
	// held). Pausing a paused schedule changes nothing. ErrNotFound when
	// there is no recurring timer with the id.
	PauseRecurring(ctx context.Context, topic, id string) error

	// ResumeRecurring resumes a paused recurring timer with next as its
	// next tick (unless a tick is leased: that tick then arms the next
	// one when it is settled, and next is not used). Resuming a schedule
	// that is not paused changes nothing. ErrNotFound when there is no
	// recurring timer with the id.
	ResumeRecurring(ctx context.Context, topic, id string, next Tick) error
}

// NewRecurring is a recurring timer to schedule: its first tick is due at
// At and numbered Tick (>= 1).
type NewRecurring struct {
	ID string
	// Spec is the schedule as the library writes it (opaque to the
	// store, at most MaxSpecLen bytes, valid UTF-8).
	Spec string
	At   time.Time
	Tick int64
	// TickAt is the first tick's scheduled instant when At is later
	// (jitter); zero means At.
	TickAt  time.Time
	Payload []byte
}

// MaxSpecLen is the longest schedule spec a store accepts.
const MaxSpecLen = 1024

// Tick is a tick of a recurring timer: its due time and its number, and
// its scheduled instant At when Due is later (jitter); a zero At means
// Due.
type Tick struct {
	Due time.Time
	N   int64
	At  time.Time
}

// Instant returns the tick's scheduled instant: At, or Due when At is
// zero.
func (t Tick) Instant() time.Time {
	if t.At.IsZero() {
		return t.Due
	}
	return t.At
}

// RecurringInfo is the schedule entry of a recurring timer, as Get and
// List report it (TimerInfo.Recurring).
type RecurringInfo struct {
	// Spec is the schedule spec.
	Spec string
	// Tick is the number of the tick the timer stands for, and TickAt
	// its scheduled instant (TimerInfo.Due is later while the tick waits
	// for a retry).
	Tick   int64
	TickAt time.Time
	// Paused reports a paused schedule.
	Paused bool
	// LastTick is the number of the last tick settled (0: none yet), and
	// LastOutcome its outcome: "ack" or "dead".
	LastTick    int64
	LastOutcome string
}

// DeadTickID is the id under which a dead-lettered tick of the recurring
// timer id is stored: id + "#" + the tick number.
func DeadTickID(id string, tick int64) string {
	return id + "#" + strconv.FormatInt(tick, 10)
}

// ValidateSpec checks a schedule spec as stores accept it. The error
// wraps ErrInvalid.
func ValidateSpec(spec string) error {
	if spec == "" {
		return fmt.Errorf("%w: schedule spec is empty", ErrInvalid)
	}
	if len(spec) > MaxSpecLen {
		return fmt.Errorf("%w: schedule spec is %d bytes, the limit is %d", ErrInvalid, len(spec), MaxSpecLen)
	}
	if strings.ContainsAny(spec, "\x00\n\r") {
		return fmt.Errorf("%w: schedule spec %q has a control character", ErrInvalid, spec)
	}
	return nil
}

// RecurringOf returns d's Recurring implementation (through wrappers) and
// whether it keeps recurring timers as configured.
func RecurringOf(d Driver) (Recurring, bool) {
	r, ok := As[Recurring](d)
	if !ok || !r.RecurringSupported() {
		return nil, false
	}
	return r, true
}

// RecurringLister is implemented by stores that can list a topic's
// recurring timers without reading its plain ones, so that a topic with a
// million plain timers and one schedule lists that schedule in one call.
// It is optional: a caller falls back to List, keeping the timers whose
// Recurring is set. Find it with As (it survives wrappers), or with
// RecurringListerOf, which also checks RecurringSupported.
type RecurringLister interface {
	// ListRecurring returns a page of the topic's recurring timers, each
	// as Get reports it (TimerInfo.Recurring set; a paused schedule with
	// Paused true), ordered by id in byte order. Plain timers are never
	// listed; a cancelled or ended schedule is gone.
	//
	// Paging: limit is the page size (0 means 100; drivers cap it at
	// MaxRecurringPage); pass the previous page's NextCursor as cursor
	// (empty for the first page; cursors are opaque, a bad one is
	// ErrInvalid). A page holds up to limit timers and NextCursor is
	// empty on the last page. The cursor is the position after the last
	// id returned, so a schedule added or removed between pages is seen
	// or not, and one present for the whole walk is listed exactly once.
	//
	// A page costs one or a few store calls; the work a page does grows
	// with the number of recurring timers (of the topic on Redis, of the
	// store in the embedded store), never with the plain ones. A driver
	// whose RecurringSupported reports false returns an error wrapping
	// ErrUnsupported; a topic that cannot hold recurring timers (a
	// sharded Redis topic) lists none.
	ListRecurring(ctx context.Context, topic, cursor string, limit int) (*Page, error)
}

// MaxRecurringPage is the largest page ListRecurring returns.
const MaxRecurringPage = 1000

// RecurringPageLimit is the page size a RecurringLister uses for the limit
// asked: 100 for 0 (or less), at most MaxRecurringPage.
func RecurringPageLimit(limit int) int {
	switch {
	case limit <= 0:
		return 100
	case limit > MaxRecurringPage:
		return MaxRecurringPage
	}
	return limit
}

// RecurringListerOf returns d's RecurringLister (through wrappers) when d
// keeps recurring timers as configured and can list them; ok is false
// otherwise.
func RecurringListerOf(d Driver) (RecurringLister, bool) {
	l, ok := As[RecurringLister](d)
	if !ok {
		return nil, false
	}
	if r, rok := As[Recurring](d); !rok || !r.RecurringSupported() {
		return nil, false
	}
	return l, true
}
