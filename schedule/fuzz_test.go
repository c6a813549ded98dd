package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// fuzzZones are the zones FuzzNext draws from: no DST, 1-hour DST both
// hemispheres, 30-minute DST, DST at midnight, a 2-hour DST
// (Antarctica/Troll), a +12:45 zone, and a zone that skipped a whole day
// (Pacific/Apia, 2011-12-30).
var fuzzZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
	"America/Santiago", "Antarctica/Troll", "Pacific/Chatham", "Pacific/Apia", "Asia/Kolkata"}

// FuzzNext checks Next against a brute-force walk of instants: Next is
// strictly after its argument, it is a tick, and no tick lies between them.
// A tick, independently of Next's algorithm, is an instant whose wall reading
// matches the fields and was not read earlier (the first occurrence), or the
// first instant after a gap in which a matching wall time was skipped.
func FuzzNext(f *testing.F) {
	f.Add("30 2 * * *", uint8(1), int64(1774699200))       // Berlin, 2026-03-28 12:00 UTC
	f.Add("*/15 * * * *", uint8(1), int64(1792872000))     // Berlin, 2026-10-24 12:00 UTC
	f.Add("*/10 1 * * *", uint8(3), int64(1775314800))     // Lord Howe, 2026-04-04
	f.Add("0 0 * * *", uint8(4), int64(1788710400))        // Santiago, 2026-09-05
	f.Add("30 23 * * *", uint8(4), int64(1775318400))      // Santiago, 2026-04-04
	f.Add("*/20 * 1-3 * * *", uint8(2), int64(1772900000)) // New York seconds, 2026-03-07
	f.Add("0 30 1 * * SUN", uint8(5), int64(1774000000))   // Troll
	f.Add("0 0 29 2 *", uint8(0), int64(1709000000))       // leap day
	f.Add("0 0 * * *", uint8(7), int64(1325116800))        // Apia, 2011-12-29: the skipped day
	f.Add("0 9 * * MON-FRI", uint8(1), int64(2240294400))  // Berlin, 2040-12-28 08:00 UTC: a leap year's end under the extended rules
	f.Fuzz(func(t *testing.T, expr string, zone uint8, unix int64) {
		fields := strings.Fields(expr)
		if len(fields) != 5 && len(fields) != 6 {
			return
		}
		tz := fuzzZones[int(zone)%len(fuzzZones)]
		sch, err := Cron(expr, tz)
		if err != nil {
			return
		}
		c := sch.(*cronSchedule)
		// 2000-01-01 to 2100-01-01 (past 2037 the zones' extended rules),
		// with a fraction of a second from the input.
		const lo, span = 946684800, 3155760000
		u := (unix - lo) % span // seeds are Unix seconds within the range
		if u < 0 {
			u += span
		}
		after := time.Unix(lo+u, (unix>>3)&0x3fffffff%1e9).In(c.loc)
		next := c.Next(after)
		if next.IsZero() {
			t.Fatalf("%s: no tick after %v", c, after)
		}
		if !next.After(after) {
			t.Fatalf("%s: Next(%v) = %v, not after it", c, after, next)
		}
		if !isTick(c, next) {
			t.Fatalf("%s: Next(%v) = %v, which is not a tick", c, after, next)
		}
		// Walk the instants between: whole seconds for a seconds field
		// (3 hours at most), whole minutes otherwise (2 days at most).
		step, window := time.Minute, 48*time.Hour
		if len(fields) == 6 {
			step, window = time.Second, 3*time.Hour
		}
		end := next
		if end.Sub(after) > window {
			end = after.Add(window)
		}
		for i := after.Truncate(step).Add(step); i.Before(end); i = i.Add(step) {
			if isTick(c, i) {
				t.Fatalf("%s: Next(%v) = %v skips the tick %v", c, after, next, i.In(c.loc))
			}
		}
		// Where no clock changes, Next equals robfig/cron's own.
		if tz == "UTC" {
			p, err := cronParser.Parse(strings.Join(fields, " "))
			if err != nil {
				t.Fatalf("robfig refuses %q that Cron accepted: %v", expr, err)
			}
			spec := p.(*cron.SpecSchedule)
			spec.Location = time.UTC
			if want := spec.Next(after); !want.IsZero() && !want.Equal(next) {
				t.Fatalf("%s: Next(%v) = %v, robfig/cron says %v", c, after, next, want)
			}
		}
	})
}

// isTick reports whether instant i is a tick of c, by the package's rule,
// looking only at wall readings around i.
func isTick(c *cronSchedule, i time.Time) bool {
	if i.Nanosecond() != 0 {
		return false
	}
	w := wallOf(i.In(c.loc))
	if c.matches(w) {
		// The first occurrence: no earlier instant within the largest
		// change of offset (2 hours) reads the same.
		for _, back := range []time.Duration{15 * time.Minute, 30 * time.Minute, 45 * time.Minute, time.Hour, 90 * time.Minute, 2 * time.Hour} {
			if wallOf(i.Add(-back).In(c.loc)).Equal(w) {
				return false
			}
		}
		return true
	}
	// The first instant after a gap: wall readings in [before+1s, w) never
	// happened; one of them matching makes i a tick.
	before := wallOf(i.Add(-time.Second).In(c.loc))
	for m := before.Add(time.Second); m.Before(w); m = m.Add(time.Second) {
		if c.matches(m) {
			return true
		}
	}
	return false
}

// matches reports whether a wall reading matches every field.
func (c *cronSchedule) matches(w time.Time) bool {
	y, mo, d := w.Date()
	h, mi, s := w.Clock()
	return c.month&(1<<uint(mo)) != 0 && c.dayMatches(y, mo, d) &&
		c.hour&(1<<uint(h)) != 0 && c.min&(1<<uint(mi)) != 0 && c.sec&(1<<uint(s)) != 0
}

// FuzzParse checks that Parse never panics, and that what it accepts
// round-trips through String and validates.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"every 5m", "every 1h30m from 2026-01-01T00:30:00+01:00", "every 1ms",
		"cron 0 9 * * MON-FRI Europe/Berlin", "cron 30 0 9 * * * UTC", "cron @daily America/Santiago",
		"cron */15 1-3,5 1,15 JAN-MAR ? Australia/Lord_Howe", "cron 0 0 29 2 *", "cron TZ=UTC 0 0 * * *",
		"cron 0 0 * * * * Local", "every 0s", "every 5m from", "cron @every 5m", "cron 1-2-3 * * * *",
	} {
		f.Add(s)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := Parse(spec)
		if err != nil {
			return
		}
		again, err := Parse(s.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not parse: %v", spec, s, err)
		}
		if again.String() != s.String() || !Equal(s, again) {
			t.Fatalf("Parse(%q) = %q, then %q", spec, s, again)
		}
		if err := Validate(s); err != nil {
			t.Fatalf("Validate(Parse(%q)): %v", spec, err)
		}
		if n := s.Next(from); !n.After(from) {
			t.Fatalf("%s: Next(%v) = %v", s, from, n)
		}
		if n1, n2 := s.Next(from), again.Next(from); !n1.Equal(n2) {
			t.Fatalf("%s: Next differs after a round trip: %v, %v", s, n1, n2)
		}
	})
}
