package ontime

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// StoreCallHook is called after every call the Client and the Workers built
// from it make to the store, with the call's name, topic, duration and
// error, so that a metrics module can count store errors and time store
// round trips. It runs on the goroutine that made the call (a publisher's,
// a worker's claim or settle loop), so it must be fast and never block. A
// StoreCallHook's panic is logged, never passed on: the call's result
// stands.
//
// A Client with no StoreCallHook calls the store directly, at no cost.
type StoreCallHook interface {
	StoreCall(ctx context.Context, c StoreCall)
}

// StoreCall is one call to the store, as StoreCallHook sees it.
type StoreCall struct {
	// Op names the call, after the [ontimedriver.Driver] method: "schedule",
	// "claim", "settle", "extend", "cancel", "cancel_batch", "get", "list", "count",
	// "topics", "list_dead", "replay_dead", "replay_all_dead", "purge_dead",
	// "purge_all_dead", "count_due", "fire_now", "due_topics" (the
	// HandleTopics loop asking the topic index), "subscribe", "ping", or
	// for recurring timers (ontimedriver.Recurring) "schedule_recurring",
	// "pause_recurring", "resume_recurring" and "list_recurring"
	// (ontimedriver.RecurringLister). A Driver method not in this list is
	// not reported.
	Op string
	// Topic is the full topic, or "" for "topics" and "ping".
	Topic string
	// Duration is how long the call took, from just before it was made to
	// just after it returned.
	Duration time.Duration
	// Err is the call's error: nil, or a store failure (unreachable,
	// timed out, closed), the context's error, or one of the store's
	// definite answers (ontimedriver.ErrNotFound, ErrExists, ErrLeaseLost,
	// ErrInvalid). Per-timer results of Schedule, Settle, Extend and
	// CancelBatch (a lease lost, an id that exists or is absent) are not
	// errors of the call.
	Err error
}

// observedDriver is the Driver a Client uses when it has StoreCallHooks:
// each call it times is reported to them. It embeds the Driver, so a
// method it does not time is passed straight through, and it unwraps to
// it, so the store's optional interfaces (ontimedriver.As) stay in view.
type observedDriver struct {
	ontimedriver.Driver
	hooks []StoreCallHook
	log   *slog.Logger
}

var _ ontimedriver.Wrapper = (*observedDriver)(nil)

// Unwrap returns the observed driver.
func (o *observedDriver) Unwrap() ontimedriver.Driver { return o.Driver }

// reportStoreCall reports a call the library made around d (the topic
// index's, which d does not see) to d's StoreCallHooks, if d is a
// Client's observed driver.
func reportStoreCall(ctx context.Context, d ontimedriver.Driver, op, topic string, start time.Time, err error) {
	if o, ok := d.(*observedDriver); ok {
		o.report(ctx, op, topic, start, err)
	}
}

func (o *observedDriver) report(ctx context.Context, op, topic string, start time.Time, err error) {
	c := StoreCall{Op: op, Topic: topic, Duration: time.Since(start), Err: err}
	for _, h := range o.hooks {
		o.call(ctx, h, &c)
	}
}

func (o *observedDriver) call(ctx context.Context, h StoreCallHook, c *StoreCall) {
	defer func() {
		if p := recover(); p != nil {
			o.log.Error("ontime: a StoreCallHook panicked", "hook", fmt.Sprintf("%T", h), "op", c.Op, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		}
	}()
	h.StoreCall(ctx, *c)
}

func (o *observedDriver) Schedule(ctx context.Context, topic string, timers []ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	start := time.Now()
	r, err := o.Driver.Schedule(ctx, topic, timers, mode)
	o.report(ctx, "schedule", topic, start, err)
	return r, err
}

func (o *observedDriver) Claim(ctx context.Context, topic string, max int, lease time.Duration) (*ontimedriver.ClaimResult, error) {
	start := time.Now()
	r, err := o.Driver.Claim(ctx, topic, max, lease)
	o.report(ctx, "claim", topic, start, err)
	return r, err
}

func (o *observedDriver) Settle(ctx context.Context, topic string, ops []ontimedriver.Settlement) ([]error, error) {
	start := time.Now()
	r, err := o.Driver.Settle(ctx, topic, ops)
	o.report(ctx, "settle", topic, start, err)
	return r, err
}

func (o *observedDriver) Extend(ctx context.Context, topic string, leases []ontimedriver.Lease, lease time.Duration) ([]error, error) {
	start := time.Now()
	r, err := o.Driver.Extend(ctx, topic, leases, lease)
	o.report(ctx, "extend", topic, start, err)
	return r, err
}

func (o *observedDriver) Cancel(ctx context.Context, topic, id string) error {
	start := time.Now()
	err := o.Driver.Cancel(ctx, topic, id)
	o.report(ctx, "cancel", topic, start, err)
	return err
}

func (o *observedDriver) CancelBatch(ctx context.Context, topic string, ids []string) ([]error, error) {
	start := time.Now()
	r, err := o.Driver.CancelBatch(ctx, topic, ids)
	o.report(ctx, "cancel_batch", topic, start, err)
	return r, err
}

func (o *observedDriver) Get(ctx context.Context, topic, id string) (*ontimedriver.TimerInfo, error) {
	start := time.Now()
	r, err := o.Driver.Get(ctx, topic, id)
	o.report(ctx, "get", topic, start, err)
	return r, err
}

func (o *observedDriver) List(ctx context.Context, topic string, opts ontimedriver.ListOptions) (*ontimedriver.Page, error) {
	start := time.Now()
	r, err := o.Driver.List(ctx, topic, opts)
	o.report(ctx, "list", topic, start, err)
	return r, err
}

func (o *observedDriver) Count(ctx context.Context, topic string) (ontimedriver.Counts, error) {
	start := time.Now()
	r, err := o.Driver.Count(ctx, topic)
	o.report(ctx, "count", topic, start, err)
	return r, err
}

func (o *observedDriver) Topics(ctx context.Context) ([]string, error) {
	start := time.Now()
	r, err := o.Driver.Topics(ctx)
	o.report(ctx, "topics", "", start, err)
	return r, err
}

func (o *observedDriver) ListDead(ctx context.Context, topic string, opts ontimedriver.ListOptions) (*ontimedriver.DeadPage, error) {
	start := time.Now()
	r, err := o.Driver.ListDead(ctx, topic, opts)
	o.report(ctx, "list_dead", topic, start, err)
	return r, err
}

func (o *observedDriver) ReplayDead(ctx context.Context, topic string, ids []string) (int, error) {
	start := time.Now()
	r, err := o.Driver.ReplayDead(ctx, topic, ids)
	o.report(ctx, "replay_dead", topic, start, err)
	return r, err
}

func (o *observedDriver) ReplayAllDead(ctx context.Context, topic string) (int, error) {
	start := time.Now()
	r, err := o.Driver.ReplayAllDead(ctx, topic)
	o.report(ctx, "replay_all_dead", topic, start, err)
	return r, err
}

func (o *observedDriver) PurgeDead(ctx context.Context, topic string, ids []string) (int, error) {
	start := time.Now()
	r, err := o.Driver.PurgeDead(ctx, topic, ids)
	o.report(ctx, "purge_dead", topic, start, err)
	return r, err
}

func (o *observedDriver) PurgeAllDead(ctx context.Context, topic string) (int, error) {
	start := time.Now()
	r, err := o.Driver.PurgeAllDead(ctx, topic)
	o.report(ctx, "purge_all_dead", topic, start, err)
	return r, err
}

func (o *observedDriver) CountDue(ctx context.Context, topic string, bounds []time.Time) ([]int64, error) {
	start := time.Now()
	r, err := o.Driver.CountDue(ctx, topic, bounds)
	o.report(ctx, "count_due", topic, start, err)
	return r, err
}

func (o *observedDriver) FireNow(ctx context.Context, topic, id string) (time.Time, error) {
	start := time.Now()
	r, err := o.Driver.FireNow(ctx, topic, id)
	o.report(ctx, "fire_now", topic, start, err)
	return r, err
}

func (o *observedDriver) Subscribe(ctx context.Context, topic string) (<-chan time.Time, func(), error) {
	start := time.Now()
	ch, cancel, err := o.Driver.Subscribe(ctx, topic)
	o.report(ctx, "subscribe", topic, start, err)
	return ch, cancel, err
}

func (o *observedDriver) Ping(ctx context.Context) error {
	start := time.Now()
	err := o.Driver.Ping(ctx)
	o.report(ctx, "ping", "", start, err)
	return err
}
