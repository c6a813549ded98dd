package server_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
)

// TestTimeline: counts per bucket from the store's index, with before and
// after; the defaults; bad parameters are invalid_query.
func TestTimeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	start := time.Now().UTC().Truncate(time.Hour).Add(2 * time.Hour)
	for i, d := range []time.Duration{-time.Hour, 0, 30 * time.Second, time.Minute, 150 * time.Second, 10 * time.Hour} {
		at := start.Add(d).Format(time.RFC3339Nano)
		e.want(e.do("POST", "/v1/topics/tl/timers", map[string]any{"id": string(rune('a' + i)), "at": at}), 201, "")
	}
	var tl wire.Timeline
	r := e.do("GET", "/v1/topics/tl/timeline?step=1m&buckets=3&start="+url.QueryEscape(start.Format(time.RFC3339)), nil)
	e.want(r, 200, "")
	r.json(t, &tl)
	if tl.Topic != "tl" || !tl.Start.Equal(start) || tl.Step != "1m0s" || tl.StepSec != 60 {
		t.Errorf("timeline header: %+v", tl)
	}
	if tl.Before != 1 || !slices.Equal(tl.Counts, []int64{2, 1, 1}) || tl.After != 1 {
		t.Errorf("timeline: before %d, counts %v, after %d; want 1, [2 1 1], 1", tl.Before, tl.Counts, tl.After)
	}

	r = e.do("GET", "/v1/topics/tl/timeline", nil)
	e.want(r, 200, "")
	r.json(t, &tl)
	if len(tl.Counts) != 60 || tl.Step != "1m0s" || tl.Start.After(time.Now()) || time.Since(tl.Start) > time.Minute {
		t.Errorf("default timeline: %d buckets of %s from %s", len(tl.Counts), tl.Step, tl.Start)
	}
	var sum int64
	for _, c := range tl.Counts {
		sum += c
	}
	if sum+tl.Before+tl.After != 6 {
		t.Errorf("default timeline adds up to %d, want 6", sum+tl.Before+tl.After)
	}

	r = e.do("GET", "/v1/topics/none/timeline?step=1h&buckets=2", nil)
	e.want(r, 200, "")
	r.json(t, &tl)
	if tl.Before != 0 || !slices.Equal(tl.Counts, []int64{0, 0}) || tl.After != 0 {
		t.Errorf("timeline of an empty topic: %+v", tl)
	}

	for _, q := range []string{
		"step=1ms", "step=90", "step=", "step=1m&step=2m", "buckets=0", "buckets=1000", "buckets=x",
		"start=yesterday", "start=1969-01-01T00:00:00Z", "start=9999-12-31T00:00:00Z&step=8784h",
	} {
		e.want(e.do("GET", "/v1/topics/tl/timeline?"+q, nil), 400, "invalid_query")
	}
	// step × buckets past the longest span a time.Duration holds (292
	// years): refused for what it is, not for a bound that wrapped around
	// to 1734.
	for _, q := range []string{"step=8784h&buckets=999", "step=8784h&buckets=292&start=2000-01-01T00:00:00Z"} {
		r := e.do("GET", "/v1/topics/tl/timeline?"+q, nil)
		e.want(r, 400, "invalid_query")
		if !strings.Contains(string(r.body), "292 years") {
			t.Errorf("timeline?%s: %s; want it to say the span is too long", q, r.body)
		}
	}
	// The longest span that fits is answered.
	r = e.do("GET", "/v1/topics/tl/timeline?step=8784h&buckets=291&start=2000-01-01T00:00:00Z", nil)
	e.want(r, 200, "")
	r.json(t, &tl)
	total := tl.Before + tl.After
	for _, c := range tl.Counts {
		total += c
	}
	if len(tl.Counts) != 291 || total != 6 {
		t.Errorf("a 291-year timeline: %d buckets adding up to %d; want 291 adding up to 6", len(tl.Counts), total)
	}
	e.want(e.do("GET", "/v1/topics/bad%20topic/timeline", nil), 400, "invalid_topic")
	e.want(e.do("POST", "/v1/topics/tl/timeline", nil), 405, "method_not_allowed")
}

// TestFireNow: a future timer becomes due now and keeps its body; a
// missing one is 404, one being delivered 409 leased.
func TestFireNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	e.want(e.do("POST", "/v1/topics/f/timers", `{"id":"later","delay":"1h","body":"hello"}`), 201, "")
	before := time.Now()
	r := e.do("POST", "/v1/topics/f/timers/later/fire", nil)
	e.want(r, 200, "")
	var c wire.Created
	r.json(t, &c)
	if c.ID != "later" || c.Topic != "f" || c.DueAt.Before(before.Add(-time.Second)) || c.DueAt.After(time.Now().Add(time.Second)) {
		t.Errorf("fire: %+v, want due now", c)
	}
	var tm wire.Timer
	r = e.do("GET", "/v1/topics/f/timers/later", nil)
	e.want(r, 200, "")
	r.json(t, &tm)
	if !tm.DueAt.Equal(c.DueAt) || string(tm.Body) != `"hello"` {
		t.Errorf("timer after fire: due %s body %s, want due %s, body \"hello\"", tm.DueAt, tm.Body, c.DueAt)
	}

	e.want(e.do("POST", "/v1/topics/f/timers/nope/fire", nil), 404, "not_found")
	e.want(e.do("POST", "/v1/topics/f/timers/%2E/fire", nil), 400, "invalid_id")
	e.want(e.do("GET", "/v1/topics/f/timers/later/fire", nil), 405, "method_not_allowed")

	claimed, err := e.drv.Claim(t.Context(), "f", 10, time.Hour)
	if err != nil || len(claimed.Timers) != 1 {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	e.want(e.do("POST", "/v1/topics/f/timers/later/fire", nil), 409, "leased")
}

// TestLastMinute: a server with workers reports each topic's last minute:
// publishes through the API, deliveries and outcomes, lateness, no early
// delivery; without workers the field is absent.
func TestLastMinute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.want(e.do("POST", "/v1/topics/lm/timers", `{"id":"a","delay":"0s"}`), 201, "")
	e.want(e.do("POST", "/v1/topics/lm/timers", `{"id":"b","delay":"100ms"}`), 201, "")
	var topics []wire.TopicStats
	wait.For(t, 10*time.Second, func() bool {
		r := e.do("GET", "/v1/topics", nil)
		e.want(r, 200, "")
		r.json(t, &topics)
		return len(topics) == 1 && topics[0].LastMinute != nil && topics[0].LastMinute.Acked == 2
	}, "two acked deliveries")
	lm := topics[0].LastMinute
	if lm.Published != 2 || lm.Fired != 2 || lm.Early != 0 || lm.Retried != 0 || lm.DeadLettered != 0 {
		t.Errorf("last_minute: %+v", lm)
	}
	if lm.LateMaxMs < lm.LateP99Ms || lm.LateP99Ms < lm.LateP50Ms || lm.LateP50Ms < 0 {
		t.Errorf("lateness out of order: %+v", lm)
	}

	e2 := newEnv(t, envOpts{noWorkers: true})
	if _, err := e2.client.Publish(t.Context(), "x", "y", ontime.In(time.Hour)); err != nil {
		t.Fatal(err)
	}
	r := e2.do("GET", "/v1/topics", nil)
	e2.want(r, 200, "")
	r.json(t, &topics)
	if len(topics) != 1 || topics[0].LastMinute != nil {
		t.Errorf("without workers: %+v, want no last_minute", topics)
	}
}
