package main_test

import (
	"strings"
	"testing"
	"time"
)

// TestTopTerminal: `ontime top` on a terminal draws a frame of the
// server's topics (counts, rates and lateness of the last minute), redraws
// it by itself every interval, and quits on q, leaving the terminal as it
// found it (cursor shown again).
func TestTopTerminal(t *testing.T) {
	t.Parallel()
	s := serve(t, nil, "--data-dir", t.TempDir())
	a := newAPI(t, s)
	a.must(201, "POST", "/v1/topics/invoices/timers", map[string]any{"id": "inv-1", "body": "x", "delay": "1h"})
	a.must(201, "POST", "/v1/topics/emails/timers", map[string]any{"id": "e-1", "body": "x", "delay": "0s"})

	p := startPTYWith(t, true, "top", "--interval", "200ms", "--server", s.URL)
	waitOutput := func(what string, ok func(frame string) bool) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			out := p.output()
			// the last frame: what follows the last clear-screen
			frame := out[strings.LastIndex(out, "\x1b[2J")+1:]
			if ok(frame) {
				return frame
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not on the terminal after 30s; last frame:\n%s\nstderr:\n%s", what, frame, p.stderr())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	frame := waitOutput("the topics, emails delivered", func(f string) bool {
		return strings.Contains(f, "invoices") && emailsFired(f)
	})
	for _, want := range []string{"ontime top - " + s.URL, "TOPIC", "SCHEDULED", "FIRED/s", "LATE p50", "EARLY", "(q quits)"} {
		if !strings.Contains(frame, want) {
			t.Errorf("frame lacks %q:\n%s", want, frame)
		}
	}
	if !strings.Contains(frame, "\r\n") {
		t.Errorf("frame lines do not end with \\r\\n (the terminal is raw):\n%q", frame)
	}

	// It redraws by itself: a new topic shows up without a key.
	a.must(201, "POST", "/v1/topics/refunds/timers", map[string]any{"id": "r-1", "body": "x", "delay": "1h"})
	waitOutput("the new topic", func(f string) bool { return strings.Contains(f, "refunds") })

	if _, err := p.master.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	code, out := p.wait()
	if code != 0 {
		t.Errorf("top exited %d after q; stderr:\n%s", code, p.stderr())
	}
	if !strings.HasSuffix(out, "\x1b[?25h") {
		t.Errorf("top did not show the cursor again on exit; the end of its output: %q", out[max(0, len(out)-40):])
	}
}

// emailsFired reports whether the emails line of a frame shows a delivery
// in the last minute (its FIRED/s is not 0).
func emailsFired(frame string) bool {
	for _, line := range strings.Split(frame, "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[0] == "emails" {
			return f[4] != "0" && f[4] != "-"
		}
	}
	return false
}

// TestFireCLI: `ontime fire` makes a timer due now (the log target then
// delivers it); a missing timer exits 3.
func TestFireCLI(t *testing.T) {
	t.Parallel()
	s := serve(t, nil, "--data-dir", t.TempDir())
	a := newAPI(t, s)
	a.must(201, "POST", "/v1/topics/jobs/timers", map[string]any{"id": "j-1", "body": "x", "delay": "1h"})
	if out := mustCLI(t, s, nil, "fire", "jobs", "j-1"); !strings.HasPrefix(out, "fired j-1 (due ") {
		t.Errorf("fire printed %q", out)
	}
	waitAPI(t, 15*time.Second, "the fired timer delivered", func() bool {
		return a.do("GET", "/v1/topics/jobs/timers/j-1", nil).status == 404
	})
	if _, _, code := cli(t, s, nil, "fire", "jobs", "j-1"); code != 3 {
		t.Errorf("fire of a delivered timer: exit %d, want 3", code)
	}
}
