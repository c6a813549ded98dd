package schedule

import (
	"testing"
	"time"
)

func TestMissed(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Every(time.Minute)
	got := Missed(s, base, base.Add(5*time.Minute), 100)
	if len(got) != 5 || !got[0].Equal(base.Add(time.Minute)) || !got[4].Equal(base.Add(5*time.Minute)) {
		t.Fatalf("Missed over (0, 5m] = %v, want the 5 minutes after base, to included", got)
	}
	if got := Missed(s, base, base.Add(time.Hour), 3); len(got) != 3 || !got[2].Equal(base.Add(3*time.Minute)) {
		t.Fatalf("Missed bounded by 3 = %v, want the first three", got)
	}
	if got := Missed(s, base, base.Add(time.Hour), 0); len(got) != 0 {
		t.Fatalf("Missed with max 0 = %v, want none", got)
	}
	if got := Missed(s, base, base.Add(30*time.Second), 10); len(got) != 0 {
		t.Fatalf("Missed with no tick in range = %v", got)
	}
	// Backfill of a DST day: the gap's wall times give one tick, each once.
	c, err := Cron("*/30 1-3 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 3, 29, 0, 0, 0, 0, mustZone(t, "Europe/Berlin"))
	got = Missed(c, day, day.AddDate(0, 0, 1), 100)
	want := []string{"01:00+01:00", "01:30+01:00", "03:00+02:00", "03:30+02:00"}
	if len(got) != len(want) {
		t.Fatalf("backfill of 2026-03-29 = %v, want %v", got, want)
	}
	for i, w := range want {
		if g := got[i].Format("15:04Z07:00"); g != w {
			t.Fatalf("backfill tick %d = %s, want %s", i, g, w)
		}
	}
}

func TestLatest(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		s        Schedule
		from, to time.Time
		want     time.Time
	}{
		{"two weeks of 200 ms ticks", Every(200 * time.Millisecond), base, base.Add(14*24*time.Hour + 300*time.Millisecond), base.Add(14*24*time.Hour + 200*time.Millisecond)},
		{"to is a tick", Every(time.Minute), base, base.Add(10 * time.Minute), base.Add(10 * time.Minute)},
		{"none in range", Every(time.Hour), base, base.Add(59 * time.Minute), time.Time{}},
		{"empty range", Every(time.Minute), base, base, time.Time{}},
		{"cron, far back", mustCron(t, "0 9 1 1 *", ""), base, base.AddDate(3, 2, 0), time.Date(2029, 1, 1, 9, 0, 0, 0, time.UTC)},
		{"cron every second over a day", mustCron(t, "* * * * * *", ""), base, base.Add(24*time.Hour + 500*time.Millisecond), base.Add(24 * time.Hour)},
		{"cron, only tick is just after from", mustCron(t, "0 0 1 1 *", ""), base.Add(-time.Second), base.AddDate(0, 11, 0), base},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Latest(tc.s, tc.from, tc.to); !got.Equal(tc.want) {
				t.Fatalf("Latest(%s, %v, %v) = %v, want %v", tc.s, tc.from, tc.to, got, tc.want)
			}
		})
	}
}

func mustCron(t *testing.T, expr, tz string) Schedule {
	t.Helper()
	s, err := Cron(expr, tz)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
