package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/schedule"
)

// ScheduleIn is a recurring timer to publish (POST
// /v1/topics/{topic}/schedules). The schedule is exactly one of Schedule (a
// spec: "every 5m", "cron 0 9 * * MON-FRI Europe/Berlin"), Every (a Go
// duration, with From an optional RFC 3339 anchor) or Cron (an expression,
// with TZ an optional IANA zone).
type ScheduleIn struct {
	ID       string  `json:"id"`
	Schedule string  `json:"schedule,omitempty"`
	Every    string  `json:"every,omitempty"`
	From     string  `json:"from,omitempty"`
	Cron     string  `json:"cron,omitempty"`
	TZ       string  `json:"tz,omitempty"`
	Missed   string  `json:"missed,omitempty"`
	Jitter   *string `json:"jitter,omitempty"`

	Body          json.RawMessage   `json:"body,omitempty"`
	BodyBase64    *string           `json:"body_base64,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	CorrelationID string            `json:"correlation_id,omitempty"`
	IfAbsent      bool              `json:"if_absent,omitempty"`
}

// ScheduleCreated answers a published recurring timer.
type ScheduleCreated struct {
	ID    string `json:"id"`
	Topic string `json:"topic"`
	// Schedule is the canonical spec; Missed the missed-tick policy
	// ("once" or "each:N"); Jitter the jitter window, when set.
	Schedule string `json:"schedule"`
	Missed   string `json:"missed"`
	Jitter   string `json:"jitter,omitempty"`
	// DueAt is when the first tick is due (its instant plus its jitter).
	DueAt time.Time `json:"due_at"`
}

// Recurring is a recurring timer's schedule in a Timer.
type Recurring struct {
	Schedule string `json:"schedule"`
	Missed   string `json:"missed"`
	Jitter   string `json:"jitter,omitempty"`
	// Tick and TickAt are the number and the scheduled instant of the tick
	// the timer stands for (due at DueAt, later while it waits for a retry
	// or its jitter).
	Tick   int64     `json:"tick"`
	TickAt time.Time `json:"tick_at"`
	Paused bool      `json:"paused"`
	// LastTick is the number of the last tick settled (0: none yet), and
	// LastOutcome its outcome ("ack" or "dead").
	LastTick    int64  `json:"last_tick"`
	LastOutcome string `json:"last_outcome,omitempty"`
}

// RecurringOf converts the library's view of a recurring timer (nil for a
// plain timer gives nil).
func RecurringOf(ri *ontime.RecurringInfo) *Recurring {
	if ri == nil {
		return nil
	}
	r := &Recurring{
		Schedule: ri.Schedule, Missed: ri.Missed.String(), Tick: ri.Tick.N, TickAt: ri.Tick.At.UTC(),
		Paused: ri.Paused, LastTick: ri.LastTick, LastOutcome: ri.LastOutcome,
	}
	if ri.Jitter > 0 {
		r.Jitter = ri.Jitter.String()
	}
	return r
}

// ScheduleOf reads the schedule of in: exactly one of schedule, every and
// cron; from only with every, tz only with cron.
func ScheduleOf(in *ScheduleIn) (schedule.Schedule, error) {
	n := 0
	for _, v := range []string{in.Schedule, in.Every, in.Cron} {
		if v != "" {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, fmt.Errorf(`give the schedule: "schedule" (a spec such as "every 5m"), "every" (a duration) or "cron" (an expression, with "tz")`)
	case n > 1:
		return nil, fmt.Errorf(`give one of "schedule", "every" and "cron"`)
	case in.From != "" && in.Every == "":
		return nil, fmt.Errorf(`"from" goes with "every"`)
	case in.TZ != "" && in.Cron == "":
		return nil, fmt.Errorf(`"tz" goes with "cron" (a spec names its zone itself)`)
	}
	var (
		s   schedule.Schedule
		err error
	)
	switch {
	case in.Schedule != "":
		s, err = schedule.Parse(in.Schedule)
	case in.Cron != "":
		s, err = schedule.Cron(in.Cron, in.TZ)
	default:
		s, err = everyOf(in.Every, in.From)
	}
	if err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), schedule.ErrInvalid.Error()+": "))
	}
	return s, nil
}

func everyOf(every, from string) (schedule.Schedule, error) {
	d, err := time.ParseDuration(every)
	if err != nil {
		return nil, fmt.Errorf("every %q is not a duration such as \"5m\" or \"1h30m\"", every)
	}
	if d < schedule.MinInterval {
		return nil, fmt.Errorf("every %q is under %v", every, schedule.MinInterval)
	}
	if from == "" {
		return schedule.Every(d), nil
	}
	anchor, err := time.Parse(time.RFC3339Nano, from)
	if err != nil {
		return nil, fmt.Errorf("from %q is not an RFC 3339 instant such as 2026-01-01T00:00:00Z", from)
	}
	return schedule.EveryFrom(d, anchor), nil
}

// MissedOf reads a missed-tick policy: "" or "once" (the default), or
// "each:N" with N >= 1.
func MissedOf(s string) (ontime.MissedPolicy, error) {
	if s == "" || s == "once" {
		return ontime.FireOnce(), nil
	}
	if b, ok := strings.CutPrefix(s, "each:"); ok {
		if n, err := strconv.Atoi(b); err == nil && n >= 1 && n <= 100_000 {
			return ontime.FireEach(n), nil
		}
	}
	return ontime.MissedPolicy{}, fmt.Errorf(`missed %q: want "once" or "each:N" (N from 1 to 100000)`, s)
}

// JitterOf reads a jitter window: a Go duration, positive.
func JitterOf(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf(`jitter %q: want a positive duration such as "30s"`, s)
	}
	return d, nil
}

// BackfillIn asks for the ticks of a recurring timer in (from, to] (POST
// /v1/topics/{topic}/timers/{id}/backfill), RFC 3339 instants.
type BackfillIn struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Backfilled answers a backfill: the ticks in the range, how many were
// published now and how many had been by an earlier backfill.
type Backfilled struct {
	Ticks     int `json:"ticks"`
	Published int `json:"published"`
	Existing  int `json:"existing"`
}

// BackfillID is the id of the one-shot timer that runs the tick at tick
// of the recurring timer id: the id, "@", the instant (RFC 3339, UTC).
func BackfillID(id string, tick time.Time) string {
	return id + "@" + tick.UTC().Format(time.RFC3339Nano)
}

// TickHeader carries a backfilled tick's scheduled instant.
const TickHeader = "ontime-tick"

// SchedulePage lists a topic's recurring timers (GET
// /v1/topics/{topic}/schedules), in due order. Scanned counts the timers
// the server read for it: the schedules alone when the store lists them,
// else every timer walked in due order. Complete is true when the list
// goes to its end (from the position of the request's cursor, if any);
// else NextCursor, passed as the cursor query parameter, goes on.
type SchedulePage struct {
	Schedules  []Timer `json:"schedules"`
	Scanned    int     `json:"scanned"`
	Complete   bool    `json:"complete"`
	NextCursor string  `json:"next_cursor,omitempty"`
}
