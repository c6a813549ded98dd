package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/store"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver"
)

// roundTrips counts the round trips a go-redis client makes: each command
// sent alone, and each pipeline (sent at once, answered at once).
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// noCounter hides the driver's TopicCounter: the API then counts one
// topic per call, as it did before the capability (the baseline).
type noCounter struct{ ontimedriver.Driver }

// redisAPI is the API on a fresh prefix of a Redis store, with the
// round-trip counter on its client, and n topics holding one timer each.
type redisAPI struct {
	h     http.Handler
	trips *roundTrips
}

func newRedisAPI(tb testing.TB, url string, n int, baseline bool) *redisAPI {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.OpenRedis(store.RedisOptions{URL: url, Prefix: fmt.Sprintf("topics%d:", time.Now().UnixNano())}, log)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	trips := &roundTrips{}
	st.Redis.AddHook(trips)
	var drv ontimedriver.Driver = st.Driver
	if baseline {
		drv = noCounter{drv}
	}
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		if _, err := st.Driver.Schedule(ctx, fmt.Sprintf("tenant-%05d", i), []ontimedriver.NewTimer{{ID: "x", Delay: time.Hour}}, ontimedriver.Upsert); err != nil {
			tb.Fatal(err)
		}
	}
	return &redisAPI{h: server.New(server.Options{Client: client, StoreKind: store.KindRedis, Logger: log}), trips: trips}
}

// get answers path and returns its status and the round trips it took.
func (a *redisAPI) get(tb testing.TB, path string, v any) int64 {
	tb.Helper()
	before := a.trips.n.Load()
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code != 200 {
		tb.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	if v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			tb.Fatal(err)
		}
	}
	return a.trips.n.Load() - before
}

// TestTopicsRoundTrips: GET /v1/topics (whole or a page), GET /v1/stats
// and GET /v1/topics/{topic} cost the same few Redis round trips with 20
// topics as with 1,000 (counted by a go-redis hook on the store's
// client): the topic list, and one pipeline of counts.
func TestTopicsRoundTrips(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	small, large := newRedisAPI(t, rs.URL(), 20, false), newRedisAPI(t, rs.URL(), 1000, false)
	paths := []string{"/v1/topics", "/v1/topics?limit=10&contains=TENANT-0", "/v1/stats", "/v1/topics/tenant-00007"}
	for _, path := range paths {
		// The first calls also open connections and load the count script
		// (a few round trips, once).
		small.get(t, path, nil)
		large.get(t, path, nil)
	}
	for _, path := range paths {
		s, l := small.get(t, path, nil), large.get(t, path, nil)
		if s != l || l > 3 {
			t.Errorf("GET %s: %d round trips with 20 topics, %d with 1,000; want the same, at most 3", path, s, l)
		}
	}
	var st wire.Stats
	large.get(t, "/v1/stats", &st)
	if st.Topics != 1000 || st.Scheduled != 1000 {
		t.Errorf("stats: %+v", st)
	}
	var one wire.TopicStats
	large.get(t, "/v1/topics/tenant-00007", &one)
	if one.Topic != "tenant-00007" || one.Scheduled != 1 {
		t.Errorf("one topic: %+v", one)
	}
	// The baseline, one count per topic, grows with the topics.
	base := newRedisAPI(t, rs.URL(), 1000, true)
	if n := base.get(t, "/v1/stats", nil); n < 1000 {
		t.Errorf("baseline: %d round trips for 1,000 topics; the hook does not count what it should", n)
	}
}

// TestTopicsPaging: GET /v1/topics pages by name with limit and after, and
// a Link header (rel="next") names the next page until the last; contains
// filters in any letter case; bad parameters answer 400 invalid_query.
func TestTopicsPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	for _, topic := range []string{"alpha", "beta", "gamma", "Delta", "epsilon"} {
		e.want(e.do("POST", "/v1/topics/"+topic+"/timers", `{"delay":"1h"}`), 201, "")
	}
	var got []string
	path := "/v1/topics?limit=2"
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
		r := e.do("GET", path, nil)
		var page []wire.TopicStats
		r.json(t, &page)
		for _, ts := range page {
			got = append(got, ts.Topic)
		}
		path = ""
		if l := r.header.Get("Link"); l != "" {
			u, rel, _ := strings.Cut(strings.TrimPrefix(l, "<"), ">; ")
			if rel != `rel="next"` {
				t.Fatalf("Link %q", l)
			}
			path = u
		}
	}
	if want := "Delta alpha beta epsilon gamma"; strings.Join(got, " ") != want {
		t.Errorf("paged topics: %v, want %s", got, want)
	}
	var page []wire.TopicStats
	r := e.do("GET", "/v1/topics?contains=ELT&limit=1", nil)
	r.json(t, &page)
	if len(page) != 1 || page[0].Topic != "Delta" || r.header.Get("Link") != "" {
		t.Errorf("contains=ELT: %+v, Link %q", page, r.header.Get("Link"))
	}
	for _, q := range []string{"limit=0", "limit=10001", "limit=x", "after=", "limit=1&limit=2", "contains="} {
		e.want(e.do("GET", "/v1/topics?"+q, nil), 400, "invalid_query")
	}
	e.want(e.do("GET", "/v1/topics/a%20b", nil), 400, "invalid_topic")
	var one wire.TopicStats
	e.do("GET", "/v1/topics/nothing-here", nil).json(t, &one)
	if one.Topic != "nothing-here" || one.Scheduled != 0 {
		t.Errorf("an empty topic: %+v", one)
	}
}

// BenchmarkTopicsRedis: GET /v1/topics and GET /v1/stats over 5,000
// topics on Redis, with the store's TopicCounter (one pipeline of counts)
// and without (the baseline: one count per topic, as before), in one run.
// Besides ns/op, which a busy machine stretches, it reports the CPU time
// of redis-server and of this process (the server and its client) per
// request: the two run one after the other, so their sum is about what a
// request takes on an idle machine.
//
//	go test ./cmd/ontime/internal/server -run '^$' -bench BenchmarkTopicsRedis -benchtime 20x
func BenchmarkTopicsRedis(b *testing.B) {
	rs := redistest.StartServer(b)
	info := redis.NewClient(&redis.Options{Addr: rs.Addr})
	b.Cleanup(func() { _ = info.Close() })
	for _, c := range []struct {
		name     string
		baseline bool
	}{{"counter", false}, {"baseline", true}} {
		api := newRedisAPI(b, rs.URL(), 5000, c.baseline)
		for _, path := range []string{"/v1/topics", "/v1/stats"} {
			b.Run(c.name+strings.ReplaceAll(path, "/", "_"), func(b *testing.B) {
				var trips int64
				us, self := redisMicros(b, info), selfMicros(b)
				for b.Loop() {
					trips += api.get(b, path, nil)
				}
				b.ReportMetric(float64(trips)/float64(b.N), "roundtrips/op")
				b.ReportMetric(float64(redisMicros(b, info)-us)/float64(b.N), "redis-cpu-µs/op")
				b.ReportMetric(float64(selfMicros(b)-self)/float64(b.N), "server-cpu-µs/op")
			})
		}
	}
}

// TestListBodyLimit: with body_limit, lists carry at most that many bytes
// of each body (body_preview: text and JSON cut at a character boundary,
// bytes as base64), with the whole size, so that a page of 50 bodies of 1
// MiB stays small; the timer itself (GET) has the whole body; short
// bodies are whole; dead letters alike.
func TestListBodyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	text := strings.Repeat("é", 600) + "end"                         // 1203 bytes, a 2-byte character across byte 1024
	jsonBody := `{"items":[` + strings.Repeat(`"x",`, 400) + `"y"]}` // compact JSON, 1614 bytes
	raw := make([]byte, 3000)
	for i := range raw {
		raw[i] = byte(i)
	}
	big := strings.Repeat("b", 1<<20)
	e.want(e.do("POST", "/v1/topics/bl/timers", map[string]any{"id": "1-text", "body": text, "delay": "1h"}), 201, "")
	e.want(e.do("POST", "/v1/topics/bl/timers", `{"id":"2-json","delay":"2h","body":`+jsonBody+`}`), 201, "")
	e.want(e.do("POST", "/v1/topics/bl/timers", map[string]any{"id": "3-bytes", "body_base64": raw, "delay": "3h"}), 201, "")
	e.want(e.do("POST", "/v1/topics/bl/timers", map[string]any{"id": "4-short", "body": "short", "delay": "4h"}), 201, "")
	for i := range 50 {
		e.want(e.do("POST", "/v1/topics/bl/timers", map[string]any{"id": fmt.Sprintf("5-big-%02d", i), "body": big, "delay": "5h"}), 201, "")
	}
	r := e.do("GET", "/v1/topics/bl/timers?limit=100&body_limit=1024", nil)
	if len(r.body) > 200<<10 {
		t.Errorf("a page of 54 timers with body_limit=1024 is %d bytes", len(r.body))
	}
	var page wire.TimerPage
	r.json(t, &page)
	byID := map[string]wire.Timer{}
	for _, tm := range page.Timers {
		byID[tm.ID] = tm
		if tm.BodyPreview != nil && (len(*tm.BodyPreview) > 1024+len("base64:")*2 || tm.Body != nil || tm.BodyBase64 != nil || !tm.BodyTruncated) {
			t.Errorf("%s: preview %d bytes, body %v, base64 %v, truncated %v", tm.ID, len(*tm.BodyPreview), tm.Body != nil, tm.BodyBase64 != nil, tm.BodyTruncated)
		}
	}
	if tm := byID["1-text"]; tm.BodyPreview == nil || *tm.BodyPreview != strings.Repeat("é", 512) || tm.BodySize != len(text) {
		t.Errorf("text: %+v", tm.BodyCut)
	}
	if tm := byID["2-json"]; tm.BodyPreview == nil || *tm.BodyPreview != jsonBody[:1024] || tm.BodySize != len(jsonBody) {
		t.Errorf("json: %+v", tm.BodyCut)
	}
	if tm := byID["3-bytes"]; tm.BodyPreview == nil || !strings.HasPrefix(*tm.BodyPreview, "base64:") || tm.BodySize != 3000 {
		t.Errorf("bytes: %+v", tm.BodyCut)
	}
	if tm := byID["4-short"]; string(tm.Body) != `"short"` || tm.BodyPreview != nil || tm.BodyTruncated {
		t.Errorf("short: %s %+v", tm.Body, tm.BodyCut)
	}
	if tm := byID["5-big-07"]; tm.BodySize != 1<<20 {
		t.Errorf("big: %+v", tm.BodyCut)
	}
	var whole wire.Timer
	e.do("GET", "/v1/topics/bl/timers/1-text", nil).json(t, &whole)
	if string(whole.Body) != `"`+text+`"` || whole.BodyPreview != nil {
		t.Errorf("GET of the timer: %d-byte body, preview %v", len(whole.Body), whole.BodyPreview)
	}
	// Without body_limit, lists are as they were: whole bodies.
	var all wire.TimerPage
	e.do("GET", "/v1/topics/bl/timers?limit=4", nil).json(t, &all)
	if len(all.Timers) != 4 || all.Timers[0].BodyPreview != nil || string(all.Timers[0].Body) != `"`+text+`"` {
		t.Errorf("without body_limit: %+v", all.Timers[0])
	}
	// A dead letter's body is cut alike.
	res, err := e.drv.Claim(t.Context(), "bl", 1, time.Minute)
	if err == nil && len(res.Timers) == 0 {
		e.want(e.do("POST", "/v1/topics/bl/timers/1-text/fire", nil), 200, "")
		wait.For(t, 10*time.Second, func() bool {
			res, err = e.drv.Claim(t.Context(), "bl", 1, time.Minute)
			return err != nil || len(res.Timers) > 0
		}, "1-text claimed")
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.drv.Settle(t.Context(), "bl", settleDead(res.Timers[0].ID, res.Timers[0].Token)); err != nil {
		t.Fatal(err)
	}
	var dead wire.DeadPage
	e.do("GET", "/v1/topics/bl/dead?body_limit=1024", nil).json(t, &dead)
	if len(dead.Dead) != 1 || dead.Dead[0].BodyPreview == nil || dead.Dead[0].BodySize != len(text) {
		t.Errorf("dead letter: %+v", dead.Dead)
	}
	for _, q := range []string{"body_limit=0", "body_limit=x", "body_limit=1048577", "body_limit="} {
		e.want(e.do("GET", "/v1/topics/bl/timers?"+q, nil), 400, "invalid_query")
		e.want(e.do("GET", "/v1/topics/bl/dead?"+q, nil), 400, "invalid_query")
	}
}

// selfMicros is the CPU time this process used so far (getrusage: user
// and system, every goroutine and the garbage collector), in microseconds.
func selfMicros(tb testing.TB) int64 {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return (ru.Utime.Nano() + ru.Stime.Nano()) / 1e3
}

// redisMicros is the CPU time the redis-server process used so far (INFO
// cpu: user and system), in microseconds: the store's own cost of a
// request, commands, scripts, parsing and replies, apart from the client.
// (INFO commandstats would count a script's wall-clock time, which a busy
// machine stretches, plus the commands it calls a second time, and not
// the reading and writing of pipelined commands.)
func redisMicros(tb testing.TB, rdb *redis.Client) int64 {
	tb.Helper()
	s, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(s, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k != "used_cpu_user" && k != "used_cpu_sys" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			tb.Fatalf("INFO cpu line %q", line)
		}
		total += f * 1e6
	}
	return int64(total)
}
