package schedule

import (
	"strconv"
	"strings"
	"time"
)

// CatchUp is what a recurring timer does with the ticks that fell due while
// it could not run them: during an outage (the store down, every worker
// stopped) or while its previous tick was still running.
type CatchUp uint8

const (
	// CatchUpOnce (the default) runs one tick for all the missed ones: the
	// latest of them, at once; the older ones are skipped.
	CatchUpOnce CatchUp = iota
	// CatchUpEach runs each missed tick, oldest first and one at a time, but
	// at most Plan.MaxCatchUp of them: the most recent ones; older ones are
	// skipped.
	CatchUpEach
)

// DefaultMaxCatchUp is the bound of CatchUpEach when Plan.MaxCatchUp is 0.
const DefaultMaxCatchUp = 100

// Plan is a recurring timer's schedule with its per-schedule policies. Its
// String form (the schedule's spec followed by the policies that are not the
// default) is what a store keeps; [ParsePlan] reads it back.
type Plan struct {
	Schedule Schedule
	// CatchUp is the missed-tick policy; the zero value is CatchUpOnce.
	CatchUp CatchUp
	// MaxCatchUp bounds CatchUpEach (0: DefaultMaxCatchUp). Ignored by
	// CatchUpOnce.
	MaxCatchUp int
	// Jitter spreads ticks over [tick, tick+Jitter) (see [JitterFor]); 0
	// fires each tick at its instant.
	Jitter time.Duration
}

// Arm is the tick a recurring timer arms next.
type Arm struct {
	// Tick is the tick's scheduled instant, which the handler sees; zero
	// when the schedule has no more ticks.
	Tick time.Time
	// Due is when the tick may fire: Tick plus its jitter, never before
	// Tick. It may be in the past (a missed tick caught up): it then fires
	// at once.
	Due time.Time
	// Skipped counts the missed ticks that will not run (the policy
	// skipped them), at most MaxSkipCount.
	Skipped int
}

// MaxSkipCount caps Arm.Skipped: counting the ticks of a long outage one by
// one would cost more than the number is worth.
const MaxSkipCount = 100_000

// First returns the first tick of a recurring timer published at now: the
// first tick strictly after now. Resuming a paused schedule arms the same
// way: the ticks due while it was paused are not missed, they are not run.
func (p Plan) First(id string, now time.Time) Arm {
	return p.arm(id, p.Schedule.Next(now), 0)
}

// After returns the tick to arm when the tick scheduled at last is settled
// at now (the settlement and the arming are one store operation). Ticks in
// (last, now] were missed (the settled tick ran past them, or started late);
// the policy decides which of them runs next. No tick ever runs while the
// previous one of the same schedule runs: the next tick exists only once
// this one settles.
func (p Plan) After(id string, last, now time.Time) Arm {
	s := p.Schedule
	next := s.Next(last)
	if next.IsZero() || next.After(now) {
		return p.arm(id, next, 0)
	}
	// next <= now: missed ticks.
	if p.CatchUp == CatchUpEach {
		max := p.MaxCatchUp
		if max <= 0 {
			max = DefaultMaxCatchUp
		}
		first := firstOfLast(s, last, now, max)
		return p.arm(id, first, count(s, last, first))
	}
	latest := Latest(s, last, now)
	return p.arm(id, latest, count(s, last, latest))
}

func (p Plan) arm(id string, tick time.Time, skipped int) Arm {
	if tick.IsZero() {
		return Arm{Skipped: skipped}
	}
	return Arm{Tick: tick, Due: tick.Add(JitterFor(id, tick, p.Jitter)), Skipped: skipped}
}

// count returns how many ticks of s lie in (from, to), at most MaxSkipCount.
func count(s Schedule, from, to time.Time) int {
	if e, ok := s.(every); ok && e.d >= MinInterval {
		// Ticks are anchor + k*d: count them by division.
		lo, hi := e.Next(from), to
		if lo.IsZero() || !lo.Before(hi) {
			return 0
		}
		n := hi.Sub(lo) / e.d
		if hi.Sub(lo)%e.d != 0 {
			n++
		}
		return int(min(n, MaxSkipCount))
	}
	n := 0
	for t := s.Next(from); !t.IsZero() && t.Before(to) && n < MaxSkipCount; t = s.Next(t) {
		n++
	}
	return n
}

// firstOfLast returns the first of the last max ticks of s in (from, to]
// (there is at least one).
func firstOfLast(s Schedule, from, to time.Time, max int) time.Time {
	// Look back over growing windows until one holds max ticks or reaches
	// from; keep the last max ticks of the window in a ring.
	for w := time.Second; ; w *= 2 {
		start := to.Add(-w)
		final := !start.After(from) || w > 1<<60
		if final {
			start = from
		}
		ring := make([]time.Time, 0, max)
		n := 0
		for t := s.Next(start); !t.IsZero() && !t.After(to); t = s.Next(t) {
			if len(ring) < max {
				ring = append(ring, t)
			} else {
				ring[n%max] = t
			}
			n++
		}
		if n >= max || final {
			if n == 0 {
				return time.Time{}
			}
			if n <= max {
				return ring[0]
			}
			return ring[n%max]
		}
	}
}

// Validate reports whether the plan can be stored: its schedule passes
// [Validate], Jitter is not negative, MaxCatchUp is within [0, MaxSkipCount],
// and its String parses back to the same plan. Errors wrap [ErrInvalid].
func (p Plan) Validate() error {
	if err := Validate(p.Schedule); err != nil {
		return err
	}
	switch {
	case p.Jitter < 0:
		return invalidf("jitter %v is negative", p.Jitter)
	case p.MaxCatchUp < 0 || p.MaxCatchUp > MaxSkipCount:
		return invalidf("max catch-up %d is outside [0, %d]", p.MaxCatchUp, MaxSkipCount)
	case p.CatchUp != CatchUpOnce && p.CatchUp != CatchUpEach:
		return invalidf("unknown catch-up policy %d", p.CatchUp)
	}
	q, err := ParsePlan(p.String())
	if err != nil {
		return err
	}
	if q.String() != p.String() {
		return invalidf("%q does not round-trip", p.String())
	}
	return nil
}

// String returns the plan's spec: the schedule's spec, then " jitter D"
// when Jitter is set and " catchup each N" for CatchUpEach.
func (p Plan) String() string {
	var b strings.Builder
	if p.Schedule != nil {
		b.WriteString(p.Schedule.String())
	}
	if p.Jitter > 0 {
		b.WriteString(" jitter " + formatDuration(p.Jitter))
	}
	if p.CatchUp == CatchUpEach {
		max := p.MaxCatchUp
		if max <= 0 {
			max = DefaultMaxCatchUp
		}
		b.WriteString(" catchup each " + strconv.Itoa(max))
	}
	return b.String()
}

// ParsePlan parses a plan's spec: a schedule spec as [Parse] reads it,
// followed by optional clauses in this order:
//
//	plan    = spec [ "jitter" DURATION ] [ "catchup" ( "once" | "each" [ N ] ) ]
//
// such as "every 1h jitter 5m" or "cron 0 9 * * * Europe/Berlin catchup each
// 24". DURATION is a Go duration >= 0; N is a count of at least 1 (default
// DefaultMaxCatchUp).
func ParsePlan(spec string) (Plan, error) {
	words := strings.Fields(spec)
	cut := len(words)
	for i, w := range words {
		if w == "jitter" || w == "catchup" {
			cut = i
			break
		}
	}
	s, err := Parse(strings.Join(words[:cut], " "))
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Schedule: s}
	rest := words[cut:]
	if len(rest) > 0 && rest[0] == "jitter" {
		if len(rest) < 2 {
			return Plan{}, invalidf("jitter: want a duration")
		}
		d, err := time.ParseDuration(rest[1])
		if err != nil || d < 0 {
			return Plan{}, invalidf("jitter %q: want a duration of 0 or more", rest[1])
		}
		p.Jitter, rest = d, rest[2:]
	}
	if len(rest) > 0 && rest[0] == "catchup" {
		switch {
		case len(rest) >= 2 && rest[1] == "once":
			rest = rest[2:]
		case len(rest) >= 2 && rest[1] == "each":
			p.CatchUp, rest = CatchUpEach, rest[2:]
			p.MaxCatchUp = DefaultMaxCatchUp
			if len(rest) > 0 {
				n, err := strconv.Atoi(rest[0])
				if err != nil || n < 1 || n > MaxSkipCount {
					return Plan{}, invalidf("catchup each %q: want a count from 1 to %d", rest[0], MaxSkipCount)
				}
				p.MaxCatchUp, rest = n, rest[1:]
			}
		default:
			return Plan{}, invalidf("catchup: want \"once\" or \"each [N]\"")
		}
	}
	if len(rest) > 0 {
		return Plan{}, invalidf("%q after the schedule: want \"jitter D\" then \"catchup once|each [N]\"", strings.Join(rest, " "))
	}
	return p, nil
}
