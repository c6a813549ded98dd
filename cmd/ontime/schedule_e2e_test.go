package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/wire"
)

// TestScheduleCLI: `ontime schedule --every/--cron` publishes a recurring
// timer, its ticks are delivered, `ls` and `get` show the schedule, and bad
// combinations are usage errors (exit 2) or refusals (exit 7).
func TestScheduleCLI(t *testing.T) {
	t.Parallel()
	s := serve(t, nil, "--data-dir", t.TempDir())
	a := newAPI(t, s)

	out := mustCLI(t, s, nil, "schedule", "ticks", "tick body", "--id", "fast", "--every", "200ms")
	if !strings.Contains(out, "fast\tevery 200ms\tfirst tick due ") {
		t.Fatalf("schedule --every printed %q", out)
	}
	out = mustCLI(t, s, nil, "schedule", "reports", "sales", "--id", "weekday", "--cron", "0 9 * * MON-FRI", "--tz", "Europe/Berlin", "--missed", "each:3", "--jitter", "1m", "--json")
	var c wire.ScheduleCreated
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("schedule --json printed %q: %v", out, err)
	}
	if c.Schedule != "cron 0 9 * * MON-FRI Europe/Berlin" || c.Missed != "each:3" || c.Jitter != "1m0s" {
		t.Fatalf("schedule --cron --json printed %q", out)
	}

	var tm wire.Timer
	waitAPI(t, 30*time.Second, "three ticks settled", func() bool {
		a.must(200, "GET", "/v1/topics/ticks/timers/fast", nil).decode(t, &tm)
		return tm.Recurring != nil && tm.Recurring.LastTick >= 3
	})
	if tm.Recurring.LastOutcome != "ack" {
		t.Fatalf("after three ticks: %+v", tm.Recurring)
	}
	if out := mustCLI(t, s, nil, "ls", "reports"); !strings.Contains(out, "SCHEDULE") || !strings.Contains(out, "cron 0 9 * * MON-FRI Europe/Berlin #1") {
		t.Fatalf("ls:\n%s", out)
	}
	if out := mustCLI(t, s, nil, "get", "reports", "weekday"); !strings.Contains(out, "schedule:") || !strings.Contains(out, "each:3") || !strings.Contains(out, "tick:") {
		t.Fatalf("get:\n%s", out)
	}
	// Pause and resume.
	if out := mustCLI(t, s, nil, "pause", "reports", "weekday"); out != "paused weekday\n" {
		t.Fatalf("pause printed %q", out)
	}
	if out := mustCLI(t, s, nil, "ls", "reports"); !strings.Contains(out, "#1 (paused)") {
		t.Fatalf("ls after pause:\n%s", out)
	}
	if out := mustCLI(t, s, nil, "resume", "reports", "weekday"); !strings.HasPrefix(out, "resumed weekday (next tick ") {
		t.Fatalf("resume printed %q", out)
	}
	if _, _, code := cli(t, s, nil, "pause", "reports", "nope"); code != 3 {
		t.Fatalf("pause of no timer: exit %d, want 3", code)
	}
	// Backfill: the weekday 09:00 Berlin ticks of 2026-03-02 to 2026-03-08 (five).
	args := []string{"backfill", "reports", "weekday", "--from", "2026-03-02T00:00:00Z", "--to", "2026-03-08T00:00:00Z"}
	if out := mustCLI(t, s, nil, args...); out != "5 ticks: 5 published, 0 already backfilled\n" {
		t.Fatalf("backfill printed %q", out)
	}
	// This server delivers them at once (the log target): once delivered
	// they are gone, and a second backfill runs them again.
	waitAPI(t, 30*time.Second, "the backfilled ticks delivered", func() bool {
		var p wire.TimerPage
		a.must(200, "GET", "/v1/topics/reports/timers", nil).decode(t, &p)
		return !strings.Contains(fmt.Sprint(p.Timers), "weekday@")
	})
	if !strings.Contains(s.stderr(), "weekday@2026-03-02T08:00:00Z") {
		t.Fatalf("the log target did not log the backfilled tick")
	}
	if _, errOut, code := cli(t, s, nil, "backfill", "reports", "weekday"); code != 2 || !strings.Contains(errOut, "--from is required") {
		t.Fatalf("backfill without --from: exit %d %s", code, errOut)
	}
	// A plain timer next to them has no schedule.
	mustCLI(t, s, nil, "schedule", "reports", "once", "--id", "plain", "--in", "1h")
	if out := mustCLI(t, s, nil, "ls", "reports"); !strings.Contains(out, "plain") {
		t.Fatalf("ls:\n%s", out)
	}

	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"schedule", "t", "b", "--every", "5m"}, 2, "needs --id"},
		{[]string{"schedule", "t", "b", "--id", "x", "--every", "5m", "--in", "1s"}, 2, "exactly one of"},
		{[]string{"schedule", "t", "b", "--id", "x"}, 2, "exactly one of"},
		{[]string{"schedule", "t", "b", "--id", "x", "--every", "5m", "--tz", "UTC"}, 2, "--tz goes with --cron"},
		{[]string{"schedule", "t", "b", "--id", "x", "--cron", "@daily", "--from", "2026-01-01T00:00:00Z"}, 2, "--from goes with --every"},
		{[]string{"schedule", "t", "b", "--id", "x", "--in", "1s", "--jitter", "1s"}, 2, "go with --every or --cron"},
		{[]string{"schedule", "t", "b", "--id", "x", "--cron", "0 9 * *"}, 7, "invalid_schedule"},
		{[]string{"schedule", "t", "b", "--id", "x", "--cron", "0 9 * * *", "--tz", "Nowhere/Atlantis"}, 7, "time zone"},
	} {
		_, errOut, code := cli(t, s, nil, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("ontime %v: exit %d, stderr %q; want exit %d saying %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("serve exited %d; stderr:\n%s", code, s.stderr())
	}
}

// TestScheduleConfig: [[schedules]] in the TOML file are created at start;
// a second start with the same file changes nothing (same next tick, same
// tick number), one with a changed declaration updates it; a bad
// declaration stops the server before it serves.
func TestScheduleConfig(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "ontime.toml")
	write := func(s string) {
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const decl = `
[[schedules]]
topic = "reports"
id = "nightly"
cron = "30 2 * * *"
tz = "Europe/Berlin"
missed = "each:2"
body = "rebuild the index"
headers = { tenant = "a" }

[[schedules]]
topic = "pings"
id = "hourly"
schedule = "every 1h"
`
	write(decl)
	get := func(s *srv, topic, id string) wire.Timer {
		var tm wire.Timer
		newAPI(t, s).must(200, "GET", "/v1/topics/"+topic+"/timers/"+id, nil).decode(t, &tm)
		return tm
	}
	s := serve(t, nil, "--config", cfg, "--data-dir", data)
	first := get(s, "reports", "nightly")
	if r := first.Recurring; r == nil || r.Schedule != "cron 30 2 * * * Europe/Berlin" || r.Missed != "each:2" || r.Tick != 1 ||
		first.Headers["tenant"] != "a" || string(first.Body) != `"rebuild the index"` {
		t.Fatalf("declared schedule: %+v", first)
	}
	if r := get(s, "pings", "hourly").Recurring; r == nil || r.Schedule != "every 1h" {
		t.Fatalf("declared every: %+v", r)
	}
	if !strings.Contains(s.stderr(), "declared schedule created") {
		t.Errorf("no log line for the created schedule:\n%s", s.stderr())
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr())
	}

	// The same file again: untouched.
	s = serve(t, nil, "--config", cfg, "--data-dir", data)
	again := get(s, "reports", "nightly")
	if !again.DueAt.Equal(first.DueAt) || again.Recurring.Tick != 1 || strings.Contains(s.stderr(), "declared schedule updated") {
		t.Fatalf("a restart with the same declarations changed the timer: %+v then %+v\n%s", first, again, s.stderr())
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr())
	}

	// A changed declaration: updated.
	write(strings.Replace(decl, `cron = "30 2 * * *"`, `cron = "45 3 * * *"`, 1))
	s = serve(t, nil, "--config", cfg, "--data-dir", data)
	changed := get(s, "reports", "nightly")
	if changed.Recurring.Schedule != "cron 45 3 * * * Europe/Berlin" || !strings.Contains(s.stderr(), "declared schedule updated") {
		t.Fatalf("changed declaration: %+v\n%s", changed.Recurring, s.stderr())
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr())
	}

	// Bad declarations: refused at start, each named.
	write(`
[[schedules]]
topic = "reports"
id = "bad"
cron = "0 9 * *"

[[schedules]]
topic = "reports"
id = "bad"
every = "5m"
tz = "UTC"
`)
	_, errOut, code := cli(t, nil, nil, "serve", "--config", cfg, "--data-dir", data, "--listen", "127.0.0.1:0")
	if code != 2 || !strings.Contains(errOut, "schedules[0]: ") || !strings.Contains(errOut, "schedules[1]: topic \"reports\" id \"bad\" is also schedules[0]") ||
		!strings.Contains(errOut, `"tz" goes with "cron"`) {
		t.Fatalf("bad declarations: exit %d\n%s", code, errOut)
	}
}
