package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ontime-go/ontime/internal/wire"
)

// TestDashboardBrowserSchedules: a topic's page lists its recurring timers
// (and not its plain ones) with their schedule, next tick, last outcome and
// state, and pauses and resumes them; a recurring timer's page shows its
// schedule and pauses it too. In headless Chromium against `ontime serve`
// on the embedded store, whose log target runs the ticks. Not parallel, as
// TestDashboardBrowser.
func TestDashboardBrowserSchedules(t *testing.T) {
	s := serve(t, nil, "--data-dir", t.TempDir())
	a := newAPI(t, s)
	a.must(201, "POST", "/v1/topics/beats/schedules", map[string]any{"id": "fast", "every": "300ms", "body": "beat"})
	a.must(201, "POST", "/v1/topics/beats/schedules", map[string]any{"id": "daily", "cron": "0 9 * * *", "tz": "Europe/Berlin", "missed": "each:3"})
	a.must(201, "POST", "/v1/topics/beats/timers", map[string]any{"id": "plain", "body": "once", "delay": "1h"})
	recurring := func(id string) *wire.Recurring {
		var tm wire.Timer
		a.must(200, "GET", "/v1/topics/beats/timers/"+id, nil).decode(t, &tm)
		return tm.Recurring
	}

	b := newBrowser(t)
	b.run("open the topic", 30*time.Second, chromedp.Navigate(s.URL+"/ui/#/topic/beats"),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-id="daily"]`)))
	if n := evalJS[float64](b, `document.querySelectorAll('#schedules tbody tr').length`); n != 2 {
		t.Errorf("%v schedules listed, want 2 (fast and daily, not the plain timer)", n)
	}
	if got := b.text(`#schedules tr[data-id="daily"] td.schedule`); got != "cron 0 9 * * * Europe/Berlin · missed each:3" {
		t.Errorf("daily's schedule: %q", got)
	}
	if got := b.text(`#schedules tr[data-id="daily"] td.last`); got != "none yet" {
		t.Errorf("daily's last outcome: %q", got)
	}
	// the fast one ticks: its last outcome shows, and updates by itself
	b.waitText("fast's ticks settle", `#schedules tr[data-id="fast"] td.last`, 30*time.Second, func(s string) bool {
		return strings.HasPrefix(s, "#") && strings.HasSuffix(s, " ack") && s != "#1 ack"
	})
	b.shot("schedules")

	b.run("pause fast", 10*time.Second, chromedp.Click(chromedp.CSS(`#schedules tr[data-id="fast"] button.pause`)),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-id="fast"] button.resume`)))
	if got := b.text(`#schedules tr[data-id="fast"] td.state`); got != "paused" {
		t.Errorf("fast's state after pause: %q", got)
	}
	if r := recurring("fast"); !r.Paused {
		t.Fatalf("fast after the pause button: %+v", r)
	}
	b.run("resume fast", 10*time.Second, chromedp.Click(chromedp.CSS(`#schedules tr[data-id="fast"] button.resume`)),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-id="fast"] button.pause`)))
	last := recurring("fast").LastTick
	b.waitText("fast ticks again after resume", `#schedules tr[data-id="fast"] td.last`, 30*time.Second, func(s string) bool {
		r := recurring("fast")
		return !r.Paused && r.LastTick > last
	})

	// the recurring timer's own page
	b.run("open daily", 30*time.Second, chromedp.Click(chromedp.CSS(`#schedules tr[data-id="daily"] td.id a`)),
		chromedp.WaitVisible(chromedp.CSS(`#schedule`)))
	if got := b.text(`#schedule`); got != "cron 0 9 * * * Europe/Berlin" {
		t.Errorf("daily's page: schedule %q", got)
	}
	if got := b.text(`#next-tick`); !strings.HasPrefix(got, "#1 at ") {
		t.Errorf("daily's page: next tick %q", got)
	}
	b.run("pause daily", 10*time.Second, chromedp.Click(chromedp.CSS(`#pause`)), chromedp.WaitVisible(chromedp.CSS(`#resume`)))
	if r := recurring("daily"); !r.Paused {
		t.Fatalf("daily after its page's pause button: %+v", r)
	}
	if got := b.text(`#next-tick`); !strings.Contains(got, "held while paused") {
		t.Errorf("daily's page when paused: next tick %q", got)
	}
	b.shot("schedule page")
}
