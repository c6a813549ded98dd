// Package schedule says when a recurring timer ticks: a fixed interval
// ([Every], [EveryFrom]) or a cron expression in a time zone ([Cron]), both
// written as one canonical string that [Parse] reads back.
//
//	s, err := schedule.Cron("0 9 * * MON-FRI", "Europe/Berlin")
//	next := s.Next(time.Now())         // the first tick strictly after now
//	spec := s.String()                 // "cron 0 9 * * MON-FRI Europe/Berlin"
//	again, err := schedule.Parse(spec) // the same schedule
//
// The package holds no state and starts no goroutine: the store keeps a
// recurring timer's spec and arms each next tick with Next when the current
// one is settled (docs/recurring.md).
//
// # Intervals
//
// Every(d) ticks at the Unix epoch plus whole multiples of d (so every hour is
// on the hour, UTC); EveryFrom(d, anchor) ticks at anchor, anchor+d, ... and
// never before anchor. Intervals are elapsed time: daylight saving does not
// move them.
//
// # Cron expressions
//
// Five fields (minute hour day-of-month month day-of-week), or six with a
// leading seconds field, or a descriptor such as @daily; names such as
// MON-FRI and JAN; see [Cron]. The fields are parsed by
// github.com/robfig/cron/v3, the parser behind Kubernetes CronJobs and
// go-co-op/gocron: its syntax is the one Go users already write, it has no
// dependencies, and its field parser is small and stable (the module has not
// needed a release since v3.0.1). Its Next is not used: it steps through
// time.Time arithmetic and around daylight-saving changes it skips or
// repeats runs (robfig/cron issues about DST). This package walks wall-clock
// readings instead and turns each into an instant by the rule below.
//
// # Daylight saving
//
// Cron expressions name wall-clock times in their zone. Where the clocks
// change:
//
//   - A wall time that does not exist (the clocks spring forward over it)
//     ticks at the first instant after the gap: 02:30 on the day Europe/Berlin
//     goes from 02:00 CET to 03:00 CEST ticks at 03:00 CEST. This is what
//     Vixie cron and cronie do for fixed-time jobs. Several wall times in one
//     gap (every 15 minutes) give a single tick at that instant.
//   - A wall time that happens twice (the clocks fall back over it) ticks
//     once, at its first occurrence (the summer-time one in Europe). An
//     expression that ticks every 15 minutes therefore has no ticks in the
//     repeated hour's second pass: use Every for elapsed-time intervals.
//   - So a schedule never ticks twice for one wall time and never skips a day
//     it matches, including in zones that change by 30 minutes
//     (Australia/Lord_Howe) or at midnight (America/Santiago).
//
// Time zones come from the system's tz database or, where it has none, from
// the copy embedded in the binary (the ontime command imports time/tzdata).
// Servers of one fleet should run the same Go release so that they agree on
// future transitions.
//
// # Never early, jitter, missed ticks
//
// Next is strictly after its argument, so an armed tick is due at its
// instant or later, never before. [JitterFor] spreads a fleet's ticks over a
// window after each tick, deterministically per (schedule id, tick), so the
// tick still fires at or after its instant and every server computes the
// same delay. [Missed] and [Latest] list the ticks of a past range without
// walking more of it than needed: for the missed-tick policies after an
// outage and for backfill (each tick once).
package schedule
