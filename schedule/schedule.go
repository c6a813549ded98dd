package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Schedule says when a recurring timer ticks.
//
// Implementations are values: they hold no state and are safe for concurrent
// use. The store keeps a schedule as its String form and parses it again with
// [Parse] when it arms the next tick, so a Schedule that the store accepts must
// round-trip: Parse(s.String()) describes the same ticks as s ([Validate]
// checks this).
type Schedule interface {
	// Next returns the first tick strictly after after, or the zero Time if
	// the schedule has no tick after it.
	Next(after time.Time) time.Time
	// String returns the canonical spec that Parse accepts.
	String() string
}

// ErrInvalid is wrapped by every error that Parse, Cron and Validate return
// for a spec that is not a schedule.
var ErrInvalid = errors.New("schedule: invalid spec")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// reason is an ErrInvalid error's text without the prefix.
func reason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
}

// Parse parses a canonical schedule spec, as returned by Schedule.String.
//
// The grammar (words are separated by spaces; keywords are lower case):
//
//	spec     = every | cron
//	every    = "every" DURATION [ "from" INSTANT ]
//	cron     = "cron" ( FIELDS | DESCRIPTOR ) [ ZONE ]
//
// DURATION is a Go duration ([time.ParseDuration]: "90s", "5m", "1h30m") of at
// least one millisecond. INSTANT is RFC 3339 with an optional fraction of a
// second ("2026-01-01T00:00:00Z"). FIELDS is a cron expression of 5 fields
// (minute hour day-of-month month day-of-week) or 6 fields (a seconds field
// first), as [Cron] accepts it; DESCRIPTOR is one of @yearly, @annually,
// @monthly, @weekly, @daily, @midnight, @hourly. ZONE is an IANA time zone
// name ("Europe/Berlin"); it defaults to UTC. With six words after "cron" the
// last one is read as a zone when it names one (no zone name is a valid
// day-of-week field), otherwise as the day-of-week field of a 6-field
// expression. The canonical form always names the zone.
//
// Examples:
//
//	every 5m
//	every 1h from 2026-01-01T00:30:00Z
//	cron 0 9 * * MON-FRI Europe/Berlin
//	cron 30 0 9 * * * UTC
//	cron @daily America/New_York
func Parse(spec string) (Schedule, error) {
	words := strings.Fields(spec)
	if len(words) == 0 {
		return nil, invalidf("empty spec")
	}
	switch words[0] {
	case "every":
		return parseEvery(words[1:])
	case "cron":
		return parseCron(words[1:])
	default:
		return nil, invalidf("%q: a spec starts with \"every\" or \"cron\"", spec)
	}
}

// Validate reports whether s can be stored: its String form parses and
// describes the same schedule. Every schedule made by [Every], [EveryFrom],
// [Cron] or [Parse] with valid arguments passes; an Every with a duration
// under a millisecond does not.
func Validate(s Schedule) error {
	if s == nil {
		return invalidf("nil schedule")
	}
	p, err := Parse(s.String())
	if err != nil {
		return err
	}
	if !Equal(p, s) {
		return invalidf("%q does not round-trip", s.String())
	}
	return nil
}

// Equal reports whether a and b are the same schedule, that is whether their
// canonical specs are equal.
func Equal(a, b Schedule) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.String() == b.String()
}
