package config

import (
	"fmt"

	"github.com/ontime-go/ontime/internal/wire"
)

// Schedule declares a recurring timer ([[schedules]] in the TOML file): the
// server creates it at start, or updates it when it differs, so that every
// server of a fleet can carry the same declarations (docs/recurring.md).
type Schedule struct {
	// Topic and ID name the recurring timer. Required.
	Topic string `toml:"topic"`
	ID    string `toml:"id"`
	// The schedule: exactly one of Schedule (a spec such as "every 5m" or
	// "cron 0 9 * * MON-FRI Europe/Berlin"), Every (a Go duration, with
	// From an optional RFC 3339 anchor) and Cron (an expression, with TZ
	// an optional IANA zone).
	Schedule string `toml:"schedule"`
	Every    string `toml:"every"`
	From     string `toml:"from"`
	Cron     string `toml:"cron"`
	TZ       string `toml:"tz"`
	// Missed is the missed-tick policy: "once" (default) or "each:N".
	Missed string `toml:"missed"`
	// Jitter spreads each tick over this window after it (a Go duration).
	Jitter string `toml:"jitter"`
	// Body is the text each tick delivers; Headers its headers.
	Body    string            `toml:"body"`
	Headers map[string]string `toml:"headers"`
}

// In returns the declaration as the API's request.
func (s *Schedule) In() *wire.ScheduleIn {
	in := &wire.ScheduleIn{ID: s.ID, Schedule: s.Schedule, Every: s.Every, From: s.From, Cron: s.Cron, TZ: s.TZ, Missed: s.Missed, Headers: s.Headers}
	if s.Jitter != "" {
		in.Jitter = &s.Jitter
	}
	return in
}

// checkSchedules validates the [[schedules]] declarations.
func (c *Config) checkSchedules(bad func(format string, args ...any)) {
	if len(c.Schedules) > 0 && c.RedisLayout == "compat" {
		bad("schedules: the compat layout keeps no recurring timers (the Python library would not arm the next tick)")
	}
	seen := map[[2]string]int{}
	for i := range c.Schedules {
		s := &c.Schedules[i]
		where := fmt.Sprintf("schedules[%d]", i)
		if err := wire.ValidateTopic(s.Topic); err != nil {
			bad("%s: topic: %v", where, err)
		}
		if err := wire.ValidateID(s.ID); err != nil {
			bad("%s: id: %v", where, err)
		}
		if j, dup := seen[[2]string{s.Topic, s.ID}]; dup {
			bad("%s: topic %q id %q is also schedules[%d]", where, s.Topic, s.ID, j)
		}
		seen[[2]string{s.Topic, s.ID}] = i
		in := s.In()
		if _, err := wire.ScheduleOf(in); err != nil {
			bad("%s: %v", where, err)
		}
		if _, err := wire.MissedOf(s.Missed); err != nil {
			bad("%s: %v", where, err)
		}
		if in.Jitter != nil {
			if _, err := wire.JitterOf(*in.Jitter); err != nil {
				bad("%s: %v", where, err)
			}
		}
	}
}
