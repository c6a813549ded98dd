package schedule

import (
	"testing"
	"time"
	_ "time/tzdata"
)

func TestSmoke(t *testing.T) {
	s, err := Cron("30 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	got := s.Next(time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC))
	t.Log(got, got.In(time.UTC))
	got = s.Next(got)
	t.Log(got)
	got = s.Next(time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC))
	t.Log(got, got.UTC())
	got = s.Next(got)
	t.Log(got)
	e := EveryFrom(5*time.Minute, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t.Log(e, e.Next(time.Date(2026, 1, 1, 0, 7, 0, 0, time.UTC)), Every(time.Hour))
	p, err := Parse("cron 0 9 * * MON-FRI Europe/Berlin")
	t.Log(p, err, p.Next(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)))
}
