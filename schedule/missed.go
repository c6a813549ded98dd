package schedule

import "time"

// Missed returns the ticks of s in (from, to], oldest first, at most max of
// them (none when max <= 0). A result of max ticks means there may be more:
// call again from the last one to page on.
//
// It serves the missed-tick policies after an outage (which of the ticks
// in (last tick, now] to fire) and backfill of a past range (each tick of
// (from, to] once).
func Missed(s Schedule, from, to time.Time, max int) []time.Time {
	var out []time.Time
	for t := s.Next(from); len(out) < max && !t.IsZero() && !t.After(to); t = s.Next(t) {
		out = append(out, t)
	}
	return out
}

// Latest returns the last tick of s in (from, to], or the zero Time if there
// is none. It does not walk every tick of a long range: it looks back from to
// over growing windows.
func Latest(s Schedule, from, to time.Time) time.Time {
	if !to.After(from) {
		return time.Time{}
	}
	for w := time.Second; ; w *= 4 {
		start, final := to.Add(-w), false
		if !start.After(from) || w > 1<<60 {
			start, final = from, true
		}
		t := s.Next(start)
		if !t.IsZero() && !t.After(to) {
			for n := s.Next(t); !n.IsZero() && !n.After(to); n = s.Next(n) {
				t = n
			}
			return t
		}
		if final {
			return time.Time{}
		}
	}
}
