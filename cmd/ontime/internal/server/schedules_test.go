package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
)

// TestSchedules: POST /v1/topics/{topic}/schedules publishes a recurring
// timer in each of its three forms, upserts or refuses with if_absent, GET
// shows the schedule, and a bad schedule is refused with the reason.
func TestSchedules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	before := time.Now()

	r := e.do("POST", "/v1/topics/reports/schedules", `{"id":"daily","cron":"0 9 * * MON-FRI","tz":"Europe/Berlin","missed":"each:3","body":{"report":"sales"},"headers":{"tenant":"a"}}`)
	e.want(r, 201, "")
	var c wire.ScheduleCreated
	r.json(t, &c)
	if c.ID != "daily" || c.Topic != "reports" || c.Schedule != "cron 0 9 * * MON-FRI Europe/Berlin" || c.Missed != "each:3" || c.Jitter != "" {
		t.Fatalf("created %+v", c)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if l := c.DueAt.In(berlin); !c.DueAt.After(before) || l.Hour() != 9 || l.Minute() != 0 || l.Weekday() == time.Saturday || l.Weekday() == time.Sunday {
		t.Fatalf("first tick %v (%v in Berlin), want a weekday at 09:00 after now", c.DueAt, l)
	}
	if loc := r.header.Get("Location"); loc != "/v1/topics/reports/timers/daily" {
		t.Fatalf("Location %q", loc)
	}

	r = e.do("GET", "/v1/topics/reports/timers/daily", nil)
	e.want(r, 200, "")
	var tm wire.Timer
	r.json(t, &tm)
	if tm.Recurring == nil || tm.Recurring.Schedule != c.Schedule || tm.Recurring.Missed != "each:3" || tm.Recurring.Tick != 1 ||
		!tm.Recurring.TickAt.Equal(c.DueAt) || tm.Recurring.Paused || tm.Recurring.LastTick != 0 || tm.Headers["tenant"] != "a" || string(tm.Body) != `{"report":"sales"}` {
		t.Fatalf("GET shows %s", r.body)
	}

	// Upsert with every and jitter; then if_absent refuses.
	r = e.do("POST", "/v1/topics/reports/schedules", `{"id":"daily","every":"1h","jitter":"10m","body":"hourly now"}`)
	e.want(r, 201, "")
	r.json(t, &c)
	if c.Schedule != "every 1h" || c.Missed != "once" || c.Jitter != "10m0s" {
		t.Fatalf("upsert answered %+v", c)
	}
	tick := c.DueAt.Truncate(time.Hour)
	if c.DueAt.Before(tick) || !c.DueAt.Before(tick.Add(10*time.Minute)) || !tick.After(before) {
		t.Fatalf("due %v: want within 10 minutes after the next hour", c.DueAt)
	}
	e.want(e.do("POST", "/v1/topics/reports/schedules", `{"id":"daily","every":"5m","if_absent":true}`), 409, "exists")
	r = e.do("GET", "/v1/topics/reports/timers/daily", nil)
	r.json(t, &tm)
	if tm.Recurring.Schedule != "every 1h" || tm.Recurring.Jitter != "10m0s" || !tm.Recurring.TickAt.Equal(tick) || !tm.DueAt.Equal(c.DueAt) {
		t.Fatalf("after the refused if_absent: %s", r.body)
	}

	// A spec, anchored.
	r = e.do("POST", "/v1/topics/reports/schedules", `{"id":"anchored","schedule":"every 24h from 2099-01-01T06:00:00+01:00"}`)
	e.want(r, 201, "")
	r.json(t, &c)
	if c.Schedule != "every 24h from 2099-01-01T05:00:00Z" || !c.DueAt.Equal(time.Date(2099, 1, 1, 5, 0, 0, 0, time.UTC)) {
		t.Fatalf("anchored: %+v", c)
	}

	// Listed with the plain timers, with their schedule.
	r = e.do("GET", "/v1/topics/reports/timers", nil)
	var page wire.TimerPage
	r.json(t, &page)
	if len(page.Timers) != 2 || page.Timers[0].Recurring == nil || page.Timers[1].Recurring == nil {
		t.Fatalf("list: %s", r.body)
	}

	// Pause and resume.
	r = e.do("POST", "/v1/topics/reports/timers/anchored/pause", nil)
	e.want(r, 200, "")
	r.json(t, &tm)
	if tm.Recurring == nil || !tm.Recurring.Paused {
		t.Fatalf("paused: %s", r.body)
	}
	e.want(e.do("POST", "/v1/topics/reports/timers/anchored/pause", nil), 200, "") // again: nothing changes
	r = e.do("GET", "/v1/topics/reports/timers/anchored", nil)
	r.json(t, &tm)
	if !tm.Recurring.Paused {
		t.Fatalf("GET after pause: %s", r.body)
	}
	r = e.do("POST", "/v1/topics/reports/timers/anchored/resume", nil)
	e.want(r, 200, "")
	r.json(t, &tm)
	if tm.Recurring.Paused || !tm.Recurring.TickAt.Equal(time.Date(2099, 1, 1, 5, 0, 0, 0, time.UTC)) {
		t.Fatalf("resumed: %s", r.body)
	}
	e.want(e.do("POST", "/v1/topics/reports/timers", `{"id":"one-shot","delay":"1h"}`), 201, "")
	for _, p := range []string{"/v1/topics/reports/timers/one-shot/pause", "/v1/topics/reports/timers/nope/resume", "/v1/topics/reports/timers/nope/pause"} {
		e.want(e.do("POST", p, nil), 404, "not_found")
	}
	e.want(e.do("GET", "/v1/topics/reports/timers/anchored/pause", nil), 405, "method_not_allowed")
	e.want(e.do("GET", "/v1/topics/reports/timers/anchored/resume", nil), 405, "method_not_allowed")
	e.want(e.do("POST", "/v1/topics/reports/timers/%2E%2E/pause", nil), 400, "invalid_id")
	e.want(e.do("POST", "/v1/topics/a%20b/timers/x/resume", nil), 400, "invalid_topic")

	// Cancelled like any timer.
	e.want(e.do("DELETE", "/v1/topics/reports/timers/anchored", nil), 204, "")
	e.want(e.do("GET", "/v1/topics/reports/timers/anchored", nil), 404, "not_found")

	for _, tc := range []struct{ body, code, msg string }{
		{`{"every":"5m"}`, "invalid_id", "id is required"},
		{`{"id":"..","every":"5m"}`, "invalid_id", ""},
		{`{"id":"s"}`, "invalid_schedule", "give the schedule"},
		{`{"id":"s","every":"5m","cron":"* * * * *"}`, "invalid_schedule", "one of"},
		{`{"id":"s","schedule":"every 5m","every":"5m"}`, "invalid_schedule", "one of"},
		{`{"id":"s","every":"5m","tz":"UTC"}`, "invalid_schedule", `"tz" goes with "cron"`},
		{`{"id":"s","cron":"0 9 * * *","from":"2026-01-01T00:00:00Z"}`, "invalid_schedule", `"from" goes with "every"`},
		{`{"id":"s","every":"5"}`, "invalid_schedule", "not a duration"},
		{`{"id":"s","every":"500us"}`, "invalid_schedule", "under 1ms"},
		{`{"id":"s","every":"5m","from":"2026-01-01"}`, "invalid_schedule", "RFC 3339"},
		{`{"id":"s","cron":"0 9 * *"}`, "invalid_schedule", "fields"},
		{`{"id":"s","cron":"0 0 30 2 *"}`, "invalid_schedule", "matches no date"},
		{`{"id":"s","cron":"0 9 * * *","tz":"Mars/Olympus"}`, "invalid_schedule", "time zone"},
		{`{"id":"s","cron":"0 9 * * *","tz":"Local"}`, "invalid_schedule", "name the zone"},
		{`{"id":"s","schedule":"hourly"}`, "invalid_schedule", `"every" or "cron"`},
		{`{"id":"s","every":"5m","missed":"all"}`, "invalid_schedule", "missed"},
		{`{"id":"s","every":"5m","missed":"each:0"}`, "invalid_schedule", "missed"},
		{`{"id":"s","every":"5m","jitter":"0s"}`, "invalid_schedule", "jitter"},
		{`{"id":"s","every":"5m","jitter":"soon"}`, "invalid_schedule", "jitter"},
		{`{"id":"s","every":"5m","body":"x","body_base64":"eA=="}`, "invalid_body", ""},
		{`{"id":"s","every":"5m","headers":{"content-type":"x"}}`, "invalid_header", ""},
		{`{"id":"s","every":"5m","correlation_id":"a\u0000b"}`, "invalid_correlation_id", ""},
		{`{"id":"s","every":"5m","delay":"1s"}`, "unknown_field", ""},
		{`{"id":"s","every":5}`, "invalid_field", ""},
	} {
		r := e.do("POST", "/v1/topics/reports/schedules", tc.body)
		e.want(r, 400, tc.code)
		var er wire.Error
		r.json(t, &er)
		if !strings.Contains(er.Error.Message, tc.msg) {
			t.Errorf("%s: %s, want it to say %q", tc.body, r.body, tc.msg)
		}
	}
	e.want(e.do("POST", "/v1/topics/reports/schedules", `{"id":"big","every":"5m","body":"`+strings.Repeat("x", 5<<20)+`"}`), 413, "")
	e.want(e.do("GET", "/v1/topics/reports/timers/s", nil), 404, "not_found")
	e.want(e.do("DELETE", "/v1/topics/reports/schedules", nil), 405, "method_not_allowed")
}

// TestScheduleList: GET /v1/topics/{topic}/schedules lists the topic's
// recurring timers and leaves its plain timers out, with their paused
// state, next tick and last outcome; bodies cut by body_limit; a bad query
// or topic is refused.
func TestScheduleList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	var page wire.SchedulePage
	r := e.do("GET", "/v1/topics/mixed/schedules", nil)
	e.want(r, 200, "")
	r.json(t, &page)
	if len(page.Schedules) != 0 || page.Scanned != 0 || !page.Complete || !strings.Contains(string(r.body), `"schedules":[]`) {
		t.Fatalf("empty topic: %s", r.body)
	}
	e.want(e.do("POST", "/v1/topics/mixed/schedules", `{"id":"hourly","every":"1h","body":"`+strings.Repeat("x", 3000)+`"}`), 201, "")
	e.want(e.do("POST", "/v1/topics/mixed/schedules", `{"id":"daily","cron":"0 9 * * *","tz":"Europe/Berlin"}`), 201, "")
	for _, id := range []string{"a", "b", "c"} {
		e.want(e.do("POST", "/v1/topics/mixed/timers", `{"id":"`+id+`","delay":"1m"}`), 201, "")
	}
	e.want(e.do("POST", "/v1/topics/mixed/timers/daily/pause", nil), 200, "")
	r = e.do("GET", "/v1/topics/mixed/schedules?body_limit=100", nil)
	e.want(r, 200, "")
	r.json(t, &page)
	// the stores list recurring timers: the 3 plain ones are not read
	if len(page.Schedules) != 2 || page.Scanned != 2 || !page.Complete || page.NextCursor != "" {
		t.Fatalf("list: %s", r.body)
	}
	byID := map[string]wire.Timer{}
	for _, s := range page.Schedules {
		byID[s.ID] = s
	}
	h, d := byID["hourly"], byID["daily"]
	if h.Recurring == nil || h.Recurring.Schedule != "every 1h" || h.Recurring.Paused || h.Recurring.Tick != 1 || !h.BodyTruncated || h.BodyPreview == nil || len(*h.BodyPreview) != 100 {
		t.Errorf("hourly: %+v", h)
	}
	if d.Recurring == nil || !d.Recurring.Paused || d.Recurring.Schedule != "cron 0 9 * * * Europe/Berlin" {
		t.Errorf("daily: %+v", d)
	}
	e.want(e.do("GET", "/v1/topics/mixed/schedules?limit=5", nil), 400, "invalid_query")
	e.want(e.do("GET", "/v1/topics/mixed/schedules?cursor=not-a-cursor!", nil), 400, "invalid_query")
	e.want(e.do("GET", "/v1/topics/mixed/schedules?cursor=", nil), 400, "invalid_query")
	e.want(e.do("GET", "/v1/topics/mixed/schedules?body_limit=0", nil), 400, "invalid_query")
	e.want(e.do("GET", "/v1/topics/mixed/schedules?body_limit=1&body_limit=2", nil), 400, "invalid_query")
	e.want(e.do("GET", "/v1/topics/a%20b/schedules", nil), 400, "invalid_topic")
}

// TestScheduleDelivered: with workers, each tick of an every-200ms schedule
// reaches the topic's target (the log target), and the timer is still
// there, on a later tick, after several.
func TestScheduleDelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.want(e.do("POST", "/v1/topics/ticks/schedules", `{"id":"fast","every":"200ms","body":"tick"}`), 201, "")
	var tm wire.Timer
	wait.For(t, 30*time.Second, func() bool {
		r := e.do("GET", "/v1/topics/ticks/timers/fast", nil)
		r.json(t, &tm)
		return tm.Recurring != nil && tm.Recurring.LastTick >= 3
	}, "three ticks of the schedule settled")
	if tm.Recurring.LastOutcome != "ack" || tm.Recurring.Tick <= tm.Recurring.LastTick {
		t.Fatalf("after three ticks: %+v", tm.Recurring)
	}
	if !strings.Contains(e.logs.String(), `"id":"fast"`) {
		t.Fatalf("the log target did not log the ticks")
	}
}

// TestScheduleCompatLayout: the faststream-compatible Redis layout keeps
// no recurring timers: 501 recurring_unsupported, nothing stored.
func TestScheduleCompatLayout(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	e := newEnv(t, envOpts{noWorkers: true, redis: rs.URL(), layout: "compat"})
	e.want(e.do("POST", "/v1/topics/t/schedules", `{"id":"s","every":"1h"}`), 501, "recurring_unsupported")
	e.want(e.do("POST", "/v1/topics/t/timers/s/pause", nil), 501, "recurring_unsupported")
	e.want(e.do("POST", "/v1/topics/t/timers/s/resume", nil), 501, "recurring_unsupported")
	e.want(e.do("GET", "/v1/topics/t/timers/s", nil), 404, "not_found")
	r := e.do("GET", "/v1/topics/t/schedules", nil)
	e.want(r, 200, "")
	var page wire.SchedulePage
	if r.json(t, &page); len(page.Schedules) != 0 || !page.Complete {
		t.Errorf("schedules of a compatible-layout topic: %s, want none, complete", r.body)
	}
	if _, err := e.client.Get(t.Context(), "t", "s"); err != ontime.ErrNotFound {
		t.Fatalf("Get after the refusal: %v", err)
	}
}

// TestScheduleShardedTopic: a sharded Redis topic keeps no recurring
// timers: 501 recurring_unsupported naming the topic, while an unsharded
// topic of the same store takes them.
func TestScheduleShardedTopic(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	e := newEnv(t, envOpts{noWorkers: true, redis: rs.URL(), shards: map[string]int{"hot": 3}})
	r := e.do("POST", "/v1/topics/hot/schedules", `{"id":"s","every":"1h"}`)
	e.want(r, 501, "recurring_unsupported")
	if !strings.Contains(string(r.body), `topic \"hot\" is sharded`) {
		t.Errorf("the refusal does not say why: %s", r.body)
	}
	e.want(e.do("POST", "/v1/topics/hot/timers/s/pause", nil), 501, "recurring_unsupported")
	e.want(e.do("POST", "/v1/topics/cold/schedules", `{"id":"s","every":"1h"}`), 201, "")
	for topic, want := range map[string]int{"hot": 0, "cold": 1} {
		r := e.do("GET", "/v1/topics/"+topic+"/schedules", nil)
		e.want(r, 200, "")
		var page wire.SchedulePage
		if r.json(t, &page); len(page.Schedules) != want || !page.Complete {
			t.Errorf("schedules of %s: %s, want %d, complete", topic, r.body, want)
		}
	}
}

// TestScheduleListManyPlain: a topic with 12,000 plain timers, all due
// before two schedules' first ticks, lists the schedules, complete, in due
// order, on both stores: the server reads the schedules alone (scanned 2),
// where it used to walk the first 10,000 timers in due order and miss them.
func TestScheduleListManyPlain(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"embedded", "redis"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var o envOpts
			o.noWorkers = true
			if kind == "redis" {
				o.redis = redistest.StartServer(t).URL()
			}
			e := newEnv(t, o)
			const plain = 12_000
			batch := make([]ontime.Timer, 1000)
			for i := 0; i < plain; i += len(batch) {
				for j := range batch {
					batch[j] = ontime.Timer{Delay: time.Hour, Body: "x"}
				}
				if _, err := e.client.PublishBatch(t.Context(), "busy", batch); err != nil {
					t.Fatal(err)
				}
			}
			first := time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339)
			later := time.Now().Add(5 * time.Hour).UTC().Format(time.RFC3339)
			e.want(e.do("POST", "/v1/topics/busy/schedules", `{"id":"late","schedule":"every 24h from `+first+`"}`), 201, "")
			e.want(e.do("POST", "/v1/topics/busy/schedules", `{"id":"a-later","schedule":"every 24h from `+later+`"}`), 201, "")
			if cnt, err := e.client.Count(t.Context(), "busy"); err != nil || cnt.Scheduled != plain+2 {
				t.Fatalf("count: %+v, %v; want %d scheduled", cnt, err, plain+2)
			}
			r := e.do("GET", "/v1/topics/busy/schedules?body_limit=1", nil)
			e.want(r, 200, "")
			var page wire.SchedulePage
			r.json(t, &page)
			// in due order (the stores list them by id)
			if len(page.Schedules) != 2 || page.Schedules[0].ID != "late" || page.Schedules[1].ID != "a-later" || !page.Complete || page.Scanned != 2 || page.NextCursor != "" {
				t.Fatalf("schedules of a topic with %d plain timers due first: %s; want late and a-later, complete, scanned 2", plain, r.body)
			}
		})
	}
}

// TestScheduleBackfill: the ticks of a past range run each once, as
// one-shot timers named for their tick, with the recurring timer's body and
// headers and the tick's instant; backfilling the range again publishes
// nothing; bad ranges are refused.
func TestScheduleBackfill(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	e.want(e.do("POST", "/v1/topics/b/schedules", `{"id":"daily","cron":"30 2 * * *","tz":"Europe/Berlin","body":{"k":1},"headers":{"tenant":"a"}}`), 201, "")
	// 2026-03-28 to 2026-03-31 in Berlin: the 29th's 02:30 does not exist (03:00 CEST).
	body := `{"from":"2026-03-28T00:00:00+01:00","to":"2026-03-31T00:00:00+02:00"}`
	r := e.do("POST", "/v1/topics/b/timers/daily/backfill", body)
	e.want(r, 200, "")
	var bf wire.Backfilled
	r.json(t, &bf)
	if bf != (wire.Backfilled{Ticks: 3, Published: 3}) {
		t.Fatalf("backfill: %+v", bf)
	}
	for _, tick := range []string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"} {
		r := e.do("GET", "/v1/topics/b/timers/daily@"+tick, nil)
		e.want(r, 200, "")
		var tm wire.Timer
		r.json(t, &tm)
		if tm.Recurring != nil || tm.Headers["tenant"] != "a" || tm.Headers["ontime-tick"] != tick || string(tm.Body) != `{"k":1}` || tm.DueAt.After(time.Now()) {
			t.Fatalf("backfilled tick %s: %s", tick, r.body)
		}
	}
	r = e.do("POST", "/v1/topics/b/timers/daily/backfill", body)
	r.json(t, &bf)
	if bf != (wire.Backfilled{Ticks: 3, Existing: 3}) {
		t.Fatalf("second backfill: %+v", bf)
	}
	r = e.do("POST", "/v1/topics/b/timers/daily/backfill", `{"from":"2026-03-28T03:00:00+01:00","to":"2026-03-28T04:00:00+01:00"}`)
	r.json(t, &bf)
	if bf != (wire.Backfilled{}) {
		t.Fatalf("a range without ticks: %+v", bf)
	}
	e.want(e.do("POST", "/v1/topics/b/schedules", `{"id":"fast","every":"1s"}`), 201, "")
	e.want(e.do("POST", "/v1/topics/b/timers", `{"id":"plain","delay":"1h"}`), 201, "")
	for _, tc := range []struct{ path, body, code string }{
		{"daily", `{"from":"2026-03-28T00:00:00Z"}`, "invalid_backfill"},
		{"daily", `{"to":"2026-03-28T00:00:00Z"}`, "invalid_backfill"},
		{"daily", `{"from":"yesterday","to":"2026-03-28T00:00:00Z"}`, "invalid_backfill"},
		{"daily", `{"from":"2026-03-28T00:00:00Z","to":"today"}`, "invalid_backfill"},
		{"daily", `{"from":"2026-03-28T00:00:00Z","to":"2026-03-28T00:00:00Z"}`, "invalid_backfill"},
		{"daily", `{"from":"2026-03-28T00:00:00Z","to":"2999-01-01T00:00:00Z"}`, "invalid_backfill"},
		{"fast", `{"from":"2026-03-28T00:00:00Z","to":"2026-03-28T01:00:00Z"}`, "invalid_backfill"},
		{"daily", `{"from":"2026-03-28T00:00:00Z","to":"2026-03-29T00:00:00Z","extra":1}`, "unknown_field"},
		{"%2E", `{"from":"2026-03-28T00:00:00Z","to":"2026-03-29T00:00:00Z"}`, "invalid_id"},
	} {
		e.want(e.do("POST", "/v1/topics/b/timers/"+tc.path+"/backfill", tc.body), 400, tc.code)
	}
	for _, id := range []string{"plain", "nope"} {
		e.want(e.do("POST", "/v1/topics/b/timers/"+id+"/backfill", body), 404, "not_found")
	}
	e.want(e.do("GET", "/v1/topics/b/timers/daily/backfill", nil), 405, "method_not_allowed")
	e.want(e.do("POST", "/v1/topics/b/timers/daily/backfill", `{"from":"`+strings.Repeat("x", 3<<20)+`"}`), 413, "request_too_large")
}
