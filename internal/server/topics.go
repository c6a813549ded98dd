package server

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/activity"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver"
)

// topicNames returns the topics the API lists, sorted: those the store
// holds (Client.Topics: one call; on Redis two round trips whatever the
// number of topics), the configured ones, and those with activity in the
// last minute (a topic emptied meanwhile is still listed).
func (s *Server) topicNames(w http.ResponseWriter, r *http.Request) ([]string, map[string]activity.Stats, *apiError) {
	names, err := s.o.Client.Topics(r.Context())
	if err != nil {
		return nil, nil, s.storeError(w, r, err)
	}
	var recent map[string]activity.Stats
	names = append(names, s.o.Topics...)
	if s.o.Activity != nil {
		recent = s.o.Activity.Snapshot()
		for t := range recent {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out := names[:0]
	for _, name := range names {
		if wire.ValidateTopic(name) == nil { // not a foreign key the API cannot address
			out = append(out, name)
		}
	}
	return out, recent, nil
}

// countTopics counts the timers of topics (named without the Client's
// prefix). A store that counts many topics in one call
// (ontimedriver.TopicCounter, found on Client.Driver(): one or two
// pipelines on Redis, one transaction on the embedded store) is asked once, so a
// refresh of the topics page costs the same few round trips with 5 or
// 5,000 topics; another is asked once per topic.
func (s *Server) countTopics(ctx context.Context, topics []string) ([]ontime.Counts, error) {
	if tc, ok := s.o.Client.Driver().(ontimedriver.TopicCounter); ok {
		p := s.o.Client.Prefix()
		full := topics
		if p != "" {
			full = make([]string, len(topics))
			for i, t := range topics {
				full[i] = p + t
			}
		}
		return tc.CountTopics(ctx, full)
	}
	out := make([]ontime.Counts, len(topics))
	for i, t := range topics {
		c, err := s.o.Client.Count(ctx, t)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// topicStats counts names and adds each one's last minute.
func (s *Server) topicStats(w http.ResponseWriter, r *http.Request, names []string, recent map[string]activity.Stats) ([]wire.TopicStats, *apiError) {
	counts, err := s.countTopics(r.Context(), names)
	if err != nil {
		return nil, s.storeError(w, r, err)
	}
	out := make([]wire.TopicStats, len(names))
	for i, name := range names {
		c := counts[i]
		out[i] = wire.TopicStats{Topic: name, Scheduled: c.Scheduled, Leased: c.Leased, Dead: c.Dead}
		if s.o.Activity != nil {
			out[i].LastMinute = activityJSON(recent[name])
		}
	}
	return out, nil
}

// maxTopicsPage caps the limit of GET /v1/topics.
const maxTopicsPage = 10000

// listTopics answers GET /v1/topics: every topic with its counts, sorted
// by name, or a page of them: limit (1 to 10,000), after (the last topic
// of the previous page), contains (topics whose name holds this text, in
// any letter case). The body stays an array; a page that is not the last
// has a Link header (RFC 8288) with rel="next".
func (s *Server) listTopics(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for _, k := range []string{"limit", "after", "contains"} {
		switch vs := q[k]; {
		case len(vs) > 1:
			writeError(w, errorf(http.StatusBadRequest, "invalid_query", "%s is given %d times; give it once", k, len(vs)))
			return
		case len(vs) == 1 && vs[0] == "":
			writeError(w, errorf(http.StatusBadRequest, "invalid_query", "%s is empty; leave it out instead", k))
			return
		}
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxTopicsPage {
			writeError(w, errorf(http.StatusBadRequest, "invalid_query", "limit %q: want an integer from 1 to %d", v, maxTopicsPage))
			return
		}
		limit = n
	}
	names, recent, e := s.topicNames(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	after, contains := q.Get("after"), strings.ToLower(q.Get("contains"))
	if after != "" || contains != "" {
		kept := names[:0]
		for _, n := range names {
			if n > after && (contains == "" || strings.Contains(strings.ToLower(n), contains)) {
				kept = append(kept, n)
			}
		}
		names = kept
	}
	if limit > 0 && len(names) > limit {
		names = names[:limit]
		next := url.Values{"limit": {strconv.Itoa(limit)}, "after": {names[limit-1]}}
		if contains != "" {
			next.Set("contains", q.Get("contains"))
		}
		w.Header().Set("Link", "<"+r.URL.Path+"?"+next.Encode()+`>; rel="next"`)
	}
	out, e := s.topicStats(w, r, names, recent)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// getTopic answers GET /v1/topics/{topic}: one topic's counts and last
// minute (zeros for a topic that holds nothing).
func (s *Server) getTopic(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	var recent map[string]activity.Stats
	if s.o.Activity != nil {
		recent = s.o.Activity.Snapshot()
	}
	out, e := s.topicStats(w, r, []string{topic}, recent)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, out[0])
}

// stats answers GET /v1/stats: the totals over every topic (counted in one
// store call where the store can, see countTopics) and this server's
// delivery counters.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	names, recent, e := s.topicNames(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	ts, e := s.topicStats(w, r, names, recent)
	if e != nil {
		writeError(w, e)
		return
	}
	st := wire.Stats{Store: s.o.StoreKind, UptimeSec: int64(time.Since(s.started) / time.Second), Topics: len(ts)}
	for _, t := range ts {
		st.Scheduled += t.Scheduled
		st.Leased += t.Leased
		st.Dead += t.Dead
	}
	if d := s.o.Dispatcher; d != nil {
		c := d.Counters()
		st.Delivered, st.Failed, st.Workers, st.Watchers = c.Delivered, c.Failed, c.Workers, c.Watchers
	}
	writeJSON(w, http.StatusOK, st)
}

// deadJSON is a dead letter's answer; a body over bodyLimit bytes (> 0)
// is cut (wire.CutBody).
func deadJSON(d *ontime.DeadLetterInfo, bodyLimit int) wire.DeadLetter {
	out := wire.DeadLetter{
		ID: d.ID, Topic: d.Topic, DueAt: d.Due.UTC(), DiedAt: d.DiedAt.UTC(), Attempt: d.Attempt,
		Reason: d.Reason, LastError: d.LastError, Headers: d.Headers, CorrelationID: d.CorrelationID,
		ContentType: d.ContentType,
	}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	if cut, ok := wire.CutBody(d.ContentType, d.Body, bodyLimit); ok {
		out.BodyCut = cut
	} else {
		out.Body, out.BodyBase64 = wire.BodyJSON(d.ContentType, d.Body)
	}
	return out
}

func (s *Server) listDead(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	opts, bodyLimit, e := listOptions(r)
	if e != nil {
		writeError(w, e)
		return
	}
	page, err := s.o.Client.DeadLetters(r.Context(), topic, opts)
	if err != nil {
		writeError(w, s.listError(w, r, err))
		return
	}
	out := wire.DeadPage{Dead: make([]wire.DeadLetter, len(page.Dead)), NextCursor: page.NextCursor}
	for i := range page.Dead {
		out.Dead[i] = deadJSON(&page.Dead[i], bodyLimit)
	}
	writeJSON(w, http.StatusOK, out)
}

// getDead answers one dead letter with its whole body (lists cut bodies
// with body_limit; the dashboard loads one whole from here).
func (s *Server) getDead(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	id, e := idOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	d, err := s.o.Client.DeadLetter(r.Context(), topic, id)
	if err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	writeJSON(w, http.StatusOK, deadJSON(d, 0))
}

// deadSelect reads the {"ids": [...]} or {"all": true} of replay and purge.
// An empty or missing list without all is refused (missing_ids): a list
// that came out empty must not act on every dead letter.
func (s *Server) deadSelect(w http.ResponseWriter, r *http.Request) (wire.DeadSelect, *apiError) {
	var in wire.DeadSelect
	if r.ContentLength == 0 {
		return in, errorf(http.StatusBadRequest, "missing_ids", `the request has no body: send {"ids": ["id", ...]} for those dead letters or {"all": true} for every one`)
	}
	if e := decodeJSON(w, r, s.batchLimit(), &in); e != nil {
		return in, e
	}
	switch {
	case in.All && len(in.IDs) > 0:
		return in, errorf(http.StatusBadRequest, "ids_and_all", `give either "ids" or "all": true, not both`)
	case !in.All && len(in.IDs) == 0:
		return in, errorf(http.StatusBadRequest, "missing_ids", `"ids" is missing or empty: list the dead letters, or send {"all": true} for every one (an empty list never means all)`)
	}
	for _, id := range in.IDs {
		if e := checkID(id); e != nil {
			return in, e
		}
	}
	return in, nil
}

func (s *Server) replayDead(w http.ResponseWriter, r *http.Request) {
	s.deadOp(w, r, s.o.Client.ReplayDeadLetters, s.o.Client.ReplayAllDeadLetters)
}

func (s *Server) purgeDead(w http.ResponseWriter, r *http.Request) {
	s.deadOp(w, r, s.o.Client.PurgeDeadLetters, s.o.Client.PurgeAllDeadLetters)
}

func (s *Server) deadOp(w http.ResponseWriter, r *http.Request,
	some func(ctx context.Context, topic string, ids ...string) (int, error),
	all func(ctx context.Context, topic string) (int, error)) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	sel, e := s.deadSelect(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	var n int
	var err error
	if sel.All {
		n, err = all(r.Context(), topic)
	} else {
		n, err = some(r.Context(), topic, sel.IDs...)
	}
	if err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	if n > 0 && s.o.Dispatcher != nil {
		s.o.Dispatcher.Ensure(topic)
	}
	writeJSON(w, http.StatusOK, wire.Count{Count: n})
}

func activityJSON(a activity.Stats) *wire.Activity {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return &wire.Activity{
		Published: a.Published, Fired: a.Fired, Acked: a.Acked, Retried: a.Retried,
		DeadLettered: a.Dead, Early: a.Early,
		LateP50Ms: ms(a.LateP50), LateP99Ms: ms(a.LateP99), LateMaxMs: ms(a.LateMax),
	}
}
