package schedule_test

import (
	"fmt"
	"time"
	_ "time/tzdata"

	"github.com/ontime-go/ontime/schedule"
)

func ExampleCron() {
	s, err := schedule.Cron("0 9 * * MON-FRI", "Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	friday := time.Date(2026, 10, 23, 9, 0, 0, 0, time.UTC)
	t := s.Next(friday)
	fmt.Println(s)
	fmt.Println(t)
	fmt.Println(s.Next(t))
	// Output:
	// cron 0 9 * * MON-FRI Europe/Berlin
	// 2026-10-26 09:00:00 +0100 CET
	// 2026-10-27 09:00:00 +0100 CET
}

// A wall time that the clocks skip ticks when the gap ends; one that happens
// twice ticks at its first occurrence. Every day gets exactly one tick.
func ExampleCron_daylightSaving() {
	s, _ := schedule.Cron("30 2 * * *", "Europe/Berlin")
	for _, day := range []time.Time{
		time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC),  // 02:00 CET -> 03:00 CEST on the 29th
		time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC), // 03:00 CEST -> 02:00 CET on the 25th
	} {
		t := s.Next(day)
		fmt.Println(t, "then", s.Next(t))
	}
	// Output:
	// 2026-03-29 03:00:00 +0200 CEST then 2026-03-30 02:30:00 +0200 CEST
	// 2026-10-25 02:30:00 +0200 CEST then 2026-10-26 02:30:00 +0100 CET
}

func ExampleEveryFrom() {
	anchor := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := schedule.EveryFrom(5*time.Minute, anchor)
	fmt.Println(s)
	fmt.Println(s.Next(anchor.Add(-time.Hour))) // nothing before the anchor
	fmt.Println(s.Next(anchor.Add(7 * time.Minute)))
	fmt.Println(schedule.Every(time.Hour))
	// Output:
	// every 5m from 2026-01-01T00:00:00Z
	// 2026-01-01 00:00:00 +0000 UTC
	// 2026-01-01 00:10:00 +0000 UTC
	// every 1h
}

func ExampleParse() {
	for _, spec := range []string{
		"every 90s",
		"cron 0 9 * * MON-FRI Europe/Berlin",
		"cron 30 0 9 * * *",
		"cron @daily America/New_York",
		"cron 0 9 * *",
	} {
		s, err := schedule.Parse(spec)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(s)
	}
	// Output:
	// every 1m30s
	// cron 0 9 * * MON-FRI Europe/Berlin
	// cron 30 0 9 * * * UTC
	// cron @daily America/New_York
	// error: schedule: invalid spec: cron: 4 words after "cron", want 5 or 6 fields and a zone, or a descriptor and a zone
}

// A fleet of hourly schedules spreads its ticks over ten minutes, each one
// firing at the same offset on every server, and never before its tick.
func ExampleJitterFor() {
	tick := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	for _, id := range []string{"tenant-1", "tenant-2", "tenant-3"} {
		d := schedule.JitterFor(id, tick, 10*time.Minute)
		fmt.Println(id, d >= 0 && d < 10*time.Minute, d == schedule.JitterFor(id, tick, 10*time.Minute))
	}
	// Output:
	// tenant-1 true true
	// tenant-2 true true
	// tenant-3 true true
}

// After an outage from 09:00 to 09:07, a schedule every two minutes missed
// three ticks: fire each (bounded), or once for the latest.
func ExampleMissed() {
	s := schedule.Every(2 * time.Minute)
	down := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	up := down.Add(7 * time.Minute)
	for _, t := range schedule.Missed(s, down, up, 10) {
		fmt.Println("missed", t.Format("15:04"))
	}
	fmt.Println("latest", schedule.Latest(s, down, up).Format("15:04"))
	// Output:
	// missed 09:02
	// missed 09:04
	// missed 09:06
	// latest 09:06
}
