package main_test

// End-to-end tests: the real binary (built by TestMain), `ontime serve` on a
// free port, the CLI verbs as child processes, the API over loopback with
// every answer checked against openapi.json. The same suite runs on the
// embedded store and on Redis (both layouts where they differ); a missing
// redis-server fails them (make test installs it).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// backend says where a test's server keeps its timers.
type backend struct {
	name  string
	redis *redistest.Server // nil: embedded store
	// aux is a redis-server for redis-stream targets (the store's own on
	// the Redis backend).
	aux *redistest.Server
}

// storeArgs returns the serve flags of a fresh, private store: a new data
// directory, or a new key prefix on the shared redis-server. Restarting
// with the same flags finds the same timers.
func (b *backend) storeArgs(t *testing.T, extra ...string) []string {
	if b.redis == nil {
		return append([]string{"--data-dir", filepath.Join(t.TempDir(), "data")}, extra...)
	}
	prefix := fmt.Sprintf("e2e%d:", time.Now().UnixNano())
	return append([]string{"--redis", b.redis.URL(), "--redis-prefix", prefix}, extra...)
}

func TestE2E(t *testing.T) {
	rs := redistest.StartServer(t)
	backends := []*backend{{name: "embedded", aux: rs}, {name: "redis", redis: rs, aux: rs}}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			t.Run("watch", func(t *testing.T) { t.Parallel(); testWatch(t, b) })
			t.Run("messages", func(t *testing.T) { t.Parallel(); testMessages(t, b) })
			t.Run("restart", func(t *testing.T) { t.Parallel(); testRestart(t, b) })
			t.Run("webhook", func(t *testing.T) { t.Parallel(); testWebhook(t, b) })
			t.Run("bad_input", func(t *testing.T) { t.Parallel(); testBadInput(t, b) })
			t.Run("auth", func(t *testing.T) { t.Parallel(); testAuth(t, b) })
			t.Run("watch_reconnect", func(t *testing.T) { t.Parallel(); testWatchReconnect(t, b) })
			t.Run("metrics", func(t *testing.T) { t.Parallel(); testMetrics(t, b) })
			t.Run("redis_stream", func(t *testing.T) { t.Parallel(); testRedisStream(t, b) })
			if b.redis != nil {
				t.Run("compat_layout", func(t *testing.T) { t.Parallel(); testCompat(t, b) })
				t.Run("compat_topics", func(t *testing.T) { t.Parallel(); testCompatTopics(t, b) })
				t.Run("cli_direct", func(t *testing.T) { t.Parallel(); testCLIDirect(t, b) })
				t.Run("redis_down", func(t *testing.T) { t.Parallel(); testRedisDown(t) })
			}
		})
	}
}

// expect is a timer the test waits to see printed by `ontime watch`.
type expect struct {
	body string
	due  time.Time
}

// checkWatch waits for want (sorted here by due time) on w's stdout and
// checks every line: the format "2006-01-02 15:04:05: <body>" with the due
// time in UTC, the order, and the instant it was printed: not before the
// due time (less a little clock reading slack) and within a second after.
func checkWatch(t *testing.T, w *proc, want []expect) {
	t.Helper()
	sort.SliceStable(want, func(i, j int) bool { return want[i].due.Before(want[j].due) })
	last := want[len(want)-1].due
	got := w.waitLines(time.Until(last)+10*time.Second, len(want))
	for i, l := range got {
		if i >= len(want) {
			t.Errorf("extra line %q", l.text)
			continue
		}
		wl := want[i].due.UTC().Format("2006-01-02 15:04:05") + ": " + want[i].body
		if l.text != wl {
			t.Errorf("line %d: %q, want %q\nall lines:\n%s", i, l.text, wl, dump(got))
			continue
		}
		late := l.at.Sub(want[i].due)
		if late < -5*time.Millisecond || late >= time.Second {
			t.Errorf("line %q printed at %s, %s after its due time %s", l.text,
				l.at.UTC().Format("15:04:05.000"), late, want[i].due.UTC().Format("15:04:05.000"))
		}
		t.Logf("%s printed %s late", l.text, late.Round(time.Microsecond))
	}
}

// watch starts `ontime watch topic` against s and waits until it streams.
func watch(t *testing.T, s *srv, env []string, topic string, more ...string) *proc {
	t.Helper()
	w := start(t, env, append([]string{"watch", topic, "--server", s.URL}, more...)...)
	w.waitStderr(30*time.Second, "watching "+topic)
	return w
}

// testWatch schedules through the API and the CLI (at and in, text and
// JSON bodies, a topic that needs escaping), cancels one, and checks that
// `ontime watch` prints each at its second, in order.
func testWatch(t *testing.T, b *backend) {
	s := serve(t, nil, b.storeArgs(t)...)
	a := newAPI(t, s)
	const topic = "e2e/watch"
	tp := "/v1/topics/" + url.PathEscape(topic)
	w := watch(t, s, nil, topic)

	// Far enough out that every schedule below (several CLI runs of a race
	// build on a loaded machine) is done before the first one fires.
	base := time.Now().Truncate(time.Second).Add(12 * time.Second)
	var want []expect
	post := func(id string, body any, at time.Time) {
		r := a.must(201, "POST", tp+"/timers", map[string]any{"id": id, "body": body, "at": at.Format(time.RFC3339Nano)})
		var c wire.Created
		r.decode(t, &c)
		if !c.DueAt.Equal(at) || c.ID != id || c.Topic != topic {
			t.Fatalf("created %+v, want %s due %s", c, id, at)
		}
	}
	// Out of order on purpose.
	post("third", "api third", base.Add(2*time.Second))
	want = append(want, expect{"api third", base.Add(2 * time.Second)})
	post("first", "api first", base)
	want = append(want, expect{"api first", base})
	post("json", map[string]any{"n": 1, "ok": true}, base.Add(2500*time.Millisecond))
	want = append(want, expect{`{"n":1,"ok":true}`, base.Add(2500 * time.Millisecond)})

	out := mustCLI(t, s, nil, "schedule", topic, "cli second", "--at", base.Add(time.Second).Format(time.RFC3339), "--id", "second", "--json")
	var c wire.Created
	if err := json.Unmarshal([]byte(out), &c); err != nil || c.ID != "second" || !c.DueAt.Equal(base.Add(time.Second)) {
		t.Fatalf("schedule --json printed %q (%v)", out, err)
	}
	want = append(want, expect{"cli second", c.DueAt})

	// --in lands half way between two seconds, so the order is clear.
	in := time.Until(base.Add(1500 * time.Millisecond)).Round(time.Millisecond)
	out = mustCLI(t, s, nil, "schedule", topic, "cli in", "--in", in.String(), "--json")
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("schedule --json printed %q: %v", out, err)
	}
	want = append(want, expect{"cli in", c.DueAt})

	// A cancelled timer never prints; cancelling it again exits 3.
	post("gone", "cancelled", base.Add(1200*time.Millisecond))
	if out := mustCLI(t, s, nil, "cancel", topic, "gone"); !strings.Contains(out, "cancelled gone") {
		t.Errorf("cancel printed %q", out)
	}
	if _, _, code := cli(t, s, nil, "cancel", topic, "gone"); code != 3 {
		t.Errorf("second cancel: exit %d, want 3", code)
	}
	// The table lists what is left, by due time.
	out = mustCLI(t, s, nil, "ls", topic)
	if i, j := strings.Index(out, "second"), strings.Index(out, "third"); i < 0 || j < i || strings.Contains(out, "gone") {
		t.Errorf("ls:\n%s", out)
	}

	checkWatch(t, w, want)
	// Each was acked after it was printed: nothing is left.
	waitAPI(t, 5*time.Second, "an empty topic", func() bool {
		var p wire.TimerPage
		a.must(200, "GET", tp+"/timers", nil).decode(t, &p)
		return len(p.Timers) == 0
	})
	if code := w.stop(syscall.SIGINT); code != 0 {
		t.Errorf("watch exited %d after SIGINT; stderr:\n%s", code, w.stderr())
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("serve exited %d after SIGTERM; stderr:\n%s", code, s.stderr())
	}
}

// waitAPI polls cond.
func waitAPI(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	wait.For(t, timeout, cond, "%s", what)
}

// testMessages is the README's quick start: POST /messages, then
// `ontime watch messages`.
func testMessages(t *testing.T, b *backend) {
	s := serve(t, nil, b.storeArgs(t)...)
	a := newAPI(t, s)
	w := watch(t, s, nil, "messages")
	var want []expect
	for _, m := range []struct {
		text  string
		delay float64
	}{{"tea is ready", 2}, {"hello", 1}, {"half", 1.5}} {
		sent := time.Now()
		r := a.must(201, "POST", "/messages", map[string]any{"message": m.text, "delay_sec": m.delay})
		var out wire.MessageOut
		r.decode(t, &out)
		wantDue := sent.Add(time.Duration(m.delay * float64(time.Second)))
		if out.ID == "" || out.ScheduledFor < wantDue.Unix()-1 || out.ScheduledFor > wantDue.Unix()+1 {
			t.Fatalf("POST /messages answered %s, want scheduled_for about %d", r.body, wantDue.Unix())
		}
		// The exact due instant, for the lateness check.
		var tm wire.Timer
		a.must(200, "GET", "/v1/topics/messages/timers/"+url.PathEscape(out.ID), nil).decode(t, &tm)
		if tm.DueAt.Unix() != out.ScheduledFor {
			t.Errorf("scheduled_for %d, stored due %s", out.ScheduledFor, tm.DueAt)
		}
		want = append(want, expect{m.text, tm.DueAt})
	}
	checkWatch(t, w, want)
}

// testRestart stops the server (crash, then graceful) and checks that the
// timers survive with everything they carry, and fire after the restart.
func testRestart(t *testing.T, b *backend) {
	args := b.storeArgs(t)
	s := serve(t, nil, args...)
	a := newAPI(t, s)
	const topic = "restart"
	soon := time.Now().Truncate(time.Second).Add(10 * time.Second) // after both restarts, even on a loaded machine
	a.must(201, "POST", "/v1/topics/restart/timers", map[string]any{
		"id": "far-api", "body": "later", "delay": "1h", "headers": map[string]string{"k": "v"}, "correlation_id": "corr-1",
	})
	mustCLI(t, s, nil, "schedule", topic, "far cli", "--in", "2h", "--id", "far-cli", "--header", "a=b", "--header", "c=d=e")
	a.must(201, "POST", "/v1/topics/restart/timers", map[string]any{"id": "soon", "body": "after restart", "at": soon.Format(time.RFC3339)})
	before := map[string]string{}
	for _, id := range []string{"far-api", "far-cli", "soon"} {
		before[id] = string(a.must(200, "GET", "/v1/topics/restart/timers/"+id, nil).body)
	}

	// Crash: SIGKILL, no graceful anything.
	if code := s.stop(syscall.SIGKILL); code != -1 {
		t.Errorf("serve exited %d after SIGKILL", code)
	}
	s = serve(t, nil, args...)
	a = newAPI(t, s)
	for id, was := range before {
		if now := string(a.must(200, "GET", "/v1/topics/restart/timers/"+id, nil).body); now != was {
			t.Errorf("%s changed across a crash:\n was %s\n now %s", id, was, now)
		}
	}
	out := mustCLI(t, s, nil, "ls", topic, "--json")
	var page wire.TimerPage
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("ls --json: %q: %v", out, err)
	}
	var ids []string
	for _, tm := range page.Timers {
		ids = append(ids, tm.ID)
	}
	if !slices.Equal(ids, []string{"soon", "far-api", "far-cli"}) {
		t.Errorf("ls --json after the crash lists %v", ids)
	}
	out = mustCLI(t, s, nil, "get", topic, "far-cli")
	for _, want := range []string{"a=b", "c=d=e", "far cli", "scheduled"} {
		if !strings.Contains(out, want) {
			t.Errorf("get far-cli does not show %q:\n%s", want, out)
		}
	}

	// The soon timer fires after the restart, at its second; the --json
	// watch prints each event's data, which must match the Event schema.
	w := watch(t, s, nil, topic, "--json")
	lines := w.waitLines(time.Until(soon)+10*time.Second, 1)
	if err := spec.CheckSchema("Event", []byte(lines[0].text)); err != nil {
		t.Errorf("event %s: %v", lines[0].text, err)
	}
	var ev wire.Event
	if err := json.Unmarshal([]byte(lines[0].text), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.ID != "soon" || string(ev.Body) != `"after restart"` || !ev.DueAt.Equal(soon) || ev.Attempt != 1 {
		t.Errorf("event %s", lines[0].text)
	}
	if late := lines[0].at.Sub(soon); late < -5*time.Millisecond || late >= time.Second {
		t.Errorf("the timer due at %s printed %s late", soon.Format(time.RFC3339), late)
	}
	w.stop(syscall.SIGINT)

	// Graceful restart.
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("serve exited %d after SIGTERM; stderr:\n%s", code, s.stderr())
	}
	s = serve(t, nil, args...)
	a = newAPI(t, s)
	for _, id := range []string{"far-api", "far-cli"} {
		if now := string(a.must(200, "GET", "/v1/topics/restart/timers/"+id, nil).body); now != before[id] {
			t.Errorf("%s changed across a restart:\n was %s\n now %s", id, before[id], now)
		}
	}
	a.must(404, "GET", "/v1/topics/restart/timers/soon", nil)
}

// hookServer is a webhook receiver that checks signatures by the Standard
// Webhooks specification (apitest.CheckStandardWebhook, written from the
// specification's text, not the server's signing code), knowing secret.
type hookServer struct {
	*httptest.Server
	secret string
	answer func(n int) int

	mu   sync.Mutex
	reqs []hookCall
}

type hookCall struct {
	at     time.Time
	header http.Header
	body   []byte
	sigOK  bool
}

func newHookServer(t *testing.T, secret string, answer func(n int) int) *hookServer {
	h := &hookServer{secret: secret, answer: answer}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		at := time.Now()
		err := apitest.CheckStandardWebhook(r.Header, body, []string{h.secret}, at)
		h.mu.Lock()
		h.reqs = append(h.reqs, hookCall{at: at, header: r.Header.Clone(), body: body, sigOK: err == nil})
		n := len(h.reqs)
		h.mu.Unlock()
		if err != nil {
			t.Logf("webhook refused: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(h.answer(n))
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) calls() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookCall(nil), h.reqs...)
}

// Secrets of the webhook tests: "whsec_" and the base64 of 32 bytes.
const (
	hookSecretNew = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	hookSecretOld = "whsec_ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
)

// testWebhook delivers to an http target configured in a TOML file: the
// first answer is a 500, which is retried; every request carries a
// Standard Webhooks signature that the receiver, which knows only the old
// secret of a rotation, verifies, and the signed envelope holds the topic
// and the attempt. Of the timer's headers only the allow-listed one
// arrives: not Authorization, Cookie or X-Forwarded-For. A topic without
// a target logs its timers. A webhook that always fails dead-letters the
// timer.
func testWebhook(t *testing.T, b *backend) {
	hook := newHookServer(t, hookSecretOld, func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	dead := newHookServer(t, hookSecretNew, func(int) int { return http.StatusBadGateway })
	cfg := filepath.Join(t.TempDir(), "ontime.toml")
	err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
[topics.hooks]
concurrency = 2
retry = { min_delay = "200ms", max_delay = "200ms", max_attempts = 5 }
target = { type = "http", url = %q, secret_env = "E2E_HOOK_SECRET", timeout = "5s", headers = { X-Static = "yes" }, forward_headers = ["x-trace"] }

[topics.doomed]
retry = { min_delay = "50ms", max_delay = "50ms", max_attempts = 2 }
target = { type = "http", url = %q, secret = %q }
`, hook.URL, dead.URL, hookSecretNew)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, []string{"E2E_HOOK_SECRET=" + hookSecretNew + " " + hookSecretOld}, b.storeArgs(t, "--config", cfg)...)
	a := newAPI(t, s)

	r := a.must(201, "POST", "/v1/topics/hooks/timers", map[string]any{
		"id": "h1", "body": map[string]any{"order": 42}, "delay": "0s",
		"headers": map[string]string{
			"X-Trace": "abc", "Authorization": "Bearer stolen", "Cookie": "session=stolen", "X-Forwarded-For": "10.0.0.1",
		},
		"correlation_id": "corr-9",
	})
	var c wire.Created
	r.decode(t, &c)
	waitAPI(t, 15*time.Second, "two webhook calls", func() bool { return len(hook.calls()) >= 2 })
	waitAPI(t, 5*time.Second, "the ack", func() bool { return a.do("GET", "/v1/topics/hooks/timers/h1", nil).status == 404 })
	calls := hook.calls()
	if len(calls) != 2 {
		t.Fatalf("%d webhook calls, want 2", len(calls))
	}
	for i, call := range calls {
		h := call.header
		checks := map[string]string{
			"Ontime-Id": "h1", "Ontime-Topic": "hooks", "Ontime-Attempt": fmt.Sprint(i + 1),
			"Ontime-Correlation-Id": "corr-9", "Content-Type": "application/json",
			"X-Trace": "abc", "X-Static": "yes", "Authorization": "", "Cookie": "", "X-Forwarded-For": "",
		}
		if i == 0 {
			// A retry is due again at its own instant; Ontime-Due-At is
			// the instant this delivery became due.
			checks["Ontime-Due-At"] = c.DueAt.UTC().Format(time.RFC3339Nano)
		}
		for k, v := range checks {
			if h.Get(k) != v {
				t.Errorf("call %d: header %s = %q, want %q", i+1, k, h.Get(k), v)
			}
		}
		if !call.sigOK {
			t.Errorf("call %d: webhook-signature %q does not verify with the old secret", i+1, h.Get("Webhook-Signature"))
		}
		var ev struct {
			Type string
			Data struct {
				Topic, ID string
				Attempt   int
				Body      json.RawMessage
				Headers   map[string]string
			}
		}
		if err := json.Unmarshal(call.body, &ev); err != nil || ev.Type != "ontime.timer.fired" || ev.Data.Topic != "hooks" ||
			ev.Data.ID != "h1" || ev.Data.Attempt != i+1 || string(ev.Data.Body) != `{"order":42}` || ev.Data.Headers["X-Trace"] != "abc" {
			t.Errorf("call %d: envelope %s (%v)", i+1, call.body, err)
		}
	}
	if calls[0].header.Get("Webhook-Id") != calls[1].header.Get("Webhook-Id") {
		t.Errorf("webhook-id changed between attempts: %q, %q", calls[0].header.Get("Webhook-Id"), calls[1].header.Get("Webhook-Id"))
	}
	if gap := calls[1].at.Sub(calls[0].at); gap < 150*time.Millisecond {
		t.Errorf("the retry came %s after the failure; the policy says 200ms", gap)
	}

	// Always failing: two attempts, then a dead letter, listed by the CLI
	// and replayed.
	a.must(201, "POST", "/v1/topics/doomed/timers", map[string]any{"id": "d1", "body": "x", "delay": "0s"})
	waitAPI(t, 15*time.Second, "a dead letter", func() bool {
		var p wire.DeadPage
		a.must(200, "GET", "/v1/topics/doomed/dead", nil).decode(t, &p)
		return len(p.Dead) == 1
	})
	if n := len(dead.calls()); n != 2 {
		t.Errorf("%d calls to the failing webhook, want 2 (max_attempts)", n)
	}
	out := mustCLI(t, s, nil, "dead", "doomed")
	if !strings.Contains(out, "d1") || !strings.Contains(out, "max_attempts") || !strings.Contains(out, "502") {
		t.Errorf("ontime dead:\n%s", out)
	}
	// Replayed, it is due at once, fails its two attempts again and dies
	// again.
	if out := mustCLI(t, s, nil, "dead", "doomed", "--replay", "d1"); !strings.Contains(out, "replayed 1") {
		t.Errorf("ontime dead --replay: %q", out)
	}
	waitAPI(t, 15*time.Second, "the replayed timer's two attempts", func() bool { return len(dead.calls()) >= 4 })
	waitAPI(t, 15*time.Second, "the dead letter again", func() bool {
		var p wire.DeadPage
		a.must(200, "GET", "/v1/topics/doomed/dead", nil).decode(t, &p)
		return len(p.Dead) == 1
	})
	if calls := dead.calls(); len(calls) != 4 || calls[2].header.Get("Ontime-Attempt") != "1" || calls[3].header.Get("Ontime-Attempt") != "2" {
		t.Errorf("%d calls after the replay, want 4 with attempts 1 and 2 again", len(calls))
	}
	if out := mustCLI(t, s, nil, "dead", "doomed", "--replay", "nope", "--json"); !strings.Contains(out, `"count": 0`) {
		t.Errorf("ontime dead --replay of an unknown id: %q", out)
	}
	// --purge (or --replay) without IDs never means all: a usage error
	// that sends nothing; --all is the explicit way.
	for _, op := range []string{"--purge", "--replay"} {
		if _, errOut, code := cli(t, s, nil, "dead", "doomed", op); code != 2 || !strings.Contains(errOut, "--all") {
			t.Errorf("ontime dead doomed %s: exit %d, stderr %q; want 2 naming --all", op, code, errOut)
		}
	}
	if out := mustCLI(t, s, nil, "dead", "doomed", "--json"); !strings.Contains(out, `"d1"`) {
		t.Errorf("the dead letter is gone after --purge without IDs:\n%s", out)
	}
	if out := mustCLI(t, s, nil, "dead", "doomed", "--purge", "--all"); !strings.Contains(out, "purged 1") {
		t.Errorf("ontime dead --purge --all: %q", out)
	}

	// No target configured: the log target writes one line per timer.
	a.must(201, "POST", "/v1/topics/plain/timers", map[string]any{"id": "p1", "body": "to the log", "delay": "0s"})
	s.waitStderr(10*time.Second, `msg="timer fired" topic=plain id=p1`)

	// stats counts the server's deliveries.
	var st wire.Stats
	out = mustCLI(t, s, nil, "stats", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stats --json %q: %v", out, err)
	}
	if st.Delivered < 2 || st.Failed < 3 {
		t.Errorf("stats %+v: want delivered >= 2, failed >= 3", st)
	}
	if err := spec.CheckSchema("Stats", []byte(out)); err != nil {
		t.Errorf("stats: %v", err)
	}
}

// testBadInput sends every bad request of the table to the real server,
// checks status and code (and, through the transport, the document), that
// nothing was stored, and the CLI's exit codes for bad input.
func testBadInput(t *testing.T, b *backend) {
	s := serve(t, nil, b.storeArgs(t, "--max-body-bytes", "1024")...)
	a := newAPI(t, s)
	for _, c := range apitest.BadInputs(1024) {
		var body any
		if c.Body != "" || c.Method == "POST" {
			body = c.Body
		}
		r := a.do(c.Method, c.Path, body)
		if r.status != c.Status || r.code() != c.Code {
			t.Errorf("%s: got %d %s, want %d %s", c.Name, r.status, r.body, c.Status, c.Code)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"schedule", "t", "x"}, 2, "exactly one of --in, --at, --every and --cron"},
		{[]string{"schedule", "t", "x", "--in", "1s", "--at", "2030-01-01T00:00:00Z"}, 2, "exactly one"},
		{[]string{"schedule", "t", "x", "--in", "5 parsecs"}, 7, "invalid_delay"},
		{[]string{"schedule", "t", "x", "--at", "2030-01-01T00:00:00"}, 7, "invalid_at"},
		{[]string{"schedule", "a b", "x", "--in", "1s"}, 7, "invalid_topic"},
		{[]string{"schedule", "t", "x", "--in", "1s", "--header", "novalue"}, 2, "key=value"},
		{[]string{"schedule", "t", "x"}, 2, "exactly one"},
		{[]string{"get", "t", "nope"}, 3, "not_found"},
		{[]string{"cancel", "t", "nope"}, 3, "not_found"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"ls", "--limit", "x"}, 2, "invalid argument"},
		// "." and ".." cannot be URL path segments: refused, never read
		// as another resource (it printed an empty timer and exited 0).
		{[]string{"get", "t", "."}, 7, "invalid_id"},
		{[]string{"get", "t", ".."}, 7, "invalid_id"},
		{[]string{"cancel", "..", "x"}, 7, "invalid_topic"},
		{[]string{"schedule", "t", "x", "--in", "1s", "--id", "."}, 7, "invalid_id"},
		{[]string{"ls", "t", "--cursor", "garbage"}, 7, "invalid_query"},
	} {
		_, errOut, code := cli(t, s, nil, c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("ontime %v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.msg)
		}
	}
	// --version names the build.
	if out, errOut, code := cli(t, nil, nil, "--version"); code != 0 || !strings.HasPrefix(out, "ontime ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("ontime --version: exit %d, stdout %q, stderr %q; want 0 and \"ontime <version> %s …\"", code, out, errOut, runtime.Version())
	}
	// An unreachable server exits 5.
	_, errOut, code := cli(t, nil, nil, "ls", "--server", "http://127.0.0.1:1")
	if code != 5 {
		t.Errorf("unreachable server: exit %d (%s), want 5", code, errOut)
	}
	var topics []wire.TopicStats
	a.must(200, "GET", "/v1/topics", nil).decode(t, &topics)
	if len(topics) != 0 {
		t.Errorf("bad requests stored something: %+v", topics)
	}
	// --if-absent on an id that exists exits 4 and changes nothing.
	mustCLI(t, s, nil, "schedule", "dup", "first", "--in", "1h", "--id", "d")
	before := a.must(200, "GET", "/v1/topics/dup/timers/d", nil).body
	if _, errOut, code := cli(t, s, nil, "schedule", "dup", "second", "--in", "2h", "--id", "d", "--if-absent"); code != 4 || !strings.Contains(errOut, "exists") {
		t.Errorf("schedule --if-absent of an existing id: exit %d, stderr %q; want 4 and \"exists\"", code, errOut)
	}
	if after := a.must(200, "GET", "/v1/topics/dup/timers/d", nil).body; !bytes.Equal(before, after) {
		t.Errorf("schedule --if-absent changed the timer:\n was %s\n now %s", before, after)
	}
	mustCLI(t, s, nil, "schedule", "dup", "other", "--in", "1h", "--id", "e", "--if-absent")
	// The document served is the one the tests check against.
	if r := a.must(200, "GET", "/v1/openapi.json", nil); !bytes.Equal(r.body, server.OpenAPI) {
		t.Error("/v1/openapi.json differs from the embedded document")
	}
}

// testAuth turns bearer tokens on (from the environment) and checks every
// kind of caller, and that no token reaches the log.
func testAuth(t *testing.T, b *backend) {
	s := serve(t, []string{"ONTIME_TOKENS=tok-alpha, tok-beta"}, b.storeArgs(t, "--log-level", "debug")...)
	a := newAPI(t, s)
	for _, p := range []struct{ method, path, body string }{
		{"GET", "/v1/topics", ""}, {"POST", "/messages", `{"message":"x"}`},
		{"GET", "/v1/openapi.json", ""}, {"GET", "/v1/topics/t/watch", ""}, {"GET", "/v1/stats", ""},
		{"POST", "/v1/topics/t/timers", `{"delay":"1s"}`},
	} {
		var body any
		if p.body != "" {
			body = p.body
		}
		if r := a.do(p.method, p.path, body); r.status != 401 || r.code() != "unauthorized" {
			t.Errorf("%s %s without a token: %d %s", p.method, p.path, r.status, r.body)
		}
	}
	a.must(200, "GET", "/healthz", nil)
	a.must(200, "GET", "/readyz", nil)
	a.token = "tok-wrong"
	a.must(401, "GET", "/v1/topics", nil)
	a.token = "tok-beta"
	a.must(201, "POST", "/messages", map[string]any{"message": "authorized", "delay_sec": 3600})

	if _, _, code := cli(t, s, nil, "ls"); code != 6 {
		t.Errorf("ls without a token: exit %d, want 6", code)
	}
	if _, _, code := cli(t, s, nil, "watch", "messages"); code != 6 {
		t.Errorf("watch without a token: exit %d, want 6", code)
	}
	out := mustCLI(t, s, nil, "ls", "--token", "tok-alpha")
	if !strings.Contains(out, "messages") {
		t.Errorf("ls --token:\n%s", out)
	}
	mustCLI(t, s, []string{"ONTIME_TOKEN=tok-beta"}, "schedule", "t", "x", "--in", "1h")
	s.stop(syscall.SIGTERM)
	if log := s.stderr(); strings.Contains(log, "tok-alpha") || strings.Contains(log, "tok-beta") || strings.Contains(log, "tok-wrong") {
		t.Errorf("a token reached the server log:\n%s", log)
	}
}

// testRedisStream delivers a topic to a Redis stream (XADD): on the Redis
// store by default the store's own Redis, on the embedded store the one the
// target names.
func testRedisStream(t *testing.T, b *backend) {
	stream := fmt.Sprintf("e2e-stream-%d", time.Now().UnixNano())
	where := "" // the store's Redis
	if b.redis == nil {
		where = fmt.Sprintf(", redis = %q", b.aux.URL())
	}
	cfg := filepath.Join(t.TempDir(), "ontime.toml")
	err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
[topics.events]
target = { type = "redis-stream", stream = %q, maxlen = 1000%s }
`, stream, where)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, nil, b.storeArgs(t, "--config", cfg)...)
	a := newAPI(t, s)
	a.must(201, "POST", "/v1/topics/events/timers", map[string]any{
		"id": "e1", "body": "to the stream", "delay": "200ms", "headers": map[string]string{"k": "v"},
	})
	rdb := redis.NewClient(&redis.Options{Addr: b.aux.Addr})
	defer rdb.Close()
	var msgs []redis.XMessage
	waitAPI(t, 10*time.Second, "a stream entry", func() bool {
		msgs, err = rdb.XRange(context.Background(), stream, "-", "+").Result()
		return err == nil && len(msgs) > 0
	})
	v := msgs[0].Values
	if v["id"] != "e1" || v["topic"] != "events" || v["body"] != "to the stream" || v["attempt"] != "1" ||
		v["content_type"] != "text/plain" || v["headers"] != `{"k":"v"}` {
		t.Errorf("stream entry %v", v)
	}
	waitAPI(t, 5*time.Second, "the ack", func() bool { return a.do("GET", "/v1/topics/events/timers/e1", nil).status == 404 })
}

// testCompat runs the server on the faststream-redis-timers layout: keys
// are the Python library's, and watch works the same.
func testCompat(t *testing.T, b *backend) {
	topic := fmt.Sprintf("compat%d", time.Now().UnixNano())
	s := serve(t, nil, "--redis", b.redis.URL(), "--redis-layout", "compat", "--serve-topics", topic)
	a := newAPI(t, s)
	w := watch(t, s, nil, topic)
	due := time.Now().Truncate(time.Second).Add(4 * time.Second)
	a.must(201, "POST", "/v1/topics/"+topic+"/timers", map[string]any{"id": "c1", "body": "compat", "at": due.Format(time.RFC3339)})
	rdb := redis.NewClient(&redis.Options{Addr: b.redis.Addr})
	defer rdb.Close()
	ctx := context.Background()
	if n, err := rdb.ZCard(ctx, "timers_timeline:"+topic).Result(); err != nil || n != 1 {
		t.Errorf("ZCARD timers_timeline:%s = %d, %v; want 1", topic, n, err)
	}
	if ok, err := rdb.HExists(ctx, "timers_payloads:"+topic, "c1").Result(); err != nil || !ok {
		t.Errorf("HEXISTS timers_payloads:%s c1 = %v, %v", topic, ok, err)
	}
	checkWatch(t, w, []expect{{"compat", due}})
}

// testCompatTopics: on the compat layout a server delivers only the
// topics it is given ([topics.NAME] and serve_topics), never every
// faststream topic of the database. Timers written in the Python layout
// before the server starts: the configured topic's and the serve_topics
// match's are delivered; the other topic's stays for its Python consumer,
// gets no worker (not even when the API schedules on it) and cannot be
// watched.
func testCompatTopics(t *testing.T, b *backend) {
	n := time.Now().UnixNano()
	mine, served, foreign := fmt.Sprintf("mine%d", n), fmt.Sprintf("py%d.served", n), fmt.Sprintf("py%d.foreign", n)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: b.redis.Addr})
	defer rdb.Close()
	drv, err := ontimeredis.New(rdb, &ontimeredis.Options{Layout: ontimeredis.Compatible})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	pub, err := ontime.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{mine, served, foreign} {
		if _, err := pub.Publish(ctx, topic, "from python", ontime.WithID("p1")); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "ontime.toml")
	text := fmt.Sprintf("redis = %q\nredis_layout = \"compat\"\ndiscover_interval = \"50ms\"\nserve_topics = [\"py%d.serv*\"]\n[topics.%q]\n", b.redis.URL(), n, mine)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, nil, "--config", cfg)
	a := newAPI(t, s)
	s.waitStderr(15*time.Second, `msg="timer fired" topic=`+mine+" ")
	s.waitStderr(15*time.Second, `msg="timer fired" topic=`+served+" ")
	workers := func() int {
		var st wire.Stats
		a.must(200, "GET", "/v1/stats", nil).decode(t, &st)
		return st.Workers
	}
	// Discovery found the served topic; in the same pass it would have
	// started the foreign one too.
	if w := workers(); w != 2 {
		t.Errorf("%d workers, want 2 (%s, %s)", w, mine, served)
	}
	a.must(201, "POST", "/v1/topics/"+foreign+"/timers", map[string]any{"id": "p2", "body": "via the API", "delay": "0s"})
	if w := workers(); w != 2 {
		t.Errorf("%d workers after a publish on %s, want 2", w, foreign)
	}
	if r := a.do("GET", "/v1/topics/"+foreign+"/watch", nil); r.status != 403 || r.code() != "topic_not_served" {
		t.Errorf("watch %s: %d %s, want 403 topic_not_served", foreign, r.status, r.body)
	}
	if _, errOut, code := cli(t, s, nil, "watch", foreign); code != 7 || !strings.Contains(errOut, "topic_not_served") {
		t.Errorf("ontime watch %s: exit %d, stderr %q; want 7 and topic_not_served", foreign, code, errOut)
	}
	if n, err := rdb.ZCard(ctx, "timers_timeline:"+foreign).Result(); err != nil || n != 2 {
		t.Errorf("ZCARD timers_timeline:%s = %d, %v; want 2: its timers are the Python consumer's", foreign, n, err)
	}
	if strings.Contains(s.stderr(), "topic="+foreign+" ") {
		t.Errorf("the server delivered %s:\n%s", foreign, s.stderr())
	}
}

// testCLIDirect runs the CLI straight against Redis, with no server: the
// verbs schedule, get, ls, cancel and stats work on the store, and `watch
// --redis` is a worker that prints each timer at its second and acks it.
func testCLIDirect(t *testing.T, b *backend) {
	prefix := fmt.Sprintf("direct%d:", time.Now().UnixNano())
	flags := []string{"--redis", b.redis.URL(), "--redis-prefix", prefix}
	run := func(args ...string) string { t.Helper(); return mustCLI(t, nil, nil, append(args, flags...)...) }
	const topic = "direct"
	w := start(t, nil, append([]string{"watch", topic}, flags...)...)
	w.waitStderr(30*time.Second, "watching "+topic)

	// Every CLI call below is a process start (slow under -race on a busy
	// machine), so the two timers are due well after the checks that need
	// them pending; ls runs right after the schedules.
	base := time.Now().Truncate(time.Second).Add(10 * time.Second)
	run("schedule", topic, "second", "--at", base.Add(time.Second).Format(time.RFC3339), "--id", "b")
	run("schedule", topic, "first", "--at", base.Format(time.RFC3339), "--id", "a", "--header", "k=v")
	run("schedule", topic, "never", "--in", "1h", "--id", "gone")
	if out := run("ls", topic); !strings.Contains(out, "first") || !strings.Contains(out, "second") || !strings.Contains(out, "never") {
		t.Errorf("ls printed (%s before the first is due):\n%s", time.Until(base).Round(time.Millisecond), out)
	}
	if out := run("get", topic, "a", "--json"); !strings.Contains(out, `"k":"v"`) && !strings.Contains(out, `"k": "v"`) {
		t.Errorf("get --json printed %q, want the header k=v", out)
	}
	run("cancel", topic, "gone")
	if _, _, code := cli(t, nil, nil, append([]string{"get", topic, "gone"}, flags...)...); code != 3 {
		t.Errorf("get of a cancelled timer: exit %d, want 3", code)
	}
	checkWatch(t, w, []expect{{"first", base}, {"second", base.Add(time.Second)}})
	// Acked by the watcher: nothing left.
	var out string
	wait.For(t, 30*time.Second, func() bool { out = run("ls", topic, "--json"); return !strings.Contains(out, `"id"`) },
		"no timer left after watch printed them:\n%s", func() string { return out })
	if code := w.stop(syscall.SIGINT); code != 0 {
		t.Errorf("watch --redis exited %d after SIGINT; stderr:\n%s", code, w.stderr())
	}
}

// testWatchReconnect: `ontime watch` outlives a server restart. The server
// stops (SIGTERM), the watcher keeps retrying, a new server starts on the
// same address, and the watcher, reconnected by itself, prints a timer
// scheduled after the restart at its second.
func testWatchReconnect(t *testing.T, b *backend) {
	args := b.storeArgs(t)
	s := serve(t, nil, args...)
	const topic = "reconnect"
	w := watch(t, s, nil, topic)
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM; stderr:\n%s", code, s.stderr())
	}
	w.waitStderr(10*time.Second, "reconnecting in")
	addr := strings.TrimPrefix(s.URL, "http://")
	s = serve(t, nil, append(args, "--listen", addr)...)
	if s.URL != "http://"+addr {
		t.Fatalf("the new server listens on %s, want %s", s.URL, addr)
	}
	if !w.waitFor(15*time.Second, func() bool { return strings.Count(w.errBuf.String(), "watching "+topic+" on") >= 2 }) {
		t.Fatalf("the watcher did not reconnect; stderr:\n%s", w.stderr())
	}
	a := newAPI(t, s)
	due := time.Now().Truncate(time.Second).Add(3 * time.Second)
	a.must(201, "POST", "/v1/topics/"+topic+"/timers", map[string]any{"id": "r1", "body": "after the restart", "at": due.Format(time.RFC3339)})
	checkWatch(t, w, []expect{{"after the restart", due}})
	if w.exited() {
		t.Errorf("the watcher exited; stderr:\n%s", w.stderr())
	}
}

// testRedisDown runs a server on a redis-server of its own and stops that
// redis-server: /readyz answers 503 {"status":"unavailable"} with a
// request id (and /healthz still 200), the API answers 503, the CLI exits
// 5, and the server keeps running.
func testRedisDown(t *testing.T) {
	rs := redistest.StartServer(t)
	s := serve(t, nil, "--redis", rs.URL(), "--log-format", "json")
	a := newAPI(t, s)
	a.must(200, "GET", "/readyz", nil)
	mustCLI(t, s, nil, "schedule", "t", "x", "--in", "1h")

	rs.Stop()
	if r := a.must(503, "GET", "/readyz", nil); !strings.HasPrefix(string(r.body), `{"status":"unavailable","request_id":"`) || strings.Contains(string(r.body), rs.Addr) {
		t.Errorf("/readyz with Redis down: %s; want unavailable and a request id, not the store's error", r.body)
	}
	a.must(200, "GET", "/healthz", nil)
	if r := a.must(503, "POST", "/v1/topics/t/timers", map[string]any{"delay": "1s"}); r.code() != "store_unavailable" {
		t.Errorf("publish with Redis down: %s", r.body)
	}
	for _, args := range [][]string{{"ls"}, {"schedule", "t", "x", "--in", "1s"}, {"get", "t", "x"}} {
		if _, errOut, code := cli(t, s, nil, args...); code != 5 || !strings.Contains(errOut, "store_unavailable") {
			t.Errorf("ontime %v with Redis down: exit %d, stderr %q; want 5 and store_unavailable", args, code, errOut)
		}
	}
	if s.exited() {
		t.Fatalf("serve exited when Redis went down; stderr:\n%s", s.stderr())
	}
	// go-redis's own lines (its pool cannot dial) go through the server's
	// logger too: with --log-format json every line is a JSON object.
	s.waitStderr(10*time.Second, `"component":"go-redis"`)
	for _, l := range strings.Split(strings.TrimSpace(s.stderr()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Errorf("with --log-format json, a log line is not JSON: %q", l)
		}
	}
}
