package schedule

import (
	"testing"
	"time"
	_ "time/tzdata" // the tests need the zones whatever the machine has
)

// mustTime parses an RFC 3339 instant with its offset.
func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("bad test instant %q: %v", s, err)
	}
	return v
}

// TestCronNext walks several ticks from an instant and checks each one, with
// its UTC offset, on real transition dates (the zones' 2024 and 2026 rules).
func TestCronNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr, tz, after string
		want                  []string
	}{
		// Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET.
		{"berlin gap fires at the end of the gap, next day as usual", "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"berlin repeat fires the first occurrence only", "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"berlin every 15 minutes over the gap", "*/15 * * * *", "Europe/Berlin", "2026-03-29T01:40:00+01:00",
			[]string{"2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"}},
		{"berlin every 30 minutes over the repeat", "*/30 * * * *", "Europe/Berlin", "2026-10-25T01:50:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T03:00:00+01:00", "2026-10-25T03:30:00+01:00"}},
		{"berlin from inside the second pass", "*/30 * * * *", "Europe/Berlin", "2026-10-25T02:10:00+01:00",
			[]string{"2026-10-25T03:00:00+01:00"}},
		{"berlin hourly on the spring day", "0 * * * *", "Europe/Berlin", "2026-03-29T00:30:00+01:00",
			[]string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"berlin hourly on the autumn day", "0 * * * *", "Europe/Berlin", "2026-10-25T00:30:00+02:00",
			[]string{"2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00"}},
		{"berlin 03:00 exists on the spring day", "0 3 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T03:00:00+02:00"}},
		{"berlin 2024 rules", "0 2 * * *", "Europe/Berlin", "2024-03-30T12:00:00+01:00",
			[]string{"2024-03-31T03:00:00+02:00", "2024-04-01T02:00:00+02:00"}},
		{"berlin weekdays at nine", "0 9 * * MON-FRI", "Europe/Berlin", "2026-10-23T09:00:00+02:00",
			[]string{"2026-10-26T09:00:00+01:00", "2026-10-27T09:00:00+01:00"}},
		{"berlin weekly descriptor", "@weekly", "Europe/Berlin", "2026-03-25T00:00:00+01:00",
			[]string{"2026-03-29T00:00:00+01:00", "2026-04-05T00:00:00+02:00"}},

		// America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST.
		{"new york gap", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"new york repeat", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"new york seconds field in the gap", "30 0 2 * * SUN", "America/New_York", "2026-03-01T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-15T02:00:30-04:00"}},
		{"new york 2024 repeat, every 20 minutes", "*/20 1 * * *", "America/New_York", "2024-11-03T00:59:00-04:00",
			[]string{"2024-11-03T01:00:00-04:00", "2024-11-03T01:20:00-04:00", "2024-11-03T01:40:00-04:00", "2024-11-04T01:00:00-05:00"}},

		// Australia/Lord_Howe moves by 30 minutes: 2026-10-04 02:00 -> 02:30 (+10:30 -> +11);
		// 2026-04-05 02:00 -> 01:30 (+11 -> +10:30).
		{"lord howe half-hour gap", "15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00+10:30",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
		{"lord howe half-hour repeat", "45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00:00+11:00",
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}},
		{"lord howe every 10 minutes over the repeat", "*/10 1 * * *", "Australia/Lord_Howe", "2026-04-05T01:25:00+11:00",
			[]string{"2026-04-05T01:30:00+11:00", "2026-04-05T01:40:00+11:00", "2026-04-05T01:50:00+11:00", "2026-04-06T01:00:00+10:30"}},
		{"lord howe 02:00 on the spring day is the gap's end", "0 2 * * *", "Australia/Lord_Howe", "2024-10-05T12:00:00+10:30",
			[]string{"2024-10-06T02:30:00+11:00", "2024-10-07T02:00:00+11:00"}},

		// America/Santiago changes at midnight: 2026-09-06 00:00 -> 01:00 (-04 -> -03);
		// 2026-04-05 00:00 -> 2026-04-04 23:00 (-03 -> -04).
		{"santiago midnight does not exist", "0 0 * * *", "America/Santiago", "2026-09-05T12:00:00-04:00",
			[]string{"2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00"}},
		{"santiago 23:30 happens twice", "30 23 * * *", "America/Santiago", "2026-04-04T12:00:00-03:00",
			[]string{"2026-04-04T23:30:00-03:00", "2026-04-05T23:30:00-04:00"}},
		{"santiago midnight after the repeat", "0 0 * * *", "America/Santiago", "2026-04-04T12:00:00-03:00",
			[]string{"2026-04-05T00:00:00-04:00", "2026-04-06T00:00:00-04:00"}},
		{"santiago daily descriptor on the spring day", "@daily", "America/Santiago", "2024-09-07T00:00:00-04:00",
			[]string{"2024-09-08T01:00:00-03:00", "2024-09-09T00:00:00-03:00"}},

		// Month ends and leap days (UTC).
		{"31st skips the short months", "0 0 31 * *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z", "2026-10-31T00:00:00Z", "2026-12-31T00:00:00Z"}},
		{"feb 29 over five leap years", "0 12 29 2 *", "", "2024-01-01T00:00:00Z",
			[]string{"2024-02-29T12:00:00Z", "2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z", "2036-02-29T12:00:00Z", "2040-02-29T12:00:00Z"}},
		{"feb 29 over 2100, which is not a leap year", "0 0 29 2 *", "", "2096-03-01T00:00:00Z",
			[]string{"2104-02-29T00:00:00Z"}},
		{"29th in a common and a leap february", "0 0 29 * *", "", "2027-01-30T00:00:00Z",
			[]string{"2027-03-29T00:00:00Z", "2027-04-29T00:00:00Z"}},
		{"last days of february 2100", "0 0 28-31 2 *", "", "2100-01-01T00:00:00Z",
			[]string{"2100-02-28T00:00:00Z", "2101-02-28T00:00:00Z"}},
		{"new year over a year end", "0 0 1 1 *", "", "2026-12-31T23:59:59.999999999Z",
			[]string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},

		// Seconds field, strictly after, day fields.
		{"every 20 seconds", "*/20 * * * * *", "", "2026-01-01T00:00:50Z",
			[]string{"2026-01-01T00:01:00Z", "2026-01-01T00:01:20Z", "2026-01-01T00:01:40Z"}},
		{"strictly after the tick itself", "30 0 9 * * *", "", "2026-01-01T09:00:30Z",
			[]string{"2026-01-02T09:00:30Z"}},
		{"a nanosecond before the tick", "30 0 9 * * *", "", "2026-01-01T09:00:29.999999999Z",
			[]string{"2026-01-01T09:00:30Z"}},
		{"a fraction after a whole second", "* * * * * *", "", "2026-01-01T09:00:29.5Z",
			[]string{"2026-01-01T09:00:30Z", "2026-01-01T09:00:31Z"}},
		{"both day fields restricted: either matches", "0 0 13 * FRI", "", "2026-02-10T00:00:00Z",
			[]string{"2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-06T00:00:00Z", "2026-03-13T00:00:00Z"}},
		{"day-of-week restricted alone", "0 0 * * SUN", "", "2026-11-27T00:00:00Z",
			[]string{"2026-11-29T00:00:00Z", "2026-12-06T00:00:00Z"}},
		{"month names and lists", "0 0 1 JAN,jul *", "", "2026-02-01T00:00:00Z",
			[]string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Cron(tc.expr, tc.tz)
			if err != nil {
				t.Fatalf("Cron(%q, %q): %v", tc.expr, tc.tz, err)
			}
			at := mustTime(t, tc.after)
			for i, w := range tc.want {
				want := mustTime(t, w)
				got := s.Next(at)
				if !got.Equal(want) {
					t.Fatalf("%s: tick %d after %s = %s, want %s", s, i, at.Format(time.RFC3339Nano), got.Format(time.RFC3339), w)
				}
				// The offset is part of the rule: check it, not only the instant.
				if _, off := got.Zone(); off != offsetOf(want) {
					t.Fatalf("%s: tick %d = %s, want offset of %s", s, i, got.Format(time.RFC3339), w)
				}
				at = got
			}
		})
	}
}

func offsetOf(t time.Time) int {
	_, off := t.Zone()
	return off
}

func TestCronNextNone(t *testing.T) {
	t.Parallel()
	// Feb 29 skips 2100: eight years between two ticks are within the horizon.
	s, err := Cron("0 0 29 2 *", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(time.Date(2096, 3, 1, 0, 0, 0, 0, time.UTC)); got.Year() != 2104 {
		t.Fatalf("Next after 2096-03-01 = %v, want 2104-02-29", got)
	}
	for _, expr := range []string{"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"} {
		if _, err := Cron(expr, ""); err == nil {
			t.Errorf("Cron(%q) accepted an expression that matches no date", expr)
		}
	}
}

// TestEveryNext checks intervals against their anchor.
func TestEveryNext(t *testing.T) {
	t.Parallel()
	anchor := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		s     Schedule
		after time.Time
		want  time.Time
	}{
		{"on the hour from the epoch", Every(time.Hour), time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC), time.Date(2026, 3, 29, 2, 0, 0, 0, time.UTC)},
		{"strictly after a tick", Every(time.Hour), time.Date(2026, 3, 29, 2, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 3, 0, 0, 0, time.UTC)},
		{"a nanosecond before", Every(time.Hour), time.Date(2026, 3, 29, 1, 59, 59, 999999999, time.UTC), time.Date(2026, 3, 29, 2, 0, 0, 0, time.UTC)},
		{"before the anchor gives the anchor", EveryFrom(5*time.Minute, anchor), anchor.Add(-time.Hour), anchor},
		{"at the anchor gives the next", EveryFrom(5*time.Minute, anchor), anchor, anchor.Add(5 * time.Minute)},
		{"after the anchor", EveryFrom(5*time.Minute, anchor), anchor.Add(7 * time.Minute), anchor.Add(10 * time.Minute)},
		{"a zoned anchor is the same instant", EveryFrom(time.Hour, anchor.In(mustZone(t, "Asia/Kolkata"))), anchor.Add(90 * time.Minute), anchor.Add(2 * time.Hour)},
		{"daylight saving does not move intervals", Every(time.Hour), time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC).In(mustZone(t, "Europe/Berlin")), time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC)},
		{"beyond the range of a Duration from the anchor", Every(time.Hour), time.Date(2500, 6, 1, 10, 20, 0, 0, time.UTC), time.Date(2500, 6, 1, 11, 0, 0, 0, time.UTC)},
		{"an odd interval far away", Every(7 * time.Second), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(3000, 1, 1, 0, 0, 6, 0, time.UTC)}, // 32503680000 s = 7k + 1,
		{"under the minimum never ticks", Every(time.Microsecond), anchor, time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Next(tc.after); !got.Equal(tc.want) {
				t.Fatalf("%s.Next(%v) = %v, want %v", tc.s, tc.after, got, tc.want)
			}
		})
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestNextExtendedRules walks daily ticks through the years that the zones'
// extended rules cover (after 2037), leap years included: each day exactly
// one tick at its wall time. It guards the time.ZoneBounds workaround
// (zoneSegment): without it Next looped for ever on 2040-12-28 in Berlin.
func TestNextExtendedRules(t *testing.T) {
	t.Parallel()
	for _, tz := range []string{"Europe/Berlin", "Australia/Lord_Howe", "America/Santiago", "America/New_York"} {
		s := mustCron(t, "0 9 * * *", tz)
		loc := mustZone(t, tz)
		at := time.Date(2039, 12, 1, 0, 0, 0, 0, loc)
		for day := 0; day < 3*366; day++ {
			got := s.Next(at)
			want := time.Date(at.Year(), at.Month(), at.Day(), 9, 0, 0, 0, loc)
			if !want.After(at) {
				want = time.Date(at.Year(), at.Month(), at.Day()+1, 9, 0, 0, 0, loc)
			}
			if !got.Equal(want) {
				t.Fatalf("%s: Next(%v) = %v, want %v", s, at, got, want)
			}
			at = got
		}
	}
	// The last day of a leap year, around the defect's bound.
	s := mustCron(t, "*/30 * * * *", "Europe/Berlin")
	got := Missed(s, time.Date(2040, 12, 30, 23, 0, 0, 0, time.UTC), time.Date(2041, 1, 1, 2, 0, 0, 0, time.UTC), 1000)
	if len(got) != 54 {
		t.Fatalf("half-hours from 2040-12-30 23:00 to 2041-01-01 02:00 UTC: %d ticks, want 54", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Sub(got[i-1]) != 30*time.Minute {
			t.Fatalf("ticks %v then %v", got[i-1], got[i])
		}
	}
}
