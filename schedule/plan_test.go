package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPlanAfter(t *testing.T) {
	t.Parallel()
	at := func(hms string) time.Time {
		v, err := time.Parse("15:04:05", hms)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 1, 1, v.Hour(), v.Minute(), v.Second(), 0, time.UTC)
	}
	minute := Every(time.Minute)
	each3 := Plan{Schedule: minute, CatchUp: CatchUpEach, MaxCatchUp: 3}
	tests := []struct {
		name          string
		plan          Plan
		last, now     time.Time
		tick          time.Time
		skipped       int
		dueIsTickTime bool
	}{
		{"on time: the next tick", Plan{Schedule: minute}, at("09:00:00"), at("09:00:30"), at("09:01:00"), 0, true},
		{"settled exactly at the next tick: it is missed and runs now", Plan{Schedule: minute}, at("09:00:00"), at("09:01:00"), at("09:01:00"), 0, true},
		{"ran past four ticks, once: the latest runs, three skipped", Plan{Schedule: minute}, at("09:00:00"), at("09:05:30"), at("09:05:00"), 4, true},
		{"ran past five ticks, each bounded by 3: the last three run", each3, at("09:00:00"), at("09:05:30"), at("09:03:00"), 2, true},
		{"each: catching up, the next missed one", each3, at("09:03:00"), at("09:05:40"), at("09:04:00"), 0, true},
		{"each: caught up", each3, at("09:05:00"), at("09:05:50"), at("09:06:00"), 0, true},
		{"each within the bound: all of them", Plan{Schedule: minute, CatchUp: CatchUpEach}, at("09:00:00"), at("09:05:30"), at("09:01:00"), 0, true},
		{"two weeks of 200 ms ticks missed: skip count is capped", Plan{Schedule: Every(200 * time.Millisecond)}, at("09:00:00"), at("09:00:00").Add(14 * 24 * time.Hour), at("09:00:00").Add(14 * 24 * time.Hour), MaxSkipCount, true},
		{"a day of a per-second cron missed, once", Plan{Schedule: mustCron(t, "* * * * * *", "")}, at("09:00:00"), at("09:00:00").Add(24*time.Hour + 500*time.Millisecond), at("09:00:00").Add(24 * time.Hour), 86399, true},
		{"a week of a daily cron missed, each bounded by 2", Plan{Schedule: mustCron(t, "0 9 * * *", "Europe/Berlin"), CatchUp: CatchUpEach, MaxCatchUp: 2},
			at("08:00:00"), at("08:00:00").AddDate(0, 0, 7), time.Date(2026, 1, 7, 8, 0, 0, 0, time.UTC), 5, true},
		{"the schedule ended", Plan{Schedule: ending{}}, at("09:00:00"), at("09:00:30"), time.Time{}, 0, true},
		{"jitter delays the due time only", Plan{Schedule: minute, Jitter: 20 * time.Second}, at("09:00:00"), at("09:00:30"), at("09:01:00"), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.plan.After("sched", tc.last, tc.now)
			if !a.Tick.Equal(tc.tick) || a.Skipped != tc.skipped {
				t.Fatalf("After(%v, %v) = tick %v skipped %d, want %v and %d", tc.last, tc.now, a.Tick, a.Skipped, tc.tick, tc.skipped)
			}
			if a.Tick.IsZero() {
				if !a.Due.IsZero() {
					t.Fatalf("no tick but due %v", a.Due)
				}
				return
			}
			if a.Due.Before(a.Tick) || !a.Due.Before(a.Tick.Add(tc.plan.Jitter+1)) {
				t.Fatalf("due %v outside [tick %v, tick+jitter %v)", a.Due, a.Tick, tc.plan.Jitter)
			}
			if tc.dueIsTickTime != a.Due.Equal(a.Tick) {
				t.Fatalf("due %v, tick %v", a.Due, a.Tick)
			}
			if want := a.Tick.Add(JitterFor("sched", a.Tick, tc.plan.Jitter)); !a.Due.Equal(want) {
				t.Fatalf("due %v, want the tick's jitter %v", a.Due, want)
			}
		})
	}
}

// ending is a schedule with one tick, at 09:00:00 on 2026-01-01.
type ending struct{}

func (ending) Next(after time.Time) time.Time {
	if t := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC); after.Before(t) {
		return t
	}
	return time.Time{}
}
func (ending) String() string { return "ending" }

func TestPlanFirst(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	p := Plan{Schedule: Every(time.Hour), Jitter: 10 * time.Minute}
	a := p.First("report", now)
	if !a.Tick.Equal(now.Add(time.Hour)) || a.Skipped != 0 {
		t.Fatalf("First at a tick = %+v, want the next hour", a)
	}
	if a.Due.Before(a.Tick) || !a.Due.Before(a.Tick.Add(10*time.Minute)) {
		t.Fatalf("due %v outside the jitter window after %v", a.Due, a.Tick)
	}
}

func TestParsePlan(t *testing.T) {
	t.Parallel()
	good := []struct{ spec, canonical string }{
		{"every 5m", "every 5m"},
		{"every 1h jitter 5m", "every 1h jitter 5m"},
		{"every 1h jitter 0s", "every 1h"},
		{"every 1h catchup once", "every 1h"},
		{"every 1h catchup each", "every 1h catchup each 100"},
		{"cron 0 9 * * * Europe/Berlin jitter 90s catchup each 24", "cron 0 9 * * * Europe/Berlin jitter 1m30s catchup each 24"},
		{"cron @daily catchup each 1", "cron @daily UTC catchup each 1"},
	}
	for _, tc := range good {
		p, err := ParsePlan(tc.spec)
		if err != nil {
			t.Errorf("ParsePlan(%q): %v", tc.spec, err)
			continue
		}
		if got := p.String(); got != tc.canonical {
			t.Errorf("ParsePlan(%q).String() = %q, want %q", tc.spec, got, tc.canonical)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("ParsePlan(%q).Validate(): %v", tc.spec, err)
		}
	}
	bad := []struct{ spec, want string }{
		{"jitter 5m", "empty spec"},
		{"every 1h jitter", "want a duration"},
		{"every 1h jitter -5m", "0 or more"},
		{"every 1h jitter soon", "0 or more"},
		{"every 1h catchup", `"once" or "each`},
		{"every 1h catchup all", `"once" or "each`},
		{"every 1h catchup each 0", "from 1 to"},
		{"every 1h catchup each 1000000", "from 1 to"},
		{"every 1h catchup once jitter 5m", "after the schedule"},
		{"every 1h jitter 5m jitter 5m", "after the schedule"},
		{"every 1h catchup each 3 4", "after the schedule"},
	}
	for _, tc := range bad {
		_, err := ParsePlan(tc.spec)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePlan(%q) = %v, want an ErrInvalid saying %q", tc.spec, err, tc.want)
		}
	}
	for _, p := range []Plan{
		{},
		{Schedule: Every(time.Hour), Jitter: -1},
		{Schedule: Every(time.Hour), CatchUp: CatchUpEach, MaxCatchUp: MaxSkipCount + 1},
		{Schedule: Every(time.Hour), CatchUp: 7},
	} {
		if err := p.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v.Validate() = %v, want ErrInvalid", p, err)
		}
	}
}

// FuzzParsePlan checks that ParsePlan never panics and that what it accepts
// round-trips.
func FuzzParsePlan(f *testing.F) {
	for _, s := range []string{"every 5m", "every 1h jitter 5m catchup each 3", "cron 0 9 * * * Europe/Berlin catchup once",
		"cron @daily jitter 1s", "every 1h catchup each", "every 1h jitter -1s", "every 1h catchup each 0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		p, err := ParsePlan(spec)
		if err != nil {
			return
		}
		q, err := ParsePlan(p.String())
		if err != nil || q.String() != p.String() {
			t.Fatalf("ParsePlan(%q) = %q, then %q, %v", spec, p, q, err)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("ParsePlan(%q).Validate(): %v", spec, err)
		}
	})
}
