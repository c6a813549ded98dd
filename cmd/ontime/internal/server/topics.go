package server

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/activity"
	"github.com/ontime-go/ontime/cmd/ontime/internal/wire"
)

// topicStats counts every topic the store lists, plus the configured ones
// and those with activity in the last minute.
func (s *Server) topicStats(w http.ResponseWriter, r *http.Request) ([]wire.TopicStats, *apiError) {
	names, err := s.o.Client.Topics(r.Context())
	if err != nil {
		return nil, s.storeError(w, r, err)
	}
	var recent map[string]activity.Stats
	extra := slices.Clone(s.o.Topics)
	if s.o.Activity != nil {
		recent = s.o.Activity.Snapshot()
		for t := range recent { // a topic emptied in the last minute is still listed
			extra = append(extra, t)
		}
	}
	names = append(names, extra...)
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]wire.TopicStats, 0, len(names))
	for _, name := range names {
		if wire.ValidateTopic(name) != nil {
			continue // a foreign key the API cannot address
		}
		c, err := s.o.Client.Count(r.Context(), name)
		if err != nil {
			return nil, s.storeError(w, r, err)
		}
		ts := wire.TopicStats{Topic: name, Scheduled: c.Scheduled, Leased: c.Leased, Dead: c.Dead}
		if s.o.Activity != nil {
			ts.LastMinute = activityJSON(recent[name])
		}
		out = append(out, ts)
	}
	return out, nil
}

func (s *Server) listTopics(w http.ResponseWriter, r *http.Request) {
	out, e := s.topicStats(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	ts, e := s.topicStats(w, r)
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

func deadJSON(d *ontime.DeadLetterInfo) wire.DeadLetter {
	out := wire.DeadLetter{
		ID: d.ID, Topic: d.Topic, DueAt: d.Due.UTC(), DiedAt: d.DiedAt.UTC(), Attempt: d.Attempt,
		Reason: d.Reason, LastError: d.LastError, Headers: d.Headers, CorrelationID: d.CorrelationID,
		ContentType: d.ContentType,
	}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	out.Body, out.BodyBase64 = wire.BodyJSON(d.ContentType, d.Body)
	return out
}

func (s *Server) listDead(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	opts, e := listOptions(r)
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
		out.Dead[i] = deadJSON(&page.Dead[i])
	}
	writeJSON(w, http.StatusOK, out)
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
