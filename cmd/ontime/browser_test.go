package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
)

// The browser tests drive the dashboard in a real headless Chromium
// (Debian's chromium package: `make deps` installs it) through the Chrome
// DevTools protocol with chromedp, against the real `ontime serve` binary
// on the embedded store. Screenshots of each step are written to
// $ONTIME_TEST_ARTIFACTS (default: a directory under the system's temp
// directory, named in the test log); they are artifacts, not committed.
// docs/img/dashboard.png is the topics page of one such run.

// chromiumPath finds the browser, or fails the test: it is a test
// dependency that `make deps` installs (never downloaded by the test).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium in PATH: the dashboard's browser tests need Debian's chromium package; run `make deps` (apt-get install chromium)")
	return ""
}

// browser is one headless Chromium with one tab.
type browser struct {
	t         *testing.T
	ctx       context.Context
	artifacts string
	shots     int

	mu       sync.Mutex
	jsErrors []string
}

// newBrowser starts Chromium with a fresh profile. The test's cleanup
// closes it and kills any of its processes left (by pid, found through the
// profile directory on their command line), even when the test failed.
func newBrowser(t *testing.T, flags ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 800),
	}
	opts = append(opts, flags...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	b := &browser{t: t, ctx: ctx, artifacts: artifactsDir(t)}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // kills the browser and waits for it
		killLeftovers(t, profile)
	})
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	console := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.mu.Lock()
			b.jsErrors = append(b.jsErrors, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
			b.mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type != "error" {
				continue
			}
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			b.mu.Lock()
			b.jsErrors = append(b.jsErrors, "console.error: "+strings.Join(parts, " "))
			b.mu.Unlock()
		}
	}()
	// Start the browser now, so that a missing or broken one fails here.
	b.run("start the browser", 60*time.Second, chromedp.Navigate("about:blank"))
	return b
}

// artifactsDir is where screenshots go: $ONTIME_TEST_ARTIFACTS, or a new
// directory in the temp directory, kept after the test.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ONTIME_TEST_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "ontime-browser-"); err != nil {
			t.Fatal(err)
		}
	}
	dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", dir)
	return dir
}

// killLeftovers kills processes whose command line names the profile
// directory (Chromium's renderers and helpers), by pid.
func killLeftovers(t *testing.T, profile string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), profile) {
			continue
		}
		t.Logf("killing leftover browser process %d", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// run runs actions with a timeout; on failure it saves a screenshot and
// fails the test.
func (b *browser) run(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failed-" + what)
		b.t.Fatalf("%s: %v", what, err)
	}
	b.checkJS()
}

// shot saves a PNG of the viewport as NN-name.png and returns its path.
func (b *browser) shot(name string) string {
	b.shots++
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	p := filepath.Join(b.artifacts, fmt.Sprintf("%02d-%s.png", b.shots, strings.ReplaceAll(name, " ", "-")))
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
	return p
}

func (b *browser) checkJS() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.jsErrors {
		b.t.Errorf("JavaScript error in the page: %s", e)
	}
	b.jsErrors = nil
}

// textJS is a JavaScript expression for the text of the first element sel
// matches ("" when there is none).
func textJS(sel string) string {
	q, _ := json.Marshal(sel)
	return fmt.Sprintf("(document.querySelector(%s) || {textContent: ''}).textContent.trim()", q)
}

// text returns the text of the first element sel matches.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return evalJS[string](b, textJS(sel))
}

// evalJS evaluates a JavaScript expression.
func evalJS[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.shot("failed-evaluate")
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitText waits until the text of sel satisfies ok.
func (b *browser) waitText(what, sel string, timeout time.Duration, ok func(string) bool) string {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		last := b.text(sel)
		if ok(last) {
			return last
		}
		if time.Now().After(deadline) {
			b.shot("failed-" + what)
			b.t.Fatalf("%s: %q (text of %s) after %v", what, last, sel, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dashboardHook is a webhook target that fails (500) its first fail
// calls, then succeeds.
type dashboardHook struct {
	*httptest.Server
	mu    sync.Mutex
	calls []string // Ontime-Id of each call
}

func newDashboardHook(t *testing.T, fail int) *dashboardHook {
	h := &dashboardHook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.calls = append(h.calls, r.Header.Get("Ontime-Id"))
		n := len(h.calls)
		h.mu.Unlock()
		if n <= fail {
			http.Error(w, "card declined", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *dashboardHook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}

// TestDashboardBrowser: a person's session with the dashboard, in headless
// Chromium, against `ontime serve` on the embedded store:
//   - the topics page lists the topics with their counts and the lateness
//     of the last minute (and 0 early);
//   - a topic's page shows its timers and the timeline chart, and updates
//     by itself when a timer fires (no reload);
//   - a timer's page cancels it (after a confirmation), which the store
//     confirms, and fires another one now;
//   - a failing webhook dead-letters a timer; the dead-letter page shows
//     its error and replays it (after a confirmation), and the timer is
//     delivered; "Purge all" needs the topic's name typed first.
//
// It is not parallel: Go runs it before the parallel tests of the package,
// so that Chromium's CPU does not slow the end-to-end tests that check how
// late timers print.
func TestDashboardBrowser(t *testing.T) {
	started := time.Now()
	hook := newDashboardHook(t, 2) // both attempts of inv-1 fail; the replay succeeds
	refunds := newDashboardHook(t, 1<<30)
	cfg := filepath.Join(t.TempDir(), "ontime.toml")
	err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
[topics.billing]
retry = { min_delay = "100ms", max_delay = "100ms", max_attempts = 2 }
target = { type = "http", url = %q, secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", timeout = "5s" }

[topics.refunds]
retry = { max_attempts = 1 }
target = { type = "http", url = %q, secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", timeout = "5s" }
`, hook.URL, refunds.URL)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, nil, "--config", cfg, "--data-dir", t.TempDir())
	a := newAPI(t, s)
	sched := func(topic string, body map[string]any) {
		a.must(201, "POST", "/v1/topics/"+topic+"/timers", body)
	}
	// Traffic for the topics page: timers that fire at once (lateness), and
	// timers spread over the next hour (the timeline).
	for i := range 12 {
		sched("emails", map[string]any{"id": fmt.Sprintf("welcome-%d", i), "body": "welcome", "delay": "0s"})
	}
	for i := range 30 {
		sched("reminders", map[string]any{"id": fmt.Sprintf("r-%02d", i), "body": fmt.Sprintf("call customer %d", i), "delay": fmt.Sprintf("%ds", 120+i*97)})
	}
	sched("reminders", map[string]any{"id": "call-bob", "body": "call Bob", "delay": "30m", "headers": map[string]string{"owner": "ops"}})
	sched("reminders", map[string]any{"id": "later", "body": "fire me", "delay": "2h"})
	sched("invoices", map[string]any{"id": "inv-2026-11", "body": map[string]any{"invoice": 42}, "delay": "720h"})

	b := newBrowser(t)

	// The topics page.
	b.run("open /ui", 30*time.Second, chromedp.Navigate(s.URL+"/ui"), chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="reminders"]`)))
	b.waitText("emails delivered", `tr[data-topic="emails"] td.fired`, 15*time.Second, func(s string) bool { return s == "12" })
	// The live indicator's clock is UTC, like every other time on the page.
	b.waitText("live clock in UTC", `#live`, 15*time.Second, func(s string) bool {
		return regexp.MustCompile(`^live · \d\d:\d\d:\d\d UTC$`).MatchString(s)
	})
	if got := b.text(`tr[data-topic="reminders"] td.scheduled`); got != "32" {
		t.Errorf("reminders scheduled: %q, want 32", got)
	}
	if got := b.text(`tr[data-topic="emails"] td.early`); got != "0" {
		t.Errorf("emails early: %q, want 0", got)
	}
	if got := b.text(`tr[data-topic="emails"] td.p99`); !strings.HasSuffix(got, " ms") && !strings.HasSuffix(got, " s") {
		t.Errorf("emails p99 lateness: %q, want a duration", got)
	}
	b.shot("topics")

	// The filter keeps its text and focus across the page's refreshes.
	b.run("filter the topics", 10*time.Second, chromedp.SendKeys(chromedp.CSS(`#filter`), "remi"))
	// At least one refresh: the table drawn before it is replaced by the
	// one its data draws (a sleep could pass on a loaded machine before
	// any refresh came).
	evalJS[bool](b, `(window.beforeRefresh = document.getElementById('topics'), true)`)
	wait.For(t, 30*time.Second, func() bool { return evalJS[bool](b, `!window.beforeRefresh.isConnected`) }, "a refresh of the topics page")
	b.run("type more", 10*time.Second, chromedp.SendKeys(chromedp.CSS(`#filter`), "nd"))
	if got := b.text(`#shown`); got != "1 of 5 topics" {
		t.Errorf("filtered: %q, want 1 of 5 topics", got)
	}
	if got := evalJS[string](b, `document.getElementById('filter').value`); got != "remind" {
		t.Errorf("filter text after a refresh: %q, want remind", got)
	}
	if n := evalJS[int](b, `document.querySelectorAll('#topics tbody tr').length`); n != 1 {
		t.Errorf("filtered: %d rows, want 1", n)
	}

	// A topic's page updates by itself: a timer due in a few seconds is
	// listed, then leaves the list when it fires, and the fired count
	// grows, without a reload.
	sched("reminders", map[string]any{"id": "soon", "body": "in 3 seconds", "delay": "3s"})
	b.run("open the topic", 20*time.Second, chromedp.Click(chromedp.CSS(`tr[data-topic="reminders"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#timers tr[data-id="soon"]`)), chromedp.WaitVisible(chromedp.CSS(`#timeline rect.bar`)))
	bars := evalJS[int](b, `document.querySelectorAll('#timeline rect.bar').length`)
	if bars < 20 {
		t.Errorf("timeline: %d bars, want one per minute that has timers (at least 20)", bars)
	}
	b.shot("topic")
	evalJS[bool](b, `window.notReloaded = true`) // a reload would drop it
	b.run("the fired timer leaves the list by itself", 20*time.Second, chromedp.WaitNotPresent(chromedp.CSS(`#timers tr[data-id="soon"]`)))
	b.waitText("the topic's fired count", `.stats .stat:nth-child(5) b`, 10*time.Second, func(s string) bool { return s == "1" })
	if !evalJS[bool](b, `window.notReloaded === true`) {
		t.Error("the page was reloaded")
	}

	// Cancel from the timer's page, after a confirmation.
	b.run("open call-bob", 20*time.Second, chromedp.Click(chromedp.CSS(`#timers tr[data-id="call-bob"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#cancel`)))
	if got := b.text(`#body`); got != "call Bob" {
		t.Errorf("timer body: %q", got)
	}
	b.shot("timer")
	b.run("cancel, then dismiss", 10*time.Second, chromedp.Click(chromedp.CSS(`#cancel`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-ok`)),
		chromedp.Click(chromedp.CSS(`#confirm-cancel`)), chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)))
	a.must(200, "GET", "/v1/topics/reminders/timers/call-bob", nil) // dismissed: still there
	b.run("cancel, confirmed", 10*time.Second, chromedp.Click(chromedp.CSS(`#cancel`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-ok`)))
	b.shot("cancel-confirmation")
	b.run("confirm", 10*time.Second, chromedp.Click(chromedp.CSS(`#confirm-ok`)), chromedp.WaitVisible(chromedp.CSS(`#timers`)))
	a.must(404, "GET", "/v1/topics/reminders/timers/call-bob", nil)

	// Fire now: the timer due in two hours is delivered (and acked by the
	// log target), so the store no longer has it.
	b.run("open later", 20*time.Second, chromedp.Navigate(s.URL+"/ui/#/topic/reminders/timer/later"), chromedp.WaitVisible(chromedp.CSS(`#fire`)))
	b.run("fire now", 10*time.Second, chromedp.Click(chromedp.CSS(`#fire`)))
	waitAPI(t, 15*time.Second, "the fired timer delivered", func() bool {
		return a.do("GET", "/v1/topics/reminders/timers/later", nil).status == 404
	})
	b.run("the page sees it gone", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#gone`)))

	// A dead letter, replayed from the page.
	sched("billing", map[string]any{"id": "inv-1", "body": map[string]any{"invoice": 1}, "delay": "0s"})
	waitAPI(t, 15*time.Second, "a dead letter", func() bool {
		var p wire.DeadPage
		a.must(200, "GET", "/v1/topics/billing/dead", nil).decode(t, &p)
		return len(p.Dead) == 1
	})
	b.run("open the dead letters", 20*time.Second, chromedp.Navigate(s.URL+"/ui/#/topic/billing/dead"),
		chromedp.WaitVisible(chromedp.CSS(`#dead tr[data-id="inv-1"]`)))
	if got := b.text(`#dead tr[data-id="inv-1"] td.error`); !strings.Contains(got, "500") {
		t.Errorf("dead letter error: %q, want the webhook's 500", got)
	}
	disabled := evalJS[bool](b, `document.getElementById('replay').disabled`)
	if !disabled {
		t.Error("Replay selected is enabled with nothing selected")
	}
	b.run("select and replay", 10*time.Second, chromedp.Click(chromedp.CSS(`#dead tr[data-id="inv-1"] input[type=checkbox]`)),
		chromedp.Click(chromedp.CSS(`#replay`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-ok`)))
	b.shot("replay-confirmation")
	b.run("confirm the replay", 10*time.Second, chromedp.Click(chromedp.CSS(`#confirm-ok`)))
	b.run("the dead letter leaves the page", 20*time.Second, chromedp.WaitVisible(chromedp.CSS(`#no-dead`)))
	waitAPI(t, 15*time.Second, "the replayed timer delivered", func() bool {
		return hook.count() >= 3 && a.do("GET", "/v1/topics/billing/timers/inv-1", nil).status == 404
	})
	var dp wire.DeadPage
	a.must(200, "GET", "/v1/topics/billing/dead", nil).decode(t, &dp)
	if len(dp.Dead) != 0 {
		t.Errorf("dead letters after the replay: %+v", dp.Dead)
	}

	// "Purge all" cannot be confirmed before the topic's name is typed.
	for _, id := range []string{"ref-1", "ref-2"} {
		sched("refunds", map[string]any{"id": id, "body": "refund", "delay": "0s"})
	}
	waitAPI(t, 15*time.Second, "two dead refunds", func() bool {
		var p wire.DeadPage
		a.must(200, "GET", "/v1/topics/refunds/dead", nil).decode(t, &p)
		return len(p.Dead) == 2
	})
	b.run("open the refunds' dead letters", 20*time.Second, chromedp.Navigate(s.URL+"/ui/#/topic/refunds/dead"),
		chromedp.WaitVisible(chromedp.CSS(`#dead tr[data-id="ref-2"]`)),
		chromedp.Click(chromedp.CSS(`#purge-all`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-typed`)))
	disabled = evalJS[bool](b, `document.getElementById('confirm-ok').disabled`)
	if !disabled {
		t.Error("Purge all: OK is enabled before the topic's name is typed")
	}
	b.run("type a wrong name", 10*time.Second, chromedp.SendKeys(chromedp.CSS(`#confirm-typed`), "refund"))
	disabled = evalJS[bool](b, `document.getElementById('confirm-ok').disabled`)
	if !disabled {
		t.Error("Purge all: OK is enabled with a wrong name typed")
	}
	b.run("type the name", 10*time.Second, chromedp.SendKeys(chromedp.CSS(`#confirm-typed`), "s"))
	disabled = evalJS[bool](b, `document.getElementById('confirm-ok').disabled`)
	if disabled {
		t.Error("Purge all: OK is disabled with the topic's name typed")
	}
	b.shot("purge-all-confirmation")
	b.run("purge all", 20*time.Second, chromedp.Click(chromedp.CSS(`#confirm-ok`)), chromedp.WaitVisible(chromedp.CSS(`#no-dead`)))
	a.must(200, "GET", "/v1/topics/refunds/dead", nil).decode(t, &dp)
	if len(dp.Dead) != 0 {
		t.Errorf("dead refunds after purge all: %+v", dp.Dead)
	}

	// The topics page after all that: the picture in the README.
	b.run("back to the topics", 20*time.Second, chromedp.Navigate(s.URL+"/ui/#/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="refunds"]`)))
	b.waitText("billing's delivery shown", `tr[data-topic="billing"] td.fired`, 10*time.Second, func(s string) bool { return s != "—" && s != "0" })
	evalJS[bool](b, `document.getElementById('flash').replaceChildren() === undefined`) // no "Purged 2." in the picture
	t.Logf("dashboard picture (docs/img/dashboard.png): %s", b.shot("dashboard"))
	t.Logf("browser scenario took %v", time.Since(started).Round(time.Millisecond))
}

// TestDashboardBrowserAuth: on a server with tokens the page asks for one,
// keeps it, and sends it as the CLI does; a wrong one is asked for again;
// "Forget token" drops it.
// Not parallel, as TestDashboardBrowser.
func TestDashboardBrowserAuth(t *testing.T) {
	s := serve(t, []string{"ONTIME_TOKENS=s3cret"}, "--data-dir", t.TempDir())
	a := newAPI(t, s)
	a.token = "s3cret"
	a.must(201, "POST", "/v1/topics/private/timers", map[string]any{"id": "p-1", "body": "x", "delay": "1h"})

	b := newBrowser(t)
	b.run("open /ui", 30*time.Second, chromedp.Navigate(s.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#login-token`)))
	b.run("a wrong token", 10*time.Second, chromedp.SendKeys(chromedp.CSS(`#login-token`), "wrong"), chromedp.Click(chromedp.CSS(`#login-ok`)))
	b.run("asked again", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#login-token`)))
	b.shot("token")
	b.run("the token", 10*time.Second, chromedp.SendKeys(chromedp.CSS(`#login-token`), "s3cret"), chromedp.Click(chromedp.CSS(`#login-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="private"]`)))
	if got := evalJS[string](b, `localStorage.getItem('ontime.token')`); got != "s3cret" {
		t.Errorf("stored token %q", got)
	}
	b.run("reload: the token is kept", 20*time.Second, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="private"]`)))
	b.run("forget it", 10*time.Second, chromedp.Click(chromedp.CSS(`#logout`)), chromedp.WaitVisible(chromedp.CSS(`#login-token`)))
	if got := evalJS[bool](b, `localStorage.getItem('ontime.token') === null`); !got {
		t.Error("the token is still stored after Forget token")
	}
}
