package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
)

// concrete fills a path template with topic "t" and id "x".
func concrete(tpl string) string {
	return strings.NewReplacer("{topic}", "t", "{id}", "x").Replace(tpl)
}

// validBody is a request body each operation accepts (nil: none).
var validBody = map[string]any{
	"POST /v1/topics/{topic}/timers":               `{"delay":"1s"}`,
	"POST /v1/topics/{topic}/timers:batch":         `[{"delay":"1s"}]`,
	"POST /v1/topics/{topic}/timers:cancel":        `{"ids":["x"]}`,
	"POST /messages":                               `{"message":"x"}`,
	"POST /v1/topics/{topic}/dead:replay":          `{"all":true}`,
	"POST /v1/topics/{topic}/dead:purge":           `{"all":true}`,
	"POST /v1/topics/{topic}/watch:ack":            `{"ids":["e-1"]}`,
	"POST /v1/topics/{topic}/schedules":            `{"id":"s","every":"1h"}`,
	"POST /v1/topics/{topic}/timers/{id}/backfill": `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z"}`,
}

// storeDown checks that with the store unreachable every operation that
// talks to it answers 503 store_unavailable, /readyz 503
// {"status":"unavailable"}, and /healthz still 200; that no answer holds
// the store's own words (leak: an address, "connection refused", "driver
// closed"), and that each answer's request id (header and body) names the
// log line that has them.
func storeDown(t *testing.T, e *env, leak ...string) {
	t.Helper()
	check := func(key string, r *response, rid string) {
		t.Helper()
		for _, l := range leak {
			if strings.Contains(string(r.body), l) {
				t.Errorf("%s with the store down: the answer %s holds the store's error (%q)", key, r.body, l)
			}
		}
		if rid == "" || r.header.Get("X-Request-Id") != rid {
			t.Errorf("%s: request id %q in the body, %q in X-Request-Id", key, rid, r.header.Get("X-Request-Id"))
			return
		}
		logged := false
		for line := range strings.SplitSeq(e.logs.String(), "\n") {
			if strings.Contains(line, `"request_id":"`+rid+`"`) && strings.Contains(line, leak[0]) {
				logged = true
			}
		}
		if !logged {
			t.Errorf("%s: no log line with request id %s and the store's error", key, rid)
		}
	}
	for _, o := range spec.Operations() {
		key := o.Method + " " + o.Path
		if !slices.Contains(o.Statuses, http.StatusServiceUnavailable) || key == "GET /v1/topics/{topic}/watch" || key == "POST /v1/topics/{topic}/watch:ack" {
			// Watch does not touch the store to connect; its 503 is
			// shutting_down (TestWatch). Confirmations answer before the
			// store is told; their 503 is overloaded (TestInflight...).
			continue
		}
		r := e.do(o.Method, concrete(o.Path), validBody[key])
		if key == "GET /readyz" {
			var st wire.Status
			r.json(t, &st)
			if r.status != 503 || st.Status != "unavailable" || st.Error != "" {
				t.Errorf("%s with the store down: %d %s, want 503 {\"status\":\"unavailable\"} and no error", key, r.status, r.body)
			}
			check(key, r, st.RequestID)
			continue
		}
		var er wire.Error
		r.json(t, &er)
		if r.status != 503 || er.Error.Code != "store_unavailable" {
			t.Errorf("%s with the store down: %d %s, want 503 store_unavailable", key, r.status, r.body)
		}
		check(key, r, er.Error.RequestID)
	}
	e.want(e.do("GET", "/healthz", nil), 200, "")
}

// TestStoreDown: the embedded store closed under the API, and a Redis
// store whose redis-server was stopped.
func TestStoreDown(t *testing.T) {
	t.Parallel()
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{noWorkers: true})
		e.want(e.do("GET", "/readyz", nil), 200, "")
		if err := e.drv.Close(); err != nil {
			t.Fatal(err)
		}
		storeDown(t, e, "closed")
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		rs := redistest.StartServer(t)
		// No command retries: each call fails after the dialer's own.
		e := newEnv(t, envOpts{noWorkers: true, redis: rs.URL() + "?max_retries=-1"})
		e.want(e.do("GET", "/readyz", nil), 200, "")
		e.want(e.do("POST", "/v1/topics/t/timers", `{"delay":"1h"}`), 201, "")
		rs.Stop()
		_, port, _ := strings.Cut(rs.Addr, ":")
		storeDown(t, e, port, "refused")
	})
}

// sse reads server-sent events off a stream.
type sse struct {
	rd *bufio.Reader
}

// next returns the next event's id, type and data, skipping comments; a
// read error fails the test.
func (s *sse) next(t *testing.T) (id, event, data string) {
	t.Helper()
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if event != "" {
				return id, event, data
			}
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// openWatch opens a watch stream and reads its first line.
func openWatch(t *testing.T, ctx context.Context, e *env, query string) *sse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/topics/w/watch"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("watch: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || line != ": watching w\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	return &sse{rd: rd}
}

// TestWatch: a stream with ack=explicit takes the topic's timers: each
// comes as an "event: timer" with an event id and data that matches the
// Event schema, and is acked in the store only once POST watch:ack
// confirms that id (a second confirmation is unknown). A plain stream (a
// curl -N) gets a copy of the same delivery and takes nothing. Without
// workers the endpoints answer 501; while the server shuts down, 503.
func TestWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tap := openWatch(t, ctx, e, "")
	take := openWatch(t, ctx, e, "?ack=explicit")
	wait.For(t, 10*time.Second, func() bool { return e.disp.Counters().Watchers == 2 }, "both watchers")
	if _, err := e.client.Publish(t.Context(), "w", map[string]int{"n": 1}, ontime.WithID("w1"), ontime.WithHeader("k", "v")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*sse{take, tap} {
		id, event, data := s.next(t)
		if event != "timer" || id == "" || id == "w1" {
			t.Errorf("event %q id %q: want a timer event with an event id of its own", event, id)
		}
		if err := spec.CheckSchema("Event", []byte(data)); err != nil {
			t.Errorf("data %s: %v", data, err)
		}
		var ev wire.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.ID != "w1" || string(ev.Body) != `{"n":1}` || ev.Headers["k"] != "v" || ev.Attempt != 1 {
			t.Errorf("event %s (%v)", data, err)
		}
		if s == take {
			// Sent, not confirmed: still in the store, leased.
			if n, err := e.client.Count(t.Context(), "w"); err != nil || n.Leased != 1 {
				t.Errorf("before the confirmation: %+v, %v; want the timer leased", n, err)
			}
			if e.disp.Counters().Delivered != 0 {
				t.Error("counted as delivered before the confirmation")
			}
			var res wire.WatchAcked
			r := e.do("POST", "/v1/topics/w/watch:ack", wire.WatchAck{IDs: []string{"nope", id}})
			e.want(r, 200, "")
			r.json(t, &res)
			if res.Acked != 1 || len(res.Unknown) != 1 || res.Unknown[0] != "nope" {
				t.Errorf("watch:ack: %+v", res)
			}
			r = e.do("POST", "/v1/topics/w/watch:ack", wire.WatchAck{IDs: []string{id}})
			e.want(r, 200, "")
			r.json(t, &res)
			if res.Acked != 0 || len(res.Unknown) != 1 {
				t.Errorf("a second confirmation: %+v, want unknown", res)
			}
		}
	}
	wait.For(t, 10*time.Second, func() bool {
		n, err := e.client.Count(t.Context(), "w")
		return err == nil && n.Scheduled+n.Leased == 0
	}, "the ack")
	cancel()

	// While the server shuts down.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := e.disp.Shutdown(ctx2); err != nil {
		t.Fatal(err)
	}
	e.want(e.do("GET", "/v1/topics/w/watch", nil), 503, "shutting_down")

	// An API without workers (the CLI's --redis mode).
	e2 := newEnv(t, envOpts{noWorkers: true})
	e2.want(e2.do("GET", "/v1/topics/w/watch", nil), 501, "watch_unavailable")
	e2.want(e2.do("POST", "/v1/topics/w/watch:ack", `{"ids":["x"]}`), 501, "watch_unavailable")
}

// TestRequestTooLarge: the endpoints that take many timers or ids refuse a
// request over the batch cap (16 MiB) with 413, storing nothing.
func TestRequestTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	huge := strings.Repeat("x", 16<<20)
	for _, c := range []struct{ path, body string }{
		{"/v1/topics/t/timers:batch", `[{"delay":"1s","body":"` + huge + `"}]`},
		{"/v1/topics/t/timers:cancel", `{"ids":["` + huge + `"]}`},
		{"/v1/topics/t/dead:replay", `{"ids":["` + huge + `"]}`},
		{"/v1/topics/t/dead:purge", `{"ids":["` + huge + `"]}`},
	} {
		e.want(e.do("POST", c.path, c.body), 413, "request_too_large")
	}
	if n, err := e.client.Count(t.Context(), "t"); err != nil || n.Scheduled != 0 {
		t.Errorf("count %+v, %v", n, err)
	}
}
