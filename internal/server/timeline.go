package server

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver"
)

// Timeline limits: the step and the number of buckets.
const (
	minTimelineStep    = time.Second
	maxTimelineStep    = 366 * 24 * time.Hour
	defaultTimelineN   = 60
	defaultTimelineStp = time.Minute
	// maxTimelineSpan is the longest step × buckets: the largest
	// time.Duration, about 292 years.
	maxTimelineSpan = time.Duration(math.MaxInt64)
)

// timeline counts a topic's timers per due-time bucket with one CountDue
// store call (ZCOUNTs on Redis, an index scan on the embedded store): no
// timer is loaded.
func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	start, step, n, e := timelineQuery(r)
	if e != nil {
		writeError(w, e)
		return
	}
	bounds := make([]time.Time, n+1)
	for i := range bounds {
		bounds[i] = start.Add(time.Duration(i) * step)
	}
	if last := bounds[n]; last.After(ontimedriver.MaxDue) {
		writeError(w, errorf(http.StatusBadRequest, "invalid_query", "the timeline ends at %s, after the latest due time %s", last.Format(time.RFC3339), ontimedriver.MaxDue.Format(time.RFC3339)))
		return
	}
	counts, err := s.o.Client.CountDue(r.Context(), topic, bounds)
	if err != nil {
		if errors.Is(err, ontime.ErrInvalid) {
			writeError(w, errorf(http.StatusBadRequest, "invalid_query", "%s", trimInvalid(err)))
			return
		}
		writeError(w, s.storeError(w, r, err))
		return
	}
	writeJSON(w, http.StatusOK, wire.Timeline{
		Topic: topic, Start: start.UTC(), Step: step.String(), StepSec: step.Seconds(),
		Before: counts[0], Counts: counts[1 : n+1], After: counts[n+1],
	})
}

// timelineQuery reads step (a Go duration, 1s to 366 days, default 1m),
// buckets (1 to MaxDueBounds-1, default 60; step × buckets at most 292
// years) and start (RFC 3339; default
// now rounded down to a multiple of the step, time.Truncate).
func timelineQuery(r *http.Request) (start time.Time, step time.Duration, n int, e *apiError) {
	q := r.URL.Query()
	for _, k := range []string{"start", "step", "buckets"} {
		switch vs := q[k]; {
		case len(vs) > 1:
			return start, 0, 0, errorf(http.StatusBadRequest, "invalid_query", "%s is given %d times; give it once", k, len(vs))
		case len(vs) == 1 && vs[0] == "":
			return start, 0, 0, errorf(http.StatusBadRequest, "invalid_query", "%s is empty; leave it out instead", k)
		}
	}
	step = defaultTimelineStp
	if v := q.Get("step"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < minTimelineStep || d > maxTimelineStep {
			return start, 0, 0, errorf(http.StatusBadRequest, "invalid_query", "step %q: want a Go duration from 1s to 8784h (366 days), such as 1m or 1h", v)
		}
		step = d
	}
	n = defaultTimelineN
	if v := q.Get("buckets"); v != "" {
		b, err := strconv.Atoi(v)
		if err != nil || b < 1 || b > ontimedriver.MaxDueBounds-1 {
			return start, 0, 0, errorf(http.StatusBadRequest, "invalid_query", "buckets %q: want a number from 1 to %d", v, ontimedriver.MaxDueBounds-1)
		}
		n = b
	}
	// The bounds are start + i·step: the whole span, step × buckets, must
	// fit a time.Duration (292 years); past that it wraps around.
	if step > maxTimelineSpan/time.Duration(n) {
		return start, 0, 0, errorf(http.StatusBadRequest, "invalid_query", "step × buckets (%s × %d) spans more than 292 years, the longest timeline; give fewer buckets or a shorter step", q.Get("step"), n)
	}
	if v := q.Get("start"); v != "" {
		at, ae := parseAt(v)
		if ae != nil {
			ae.code = "invalid_query"
			ae.msg = "start: " + ae.msg
			return start, 0, 0, ae
		}
		start = at
	} else {
		start = time.Now().Truncate(step)
	}
	if start.Before(ontimedriver.MinDue) {
		return start, 0, 0, errorf(http.StatusBadRequest, "invalid_query", "start %s is before 1970", start.Format(time.RFC3339))
	}
	return start, step, n, nil
}

// fireTimer makes a scheduled timer due now (FireNow): 200 with its new due
// time, 404 when there is none, 409 leased while it is being delivered.
func (s *Server) fireTimer(w http.ResponseWriter, r *http.Request) {
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
	due, err := s.o.Client.FireNow(r.Context(), topic, id)
	if err != nil {
		if errors.Is(err, ontime.ErrLeased) {
			writeError(w, errorf(http.StatusConflict, "leased", "the timer is being delivered (a worker holds its lease); it cannot be fired again now"))
			return
		}
		writeError(w, s.storeError(w, r, err))
		return
	}
	if s.o.Dispatcher != nil {
		s.o.Dispatcher.Ensure(topic)
	}
	writeJSON(w, http.StatusOK, wire.Created{ID: id, Topic: topic, DueAt: due.UTC()})
}
