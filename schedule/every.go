package schedule

import (
	"strings"
	"time"
)

// MinInterval is the shortest interval that [Every] and [Parse] accept.
const MinInterval = time.Millisecond

type every struct {
	d      time.Duration
	anchor time.Time // UTC, monotonic reading stripped
}

// Every returns a schedule that ticks every d, at the Unix epoch (UTC) plus a
// whole number of d: Every(time.Hour) ticks on the hour in UTC, whatever the
// server's clock zone. d must be at least [MinInterval]; a shorter one gives a
// schedule that never ticks and that [Validate] refuses.
func Every(d time.Duration) Schedule {
	return EveryFrom(d, time.Unix(0, 0))
}

// EveryFrom returns a schedule that ticks at anchor and then every d after
// it: anchor + k*d for k = 0, 1, 2, ... There is no tick before anchor. The
// interval is real (elapsed) time, so daylight-saving changes do not move it;
// use [Cron] for wall-clock times.
func EveryFrom(d time.Duration, anchor time.Time) Schedule {
	return every{d: d, anchor: anchor.Round(0).UTC()}
}

// Next implements Schedule.
func (e every) Next(after time.Time) time.Time {
	if e.d < MinInterval {
		return time.Time{}
	}
	a := e.anchor
	if after.Before(a) {
		return a
	}
	// Sub saturates beyond ~292 years: move the anchor forward by whole
	// intervals until the difference fits.
	const maxDuration = time.Duration(1<<63 - 1)
	for after.Sub(a) == maxDuration {
		a = a.Add(maxDuration / e.d * e.d)
	}
	k := after.Sub(a) / e.d
	return a.Add(k * e.d).Add(e.d)
}

// String implements Schedule: "every 5m", or "every 5m from 2026-01-01T00:00:00Z"
// when the anchor is not the Unix epoch.
func (e every) String() string {
	s := "every " + formatDuration(e.d)
	if !e.anchor.Equal(time.Unix(0, 0)) {
		s += " from " + e.anchor.Format(time.RFC3339Nano)
	}
	return s
}

// formatDuration is time.Duration.String without the trailing zero units
// ("1h0m0s" becomes "1h", "5m0s" becomes "5m").
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func parseEvery(words []string) (Schedule, error) {
	if len(words) != 1 && len(words) != 3 {
		return nil, invalidf("every: want \"every DURATION [from INSTANT]\"")
	}
	d, err := time.ParseDuration(words[0])
	if err != nil {
		return nil, invalidf("every: %v", err)
	}
	if d < MinInterval {
		return nil, invalidf("every: interval %v is under %v", d, MinInterval)
	}
	if len(words) == 1 {
		return Every(d), nil
	}
	if words[1] != "from" {
		return nil, invalidf("every: want \"from\", got %q", words[1])
	}
	anchor, err := time.Parse(time.RFC3339Nano, words[2])
	if err != nil {
		return nil, invalidf("every: anchor: %v", err)
	}
	return EveryFrom(d, anchor), nil
}
