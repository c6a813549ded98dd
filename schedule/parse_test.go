package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec, canonical string
	}{
		{"every 5m", "every 5m"},
		{"every 300s", "every 5m"},
		{"every 1h30m", "every 1h30m"},
		{"every 1.5s", "every 1.5s"},
		{"every 200ms", "every 200ms"},
		{"every 24h", "every 24h"},
		{"  every   5m  ", "every 5m"},
		{"every 5m from 2026-01-01T00:00:00Z", "every 5m from 2026-01-01T00:00:00Z"},
		{"every 5m from 2026-01-01T01:00:00+01:00", "every 5m from 2026-01-01T00:00:00Z"},
		{"every 1h from 1970-01-01T00:00:00Z", "every 1h"},
		{"every 1s from 2026-01-01T00:00:00.25Z", "every 1s from 2026-01-01T00:00:00.25Z"},
		{"cron 0 9 * * MON-FRI Europe/Berlin", "cron 0 9 * * MON-FRI Europe/Berlin"},
		{"cron 0 9 * * MON-FRI", "cron 0 9 * * MON-FRI UTC"},
		{"cron 0 9 * * mon-fri UTC", "cron 0 9 * * mon-fri UTC"},
		{"cron 30 0 9 * * *", "cron 30 0 9 * * * UTC"},
		{"cron 30 0 9 * * * America/New_York", "cron 30 0 9 * * * America/New_York"},
		{"cron */15   * * * *   Australia/Lord_Howe", "cron */15 * * * * Australia/Lord_Howe"},
		{"cron @daily", "cron @daily UTC"},
		{"cron @hourly America/Santiago", "cron @hourly America/Santiago"},
		{"cron 0 0 29 2 ? Etc/GMT+5", "cron 0 0 29 2 ? Etc/GMT+5"},
	}
	for _, tc := range tests {
		s, err := Parse(tc.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.spec, err)
			continue
		}
		if got := s.String(); got != tc.canonical {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.spec, got, tc.canonical)
		}
		if err := Validate(s); err != nil {
			t.Errorf("Validate(Parse(%q)): %v", tc.spec, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ spec, want string }{
		{"", "empty spec"},
		{"hourly", `starts with "every" or "cron"`},
		{"EVERY 5m", `starts with "every" or "cron"`},
		{"every", "every DURATION"},
		{"every 5", "missing unit"},
		{"every 0s", "under 1ms"},
		{"every -5m", "under 1ms"},
		{"every 999us", "under 1ms"},
		{"every 5m since 2026-01-01T00:00:00Z", `want "from"`},
		{"every 5m from 2026-01-01", "anchor"},
		{"every 5m from 2026-01-01T00:00:00Z extra", "every DURATION"},
		{"cron", "cron FIELDS"},
		{"cron 0 9 * *", "words after"},
		{"cron 0 9 * * * * * *", "words after"},
		{"cron 0 9 * * MON-FRI Mars/Olympus", "neither a time zone"},
		{"cron 0 9 * * MON-FRI Local", "name the zone"},
		{"cron 0 9 * * * * Mars/Olympus", "time zone"},
		{"cron 0 9 * * * * Local", "name the zone"},
		{"cron 60 9 * * *", "above maximum"},
		{"cron 0 24 * * *", "above maximum"},
		{"cron 0 0 0 * *", "below minimum"},
		{"cron 0 0 * 13 *", "above maximum"},
		{"cron 0 0 * * 7", "above maximum"},
		{"cron */0 * * * *", "positive"},
		{"cron 5-1 * * * *", "beyond end"},
		{"cron 0 0 30 2 *", "matches no date"},
		{"cron @every 5m", "descriptors are"},
		{"cron @reboot", "descriptors are"},
		{"cron @daily Europe/Berlin extra", "words after"},
		{"cron TZ=Europe/Berlin 0 9 * * *", "give the time zone as tz"},
		{"cron CRON_TZ=UTC 0 9 * * * *", "give the time zone as tz"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.spec)
		if err == nil {
			t.Errorf("Parse(%q) accepted an invalid spec", tc.spec)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, which does not wrap ErrInvalid", tc.spec, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %q, want it to say %q", tc.spec, err, tc.want)
		}
	}
}

func TestCronArguments(t *testing.T) {
	t.Parallel()
	s, err := Cron("  0 9\t* * MON-FRI ", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), "cron 0 9 * * MON-FRI Europe/Berlin"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	for _, tz := range []string{"Local", "Europe/Berlin ", "Nowhere/Atlantis", "../etc/passwd"} {
		if _, err := Cron("0 9 * * *", tz); !errors.Is(err, ErrInvalid) {
			t.Errorf("Cron with tz %q = %v, want an ErrInvalid", tz, err)
		}
	}
	if s, err := Cron("@daily", ""); err != nil || s.String() != "cron @daily UTC" {
		t.Fatalf(`Cron("@daily", "") = %v, %v`, s, err)
	}
}

func TestValidateEqual(t *testing.T) {
	t.Parallel()
	if err := Validate(Every(time.Microsecond)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate(Every(1µs)) = %v, want ErrInvalid", err)
	}
	if err := Validate(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate(nil) = %v, want ErrInvalid", err)
	}
	if err := Validate(foreign{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate(a schedule whose String does not parse back) = %v, want ErrInvalid", err)
	}
	a := EveryFrom(time.Hour, time.Date(2026, 1, 1, 1, 0, 0, 0, mustZone(t, "Europe/Berlin")))
	b := EveryFrom(60*time.Minute, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if !Equal(a, b) {
		t.Fatalf("%v and %v: same interval from the same instant, want equal", a, b)
	}
	if Equal(a, Every(time.Hour)) || Equal(a, nil) || !Equal(nil, nil) {
		t.Fatal("Equal: wrong answer for a different anchor or nil")
	}
}

// foreign is a Schedule whose String is not a spec.
type foreign struct{}

func (foreign) Next(after time.Time) time.Time { return after.Add(time.Hour) }
func (foreign) String() string                 { return "hourly" }
