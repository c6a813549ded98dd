package schedule

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// BenchmarkNext measures Next over a year of ticks, beside robfig/cron's
// own Next on the same fields as the baseline (go test -bench Next
// ./schedule; compare ours/robfig per line pair).
func BenchmarkNext(b *testing.B) {
	for _, bc := range []struct{ name, expr, tz string }{
		{"weekdays-0900-Berlin", "0 9 * * MON-FRI", "Europe/Berlin"},
		{"every-15min-NewYork", "*/15 * * * *", "America/New_York"},
		{"every-20s-UTC", "*/20 * * * * *", ""},
		{"leapday-UTC", "0 0 29 2 *", ""},
	} {
		s, err := Cron(bc.expr, bc.tz)
		if err != nil {
			b.Fatal(err)
		}
		c := s.(*cronSchedule)
		p, err := cronParser.Parse(bc.expr)
		if err != nil {
			b.Fatal(err)
		}
		rs := p.(*cron.SpecSchedule)
		rs.Location = c.loc
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		b.Run(bc.name+"/ours", func(b *testing.B) {
			t := start
			for b.Loop() {
				if t = c.Next(t); t.Year() > 2040 {
					t = start
				}
			}
		})
		b.Run(bc.name+"/robfig", func(b *testing.B) {
			t := start
			for b.Loop() {
				if t = rs.Next(t); t.Year() > 2040 {
					t = start
				}
			}
		})
	}
	b.Run("every-5m", func(b *testing.B) {
		s := Every(5 * time.Minute)
		t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for b.Loop() {
			t = s.Next(t)
		}
	})
}
