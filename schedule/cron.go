package schedule

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser is robfig/cron's parser set up for 5 fields, an optional leading
// seconds field, and descriptors. Only its field parser is used: Next is this
// package's own (see next.go), because robfig's Next moves through time.Time
// arithmetic and skips or repeats runs around daylight-saving changes.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// starBit is the bit robfig/cron sets in a field's set when the field was
// written as "*" or "?" (it decides how day-of-month and day-of-week combine).
const starBit = 1 << 63

// horizonYears bounds the search for the next tick: a schedule that has no
// tick within that many years of an instant has none (Feb 29 recurs within 8
// years; "0 0 30 2 *" never does).
const horizonYears = 10

// descriptors are the named schedules Cron accepts (robfig's @every and
// @reboot are not: use Every for intervals).
var descriptors = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

type cronSchedule struct {
	expr string // the fields joined by single spaces, or a descriptor
	loc  *time.Location

	// Bit sets of the allowed values, star bits cleared: bit i set means
	// value i matches. month uses bits 1-12, dom 1-31, dow 0-6 (Sunday 0).
	sec, min, hour, dom, month, dow uint64
	// domStar and dowStar: the field was "*" or "?". When either is, a day
	// must match both fields; when neither is, it must match one (Vixie cron).
	domStar, dowStar bool
}

// Cron returns a schedule that ticks at the wall-clock times matching a cron
// expression in the time zone tz.
//
// expr has 5 fields (minute hour day-of-month month day-of-week) or 6 with a
// leading seconds field, or is a descriptor (@yearly, @annually, @monthly,
// @weekly, @daily, @midnight, @hourly). Fields take numbers, ranges (1-5),
// lists (1,15), steps (*/15, 0-30/10), "*" and "?", and names for months
// (JAN-DEC) and days of the week (SUN-SAT, case-insensitive); day-of-week runs
// 0-6 with Sunday 0 (7 is refused). When both day fields are restricted a day
// matching either one matches, as in Vixie cron.
//
// tz is an IANA zone name ("Europe/Berlin"); "" means UTC. "Local" is
// refused: a fleet's servers need not share a local zone. The zone goes in
// tz, not in expr ("TZ=..." is refused). An expression that matches no instant
// (such as "0 0 30 2 *") is refused. Errors wrap [ErrInvalid].
//
// Daylight saving: see the package documentation. A wall time that does not
// exist ticks at the first instant after the gap; a wall time that happens
// twice ticks once, at its first occurrence.
func Cron(expr, tz string) (Schedule, error) {
	fields := strings.Fields(expr)
	if len(fields) == 0 {
		return nil, invalidf("cron: empty expression")
	}
	for _, f := range fields {
		if strings.Contains(f, "=") {
			return nil, invalidf("cron: %q: give the time zone as tz, not in the expression", f)
		}
	}
	if strings.HasPrefix(fields[0], "@") {
		if len(fields) != 1 || !descriptors[fields[0]] {
			return nil, invalidf("cron: %q: descriptors are @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly (use Every for intervals)", expr)
		}
	} else if len(fields) != 5 && len(fields) != 6 {
		return nil, invalidf("cron: %q has %d fields, want 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)", expr, len(fields))
	}
	loc, err := loadZone(tz)
	if err != nil {
		return nil, err
	}
	norm := strings.Join(fields, " ")
	parsed, err := cronParser.Parse(norm)
	if err != nil {
		return nil, invalidf("cron: %q: %v", expr, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, invalidf("cron: %q is not a field schedule", expr)
	}
	c := &cronSchedule{
		expr: norm, loc: loc,
		sec: spec.Second &^ starBit, min: spec.Minute &^ starBit, hour: spec.Hour &^ starBit,
		dom: spec.Dom &^ starBit, month: spec.Month &^ starBit, dow: spec.Dow &^ starBit,
		domStar: spec.Dom&starBit != 0, dowStar: spec.Dow&starBit != 0,
	}
	if c.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, invalidf("cron: %q matches no date", expr)
	}
	return c, nil
}

// loadZone loads an IANA zone; "" is UTC.
func loadZone(tz string) (*time.Location, error) {
	switch {
	case tz == "" || tz == "UTC":
		return time.UTC, nil
	case tz == "Local":
		return nil, invalidf("time zone %q: name the zone (servers need not share a local zone)", tz)
	case strings.ContainsFunc(tz, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return nil, invalidf("time zone %q: not a zone name", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, invalidf("time zone %q: %v", tz, err)
	}
	return loc, nil
}

// String implements Schedule: "cron " + the expression + " " + the zone, such
// as "cron 0 9 * * MON-FRI Europe/Berlin" or "cron @daily UTC".
func (c *cronSchedule) String() string {
	return "cron " + c.expr + " " + c.loc.String()
}

func parseCron(words []string) (Schedule, error) {
	n := len(words)
	switch {
	case n == 0:
		return nil, invalidf("cron: want \"cron FIELDS [ZONE]\"")
	case strings.HasPrefix(words[0], "@") && n == 1:
		return Cron(words[0], "")
	case strings.HasPrefix(words[0], "@") && n == 2:
		return Cron(words[0], words[1])
	case n == 5:
		return Cron(strings.Join(words, " "), "")
	case n == 6 && isZone(words[5]):
		return Cron(strings.Join(words[:5], " "), words[5])
	case n == 6:
		s, err := Cron(strings.Join(words, " "), "")
		if err == nil || strings.Contains(strings.Join(words, " "), "=") {
			return s, err
		}
		_, zerr := loadZone(words[5])
		return nil, invalidf("cron: %q is neither a time zone (%s) nor the day-of-week field of 6 fields (%s)", words[5], reason(zerr), reason(err))
	case n == 7:
		return Cron(strings.Join(words[:6], " "), words[6])
	default:
		return nil, invalidf("cron: %d words after \"cron\", want 5 or 6 fields and a zone, or a descriptor and a zone", n)
	}
}

// isZone reports whether w names a time zone that Cron accepts.
func isZone(w string) bool {
	_, err := loadZone(w)
	return err == nil && w != ""
}
