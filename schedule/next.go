package schedule

import "time"

// Next implements Schedule. It walks wall-clock readings (year, month, day,
// hour, minute, second in the schedule's zone, never instants) to the first
// reading that matches the fields and whose instant, by the daylight-saving
// rule of the package documentation, is after after.
func (c *cronSchedule) Next(after time.Time) time.Time {
	a := after.In(c.loc)
	// Walls are represented as UTC times carrying the wall reading.
	from := wallOf(a).Truncate(time.Second)
	// In the second pass of a repeated hour every wall time up to the end of
	// the repeat already had its first occurrence: start after the repeat.
	if start, _, off := zoneSegment(a); !start.IsZero() {
		_, prev := start.Add(-time.Nanosecond).In(c.loc).Zone()
		if prev > off {
			repeatEnd := wallOf(start.In(c.loc)).Add(time.Duration(prev-off) * time.Second)
			if from.Before(repeatEnd) {
				from = repeatEnd
			}
		}
	}
	limit := from.Year() + horizonYears
	for {
		w, ok := c.nextWall(from, limit)
		if !ok {
			return time.Time{}
		}
		// Resolving is monotonic in the wall time, so the first matching
		// wall whose instant is after after is the next tick.
		if t := resolve(w, c.loc); t.After(after) {
			return t
		}
		from = w.Add(time.Second)
	}
}

// wallOf returns t's wall-clock reading as a UTC time.
func wallOf(t time.Time) time.Time {
	_, off := t.Zone()
	return t.UTC().Add(time.Duration(off) * time.Second)
}

// nextWall returns the first wall reading at or after from (a UTC time
// carrying a wall reading) that matches the fields, searching up to the end
// of year limit.
func (c *cronSchedule) nextWall(from time.Time, limit int) (time.Time, bool) {
	y, mo, d := from.Date()
	h, mi, s := from.Clock()
	for y <= limit {
		switch {
		case c.month&(1<<uint(mo)) == 0:
			if m := nextBit(c.month, int(mo)+1, 12); m < 0 {
				y, mo = y+1, 1
			} else {
				mo = time.Month(m)
			}
			d, h, mi, s = 1, 0, 0, 0
		case d > daysIn(y, mo):
			if mo++; mo > 12 {
				y, mo = y+1, 1
			}
			d, h, mi, s = 1, 0, 0, 0
		case !c.dayMatches(y, mo, d):
			d, h, mi, s = d+1, 0, 0, 0
		default:
			hh := nextBit(c.hour, h, 23)
			if hh < 0 {
				d, h, mi, s = d+1, 0, 0, 0
				continue
			}
			if hh != h {
				h, mi, s = hh, 0, 0
			}
			mm := nextBit(c.min, mi, 59)
			if mm < 0 {
				h, mi, s = h+1, 0, 0
				continue
			}
			if mm != mi {
				mi, s = mm, 0
			}
			ss := nextBit(c.sec, s, 59)
			if ss < 0 {
				mi, s = mi+1, 0
				continue
			}
			return time.Date(y, mo, d, h, mi, ss, 0, time.UTC), true
		}
	}
	return time.Time{}, false
}

// dayMatches applies the day-of-month and day-of-week fields to a date.
func (c *cronSchedule) dayMatches(y int, mo time.Month, d int) bool {
	domOK := c.dom&(1<<uint(d)) != 0
	dowOK := c.dow&(1<<uint(time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Weekday())) != 0
	if c.domStar || c.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// nextBit returns the smallest i in [from, max] whose bit is set in mask, or -1.
func nextBit(mask uint64, from, max int) int {
	for i := from; i <= max; i++ {
		if mask&(1<<uint(i)) != 0 {
			return i
		}
	}
	return -1
}

func daysIn(y int, mo time.Month) int {
	return time.Date(y, mo+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// zoneWindow is how far from a wall reading its instants can be: more than
// any UTC offset in the tz database, local mean times included.
const zoneWindow = 26 * time.Hour

// resolve returns the instant at which the wall reading w (a UTC time
// carrying the reading) happens in loc, by the package's daylight-saving rule:
// the first occurrence when it happens more than once, the first instant
// after the gap when it does not happen.
func resolve(w time.Time, loc *time.Location) time.Time {
	type segment struct {
		start, end time.Time // end zero: open
		off        time.Duration
	}
	var segs []segment
	hi := w.Add(zoneWindow)
	t := w.Add(-zoneWindow).In(loc)
	for {
		start, end, off := zoneSegment(t)
		segs = append(segs, segment{start, end, time.Duration(off) * time.Second})
		if end.IsZero() || !end.Before(hi) {
			break
		}
		t = end.In(loc)
	}
	// The segments ascend, so the first one holding w is its first occurrence.
	for _, s := range segs {
		i := w.Add(-s.off)
		if (s.start.IsZero() || !i.Before(s.start)) && (s.end.IsZero() || i.Before(s.end)) {
			return i.In(loc)
		}
	}
	// A gap: the clocks jumped over w at the boundary between two segments.
	for k := 0; k+1 < len(segs); k++ {
		b := segs[k].end
		oldWall, newWall := b.Add(segs[k].off), b.Add(segs[k+1].off)
		if !w.Before(oldWall) && w.Before(newWall) {
			return b.In(loc)
		}
	}
	// Not reached for a consistent zone; fall back on time.Date's choice.
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc)
}

// zoneSegment returns the span [start, end) of t's zone offset in t's
// location, as t.ZoneBounds does (zero start: since ever; zero end: for
// ever), and the offset in seconds.
//
// It works around a time.ZoneBounds defect (Go 1.26): in the years a zone's
// extended (POSIX TZ string) rules cover, past the transitions listed in the
// tz database, the bounds of a leap year's last segment end one day early,
// and for the instants of that last day ZoneBounds returns a span that ends
// before them. That day then gets a span of its own, up to the next year's
// first bound.
func zoneSegment(t time.Time) (start, end time.Time, off int) {
	start, end = t.ZoneBounds()
	_, off = t.Zone()
	if end.IsZero() || end.After(t) {
		return start, end, off
	}
	start = end
	for p := t.Add(time.Hour); ; p = p.Add(time.Hour) {
		s, e := p.ZoneBounds()
		if e.IsZero() || e.After(p) {
			if s.After(start) {
				return start, s, off
			}
			// Not expected; an open span keeps the offset rather than loop.
			return start, time.Time{}, off
		}
	}
}
