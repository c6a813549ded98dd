package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver"
)

// TestBadInput sends every kind of bad request the API must refuse and
// checks the status, the error code, and that nothing was stored.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{maxBody: 1024})
	for _, c := range apitest.BadInputs(1024) {
		var body any
		if c.Body != "" || c.Method == "POST" {
			body = c.Body
		}
		r := e.do(c.Method, c.Path, body)
		if r.status != c.Status || r.code() != c.Code {
			t.Errorf("%s: got %d %s, want %d %s", c.Name, r.status, r.body, c.Status, c.Code)
		}
		var eb wire.Error
		if err := json.Unmarshal(r.body, &eb); err != nil || eb.Error.Message == "" {
			t.Errorf("%s: error body %q has no message", c.Name, r.body)
		}
	}
	// Nothing stored.
	var topics []wire.TopicStats
	r := e.do("GET", "/v1/topics", nil)
	e.want(r, 200, "")
	r.json(t, &topics)
	if len(topics) != 0 {
		t.Errorf("bad requests stored something: %s", r.body)
	}
}

func TestTimerLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)

	// Text body, with headers, a chosen id and an absolute time.
	r := e.do("POST", "/v1/topics/orders/timers", map[string]any{
		"id": "o/1 ü", "body": "hello", "at": at.Format(time.RFC3339Nano),
		"headers": map[string]string{"k": "v"}, "correlation_id": "c-1",
	})
	e.want(r, 201, "")
	var created wire.Created
	r.json(t, &created)
	if created.ID != "o/1 ü" || created.Topic != "orders" || !created.DueAt.Equal(at) {
		t.Fatalf("created %+v, want id o/1 ü due %s", created, at)
	}
	if loc := r.header.Get("Location"); loc != "/v1/topics/orders/timers/o%2F1%20%C3%BC" {
		t.Errorf("Location %q", loc)
	}
	r = e.do("GET", "/v1/topics/orders/timers/"+url.PathEscape("o/1 ü"), nil)
	e.want(r, 200, "")
	var got wire.Timer
	r.json(t, &got)
	if string(got.Body) != `"hello"` || got.BodyBase64 != nil || got.State != "scheduled" || got.Headers["k"] != "v" ||
		got.CorrelationID != "c-1" || !got.DueAt.Equal(at) || got.ContentType != "text/plain" {
		t.Errorf("get: %s", r.body)
	}

	// JSON and byte bodies round-trip.
	r = e.do("POST", "/v1/topics/orders/timers", `{"id":"j","body":{"n": 1, "s": [true, null]},"delay":"2h"}`)
	e.want(r, 201, "")
	r = e.do("GET", "/v1/topics/orders/timers/j", nil)
	r.json(t, &got)
	if string(got.Body) != `{"n":1,"s":[true,null]}` || got.ContentType != "application/json" {
		t.Errorf("json body: %s", r.body)
	}
	raw := []byte{0, 1, 2, 255}
	r = e.do("POST", "/v1/topics/orders/timers", map[string]any{"id": "b", "body_base64": base64.StdEncoding.EncodeToString(raw), "delay": "3h"})
	e.want(r, 201, "")
	r = e.do("GET", "/v1/topics/orders/timers/b", nil)
	r.json(t, &got)
	if got.BodyBase64 == nil || *got.BodyBase64 != base64.StdEncoding.EncodeToString(raw) || got.Body != nil {
		t.Errorf("bytes body: %s", r.body)
	}

	// if_absent refuses an existing id and changes nothing; a plain publish
	// reschedules it.
	r = e.do("POST", "/v1/topics/orders/timers", `{"id":"j","body":"other","delay":"1s","if_absent":true}`)
	e.want(r, 409, "exists")
	r = e.do("GET", "/v1/topics/orders/timers/j", nil)
	r.json(t, &got)
	if string(got.Body) != `{"n":1,"s":[true,null]}` {
		t.Errorf("if_absent changed the timer: %s", r.body)
	}
	r = e.do("POST", "/v1/topics/orders/timers", `{"id":"j","body":"moved","delay":"30m"}`)
	e.want(r, 201, "")
	r = e.do("GET", "/v1/topics/orders/timers/j", nil)
	r.json(t, &got)
	if string(got.Body) != `"moved"` || time.Until(got.DueAt) > 31*time.Minute {
		t.Errorf("reschedule: %s", r.body)
	}

	// The list is ordered by due time and pages.
	var ids []string
	cursor := ""
	for {
		path := "/v1/topics/orders/timers?limit=2"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r = e.do("GET", path, nil)
		e.want(r, 200, "")
		var page wire.TimerPage
		r.json(t, &page)
		for _, tm := range page.Timers {
			ids = append(ids, tm.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if fmt.Sprint(ids) != "[j o/1 ü b]" {
		t.Errorf("list order %v, want [j o/1 ü b]", ids)
	}
	r = e.do("GET", "/v1/topics/orders/timers?before="+url.QueryEscape(time.Now().Add(90*time.Minute).Format(time.RFC3339)), nil)
	var page wire.TimerPage
	r.json(t, &page)
	if len(page.Timers) != 2 {
		t.Errorf("before: %d timers, want 2", len(page.Timers))
	}

	// Batch: per-item results; with if_absent, existing ids answer 409.
	r = e.do("POST", "/v1/topics/orders/timers:batch", `[{"id":"n1","delay":"1h","if_absent":true},{"id":"j","delay":"1h","if_absent":true},{"delay":"1h","if_absent":true}]`)
	e.want(r, 200, "")
	var br wire.BatchResult
	r.json(t, &br)
	if len(br.Results) != 3 || br.Results[0].Status != 201 || br.Results[1].Status != 409 || br.Results[1].Error.Code != "exists" ||
		br.Results[2].Status != 201 || br.Results[2].ID == "" || br.Results[2].DueAt == nil {
		t.Errorf("batch: %s", r.body)
	}

	// Topics and stats count them.
	r = e.do("GET", "/v1/topics", nil)
	var topics []wire.TopicStats
	r.json(t, &topics)
	if len(topics) != 1 || topics[0].Topic != "orders" || topics[0].Scheduled != 5 {
		t.Errorf("topics: %s", r.body)
	}
	r = e.do("GET", "/v1/stats", nil)
	e.want(r, 200, "")
	var st wire.Stats
	r.json(t, &st)
	if st.Scheduled != 5 || st.Topics != 1 || st.Store != "embedded" {
		t.Errorf("stats: %s", r.body)
	}

	// Cancel.
	r = e.do("DELETE", "/v1/topics/orders/timers/j", nil)
	e.want(r, 204, "")
	r = e.do("GET", "/v1/topics/orders/timers/j", nil)
	e.want(r, 404, "not_found")
	r = e.do("DELETE", "/v1/topics/orders/timers/j", nil)
	e.want(r, 404, "not_found")

	// Health, readiness and the document itself.
	e.want(e.do("GET", "/healthz", nil), 200, "")
	e.want(e.do("GET", "/readyz", nil), 200, "")
	r = e.do("GET", "/v1/openapi.json", nil)
	e.want(r, 200, "")
	if !json.Valid(r.body) {
		t.Error("openapi.json is not JSON")
	}
}

func TestSimpleAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	before := time.Now()
	r := e.do("POST", "/messages", `{"message":"tea is ready","delay_sec":120}`)
	e.want(r, 201, "")
	var out wire.MessageOut
	r.json(t, &out)
	want := before.Add(120 * time.Second).Unix()
	if out.ID == "" || out.ScheduledFor < want-1 || out.ScheduledFor > want+1 {
		t.Errorf("got %+v, want scheduled_for about %d", out, want)
	}
	r = e.do("GET", "/v1/topics/messages/timers/"+url.PathEscape(out.ID), nil)
	e.want(r, 200, "")
	var tm wire.Timer
	r.json(t, &tm)
	if string(tm.Body) != `"tea is ready"` || tm.DueAt.Unix() != out.ScheduledFor {
		t.Errorf("stored %s", r.body)
	}
	// delay_sec may be left out (now) and may have a fraction.
	e.want(e.do("POST", "/messages", `{"message":"now"}`), 201, "")
	e.want(e.do("POST", "/messages", `{"message":"soon","delay_sec":0.5}`), 201, "")
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tokens: []string{"s3cret", "other"}})
	r := e.do("GET", "/v1/topics", nil)
	e.want(r, 401, "unauthorized")
	if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("no WWW-Authenticate: %v", r.header)
	}
	e.want(e.do("GET", "/v1/topics", nil, "Authorization", "Bearer wrong"), 401, "unauthorized")
	e.want(e.do("GET", "/v1/topics", nil, "Authorization", "s3cret"), 401, "unauthorized")
	e.want(e.do("POST", "/messages", `{"message":"x"}`), 401, "unauthorized")
	e.want(e.do("GET", "/v1/openapi.json", nil), 401, "unauthorized")
	e.want(e.do("GET", "/v1/topics", nil, "Authorization", "Bearer s3cret"), 200, "")
	e.want(e.do("GET", "/v1/topics", nil, "Authorization", "Bearer other"), 200, "")
	// The scheme is case-insensitive (RFC 9110, 11.1); one or more spaces
	// follow it. Only the token itself must match exactly.
	for _, h := range []string{"bearer s3cret", "BEARER s3cret", "bEaReR other", "Bearer   s3cret"} {
		e.want(e.do("GET", "/v1/topics", nil, "Authorization", h), 200, "")
	}
	for _, h := range []string{"Bearers3cret", "Basic s3cret", "Bearer S3CRET", "Bearer", "Bearer "} {
		e.want(e.do("GET", "/v1/topics", nil, "Authorization", h), 401, "unauthorized")
	}
	e.want(e.do("GET", "/healthz", nil), 200, "")
	e.want(e.do("GET", "/readyz", nil), 200, "")
	// Nothing was stored by the refused publish.
	n, err := e.client.Count(t.Context(), "messages")
	if err != nil || n.Scheduled != 0 {
		t.Errorf("count %+v %v", n, err)
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	// A webhook that always fails, one attempt allowed: the timer dies at
	// once.
	hook := newHook(t, func(int) int { return http.StatusInternalServerError })
	e := newEnv(t, envOpts{cfg: hookConfig("doomed", hook.URL, "", 1)})
	e.want(e.do("POST", "/v1/topics/doomed/timers", `{"id":"d1","body":"x","delay":"0s"}`), 201, "")
	var page wire.DeadPage
	wait.For(t, 10*time.Second, func() bool {
		r := e.do("GET", "/v1/topics/doomed/dead", nil)
		e.want(r, 200, "")
		r.json(t, &page)
		return len(page.Dead) == 1
	}, "a dead letter")
	d := page.Dead[0]
	if d.ID != "d1" || d.Reason != "max_attempts" || !strings.Contains(d.LastError, "500") || string(d.Body) != `"x"` {
		t.Errorf("dead letter %+v", d)
	}
	// One dead letter by id, whole; an unknown id is 404, a bad one 400.
	var one wire.DeadLetter
	r := e.do("GET", "/v1/topics/doomed/dead/d1", nil)
	e.want(r, 200, "")
	r.json(t, &one)
	if one.ID != "d1" || one.Reason != "max_attempts" || string(one.Body) != `"x"` || one.BodyTruncated {
		t.Errorf("GET …/dead/d1: %+v", one)
	}
	e.want(e.do("GET", "/v1/topics/doomed/dead/nope", nil), 404, "not_found")
	e.want(e.do("GET", "/v1/topics/doomed/dead/%2E%2E", nil), 400, "invalid_id")
	e.want(e.do("POST", "/v1/topics/doomed/dead/d1", nil), 405, "method_not_allowed")
	r = e.do("POST", "/v1/topics/doomed/dead:purge", `{"ids":["nope"]}`)
	var n wire.Count
	r.json(t, &n)
	if n.Count != 0 {
		t.Errorf("purged %d unknown ids", n.Count)
	}
	// An empty or missing list never means "all": each of these is
	// refused and the dead letter stays.
	for _, op := range []string{"dead:replay", "dead:purge"} {
		for _, c := range []struct{ body, code string }{
			{"", "missing_ids"},
			{`{}`, "missing_ids"},
			{`{"ids": null}`, "missing_ids"},
			{`{"ids": []}`, "missing_ids"},
			{`{"all": false}`, "missing_ids"},
			{`{"ids": [], "all": false}`, "missing_ids"},
			{`{"ids": ["d1"], "all": true}`, "ids_and_all"},
			{`{"ids": [""]}`, "invalid_id"},
		} {
			var body any
			if c.body != "" {
				body = c.body
			}
			e.want(e.do("POST", "/v1/topics/doomed/"+op, body), 400, c.code)
		}
	}
	r = e.do("GET", "/v1/topics/doomed/dead", nil)
	r.json(t, &page)
	if len(page.Dead) != 1 {
		t.Fatalf("refused replays and purges changed the dead letters: %s", r.body)
	}
	// Replay: it fails again and dies again.
	r = e.do("POST", "/v1/topics/doomed/dead:replay", `{"all": true}`)
	e.want(r, 200, "")
	r.json(t, &n)
	if n.Count != 1 {
		t.Errorf("replayed %d, want 1", n.Count)
	}
	wait.For(t, 10*time.Second, func() bool { return hook.calls() >= 2 }, "a second attempt")
	wait.For(t, 10*time.Second, func() bool {
		r := e.do("GET", "/v1/topics/doomed/dead", nil)
		r.json(t, &page)
		return len(page.Dead) == 1
	}, "the dead letter again")
	r = e.do("POST", "/v1/topics/doomed/dead:purge", `{"all": true}`)
	e.want(r, 200, "")
	r.json(t, &n)
	if n.Count != 1 {
		t.Errorf("purged %d, want 1", n.Count)
	}
}

// TestHeaderNames: header names must be HTTP field names (RFC 9110 tokens)
// and values free of control characters other than tab; the refusal names
// the header. Valid ones, tabs and UTF-8 values included, are stored as
// given.
func TestHeaderNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	for _, c := range []struct {
		headers map[string]string
		name    string
	}{
		{map[string]string{"ok": "1", "a b": "x"}, `"a b"`},
		{map[string]string{"x:y": "x"}, `"x:y"`},
		{map[string]string{"café": "x"}, `"café"`},
		{map[string]string{"(paren)": "x"}, `"(paren)"`},
		{map[string]string{"ok": "1", "X-Crlf": "a\r\nInjected: 1"}, `"X-Crlf"`},
		{map[string]string{"X-Nul": "a\x00b"}, `"X-Nul"`},
		{map[string]string{"X-Del": "a\x7fb"}, `"X-Del"`},
		{map[string]string{"X-Bell": "\a"}, `"X-Bell"`},
	} {
		r := e.do("POST", "/v1/topics/h/timers", map[string]any{"delay": "1h", "headers": c.headers})
		e.want(r, 400, "invalid_header")
		if !strings.Contains(string(r.body), strings.ReplaceAll(c.name, `"`, `\"`)) {
			t.Errorf("%v: the error does not name %s: %s", c.headers, c.name, r.body)
		}
	}
	good := map[string]string{"X-Tabbed": "a\tb", "X-Utf8": "café ☕", "!#$%&'*+-.^_`|~09azAZ": "v", "empty": ""}
	e.want(e.do("POST", "/v1/topics/h/timers", map[string]any{"id": "g", "delay": "1h", "headers": good}), 201, "")
	var tm wire.Timer
	r := e.do("GET", "/v1/topics/h/timers/g", nil)
	e.want(r, 200, "")
	r.json(t, &tm)
	if fmt.Sprint(tm.Headers) != fmt.Sprint(good) {
		t.Errorf("headers %v, want %v", tm.Headers, good)
	}
	n, err := e.client.Count(t.Context(), "h")
	if err != nil || n.Scheduled != 1 {
		t.Errorf("count %+v, %v: want only the valid timer", n, err)
	}
}

// scheduleCounter counts the Schedule calls that reach the store.
type scheduleCounter struct {
	ontimedriver.Driver
	calls atomic.Int64
}

// Unwrap returns the counted driver (its optional interfaces stay in view).
func (c *scheduleCounter) Unwrap() ontimedriver.Driver { return c.Driver }

func (c *scheduleCounter) Schedule(ctx context.Context, topic string, timers []ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	c.calls.Add(1)
	return c.Driver.Schedule(ctx, topic, timers, mode)
}

// TestBatchOneWrite: a batch is one store call, so it is stored all
// together or not at all: server.MaxBatch timers go in one Schedule call;
// one more, or a batch mixing if_absent modes (two calls), is refused
// before anything is written.
func TestBatchOneWrite(t *testing.T) {
	t.Parallel()
	var counter *scheduleCounter
	e := newEnv(t, envOpts{wrap: func(d ontimedriver.Driver) ontimedriver.Driver {
		counter = &scheduleCounter{Driver: d}
		return counter
	}})
	items := func(n int, extra string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"id":"b%d","delay":"1h"%s}`, i, extra)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}

	r := e.do("POST", "/v1/topics/big/timers:batch", items(server.MaxBatch+1, ""))
	e.want(r, 400, "batch_too_large")
	if !strings.Contains(string(r.body), fmt.Sprint(server.MaxBatch)) {
		t.Errorf("the error does not give the limit: %s", r.body)
	}
	mixed := `[{"id":"m0","delay":"1h"},{"id":"m1","delay":"1h","if_absent":true}]`
	r = e.do("POST", "/v1/topics/big/timers:batch", mixed)
	e.want(r, 400, "invalid_batch")
	if !strings.Contains(string(r.body), "timer 1") {
		t.Errorf("the error does not name the item: %s", r.body)
	}
	if n := counter.calls.Load(); n != 0 {
		t.Fatalf("refused batches made %d store calls", n)
	}
	if n, err := e.client.Count(t.Context(), "big"); err != nil || n.Scheduled != 0 {
		t.Fatalf("refused batches stored %+v (%v)", n, err)
	}

	r = e.do("POST", "/v1/topics/big/timers:batch", items(server.MaxBatch, ""))
	e.want(r, 200, "")
	var br wire.BatchResult
	r.json(t, &br)
	if len(br.Results) != server.MaxBatch || br.Results[server.MaxBatch-1].ID != fmt.Sprint("b", server.MaxBatch-1) {
		t.Errorf("%d results", len(br.Results))
	}
	if n := counter.calls.Load(); n != 1 {
		t.Errorf("a batch of %d made %d store calls, want 1", server.MaxBatch, n)
	}
	if n, err := e.client.Count(t.Context(), "big"); err != nil || n.Scheduled != int64(server.MaxBatch) {
		t.Errorf("stored %+v (%v), want %d", n, err, server.MaxBatch)
	}
	// The same ids again with if_absent: one call, every item 409.
	r = e.do("POST", "/v1/topics/big/timers:batch", items(server.MaxBatch, `,"if_absent":true`))
	e.want(r, 200, "")
	r.json(t, &br)
	for i, it := range br.Results {
		if it.Status != 409 || it.Error == nil || it.Error.Code != "exists" {
			t.Fatalf("item %d: %+v, want 409 exists", i, it)
		}
	}
	if n := counter.calls.Load(); n != 2 {
		t.Errorf("%d store calls after two batches, want 2", n)
	}
}
