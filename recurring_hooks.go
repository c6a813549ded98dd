package ontime

import (
	"context"
	"fmt"
	"time"
)

// UnfiredTicksHook is called when ticks of a recurring timer pass without
// firing, so that a metrics module can count them next to the ticks that
// fired (a DeliveryEndHook sees those: Delivery.Tick is set). Every instant
// of a schedule ends in one of three ways: it fires (its tick is
// delivered), it is missed (UnfiredTicks.Paused false: its instant passed
// while no tick could run, a store outage, every worker stopped or a tick
// that ran past it, and the missed-ticks policy did not fire it), or it is
// skipped (Paused true: its instant passed while the schedule was paused).
//
// Missed ticks are reported by the worker that settles the late tick, on
// its goroutine, when it arms the next tick; skipped ticks by the Client
// whose Resume ends the pause. The hook must be fast and never block; its
// panic is logged, never passed on.
type UnfiredTicksHook interface {
	UnfiredTicks(ctx context.Context, u *UnfiredTicks)
}

// UnfiredTicks is a run of ticks of one recurring timer that passed without
// firing, as UnfiredTicksHook sees it.
type UnfiredTicks struct {
	// Topic is the full topic and ID the recurring timer's id.
	Topic, ID string
	// Schedule is the schedule's canonical spec.
	Schedule string
	// Count is how many tick instants passed without firing (at least 1).
	// Past 100 000 instants it is extrapolated from the first 100 000.
	Count int64
	// From and To are the first and the last of their instants.
	From, To time.Time
	// Paused is true for ticks skipped while the schedule was paused
	// (reported by Resume), false for ticks missed.
	Paused bool
}

// countTicks counts the instants of rs's schedule in [first, to], first
// being one of them. Past maxCatchUpWalk instants the rest is
// extrapolated at the pace of those walked. last is the last instant
// walked (the last one in the range when the walk did not stop early).
func (rs *recurringSpec) countTicks(first, to time.Time) (n int64, last time.Time) {
	last = first
	for t := first; !t.IsZero() && !t.After(to); t = rs.sched.Next(t) {
		if n == maxCatchUpWalk {
			span := t.Sub(first)
			if span <= 0 {
				return n, last
			}
			// t is the next instant: it and those after it, at the pace
			// of the n intervals walked
			return n + 1 + int64(float64(to.Sub(t))/float64(span)*float64(n)), last
		}
		n++
		last = t
	}
	return n, last
}

// missedTicks reports to the UnfiredTicksHooks the ticks a tick of id at
// cur, settled at now and arming next, leaves unfired: the instants in
// (cur, next) (the missed-ticks policy fires the ones it keeps, next being
// the oldest of them, and misses the older ones).
func (e *executor) missedTicks(ctx context.Context, rs *recurringSpec, id string, cur, next time.Time) {
	first := rs.sched.Next(cur)
	if first.IsZero() || !first.Before(next) {
		return
	}
	n, last := rs.countTicks(first, next.Add(-1))
	if n == 0 {
		return
	}
	e.hooks.unfiredTicks(context.WithoutCancel(ctx), &UnfiredTicks{
		Topic: e.topic, ID: id, Schedule: rs.canon, Count: n, From: first, To: last,
	}, e.log)
}

// unfiredTicks runs the UnfiredTicks hooks; a panic is logged and the
// others still run.
func (s *hookSet) unfiredTicks(ctx context.Context, u *UnfiredTicks, log interface {
	Error(msg string, args ...any)
}) {
	for _, h := range s.unfired {
		func() {
			defer func() {
				if p := recover(); p != nil {
					log.Error("ontime: an UnfiredTicksHook panicked", "hook", fmt.Sprintf("%T", h), "topic", u.Topic, "id", u.ID, "panic", fmt.Sprint(p))
				}
			}()
			h.UnfiredTicks(ctx, u)
		}()
	}
}

// skippedTicks reports to the UnfiredTicksHooks the ticks a paused
// recurring timer skipped: its held tick at held and the instants after
// it, before next, the tick Resume armed.
func (c *Client) skippedTicks(ctx context.Context, rs *recurringSpec, topic, id string, held, next time.Time) {
	if held.IsZero() || !held.Before(next) {
		return
	}
	n, last := rs.countTicks(held, next.Add(-1))
	if n == 0 {
		return
	}
	c.hooks.unfiredTicks(ctx, &UnfiredTicks{
		Topic: topic, ID: id, Schedule: rs.canon, Count: n, From: held, To: last, Paused: true,
	}, c.log)
}
