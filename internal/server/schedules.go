package server

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/schedule"
)

// createSchedule publishes a recurring timer (docs/recurring.md): upsert
// by id, or 409 exists with if_absent. The store must keep recurring
// timers: the faststream-compatible Redis layout answers 501.
func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	var in wire.ScheduleIn
	if e := decodeJSON(w, r, s.singleLimit(), &in); e != nil {
		writeError(w, e)
		return
	}
	if in.ID == "" {
		writeError(w, errorf(http.StatusBadRequest, "invalid_id", "id is required: it names the recurring timer (publishing it again replaces it)"))
		return
	}
	if e := checkID(in.ID); e != nil {
		writeError(w, e)
		return
	}
	sched, err := wire.ScheduleOf(&in)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "invalid_schedule", "%s", err.Error()))
		return
	}
	missed, err := wire.MissedOf(in.Missed)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "invalid_schedule", "%s", err.Error()))
		return
	}
	opts := []ontime.PublishOption{ontime.OnMissed(missed)}
	if in.Jitter != nil {
		d, err := wire.JitterOf(*in.Jitter)
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, "invalid_schedule", "%s", err.Error()))
			return
		}
		opts = append(opts, ontime.Jitter(d))
	}
	// The body, headers and correlation id follow a timer's rules.
	zero := "0s"
	p, e := s.parseTimer(&wire.TimerIn{Body: in.Body, BodyBase64: in.BodyBase64, Headers: in.Headers, CorrelationID: in.CorrelationID, Delay: &zero})
	if e != nil {
		writeError(w, e)
		return
	}
	if len(p.timer.Headers) > 0 {
		opts = append(opts, ontime.WithHeaders(p.timer.Headers))
	}
	if p.timer.CorrelationID != "" {
		opts = append(opts, ontime.WithCorrelationID(p.timer.CorrelationID))
	}
	if in.IfAbsent {
		opts = append(opts, ontime.IfAbsent())
	}
	due, err := s.o.Client.PublishRecurring(r.Context(), topic, in.ID, sched, p.timer.Body, opts...)
	if err != nil {
		writeError(w, s.scheduleError(w, r, err))
		return
	}
	if s.o.Dispatcher != nil {
		s.o.Dispatcher.Ensure(topic)
	}
	w.Header().Set("Location", timerURL(topic, in.ID))
	out := wire.ScheduleCreated{ID: in.ID, Topic: topic, Schedule: sched.String(), Missed: missed.String(), DueAt: due.UTC()}
	if in.Jitter != nil {
		d, _ := wire.JitterOf(*in.Jitter)
		out.Jitter = d.String()
	}
	writeJSON(w, http.StatusCreated, out)
}

// scheduleError is storeError, and 501 for a store that keeps no
// recurring timers, or none on this topic (a sharded Redis topic), with
// the store's reason.
func (s *Server) scheduleError(w http.ResponseWriter, r *http.Request, err error) *apiError {
	if errors.Is(err, ontime.ErrUnsupported) {
		return errorf(http.StatusNotImplemented, "recurring_unsupported", "recurring timers are not kept here (use the native Redis layout or the embedded store, and an unsharded topic): %v", err)
	}
	return s.storeError(w, r, err)
}

// pauseSchedule and resumeSchedule pause and resume a recurring timer and
// answer it as it now is. A paused schedule's tick is not claimed (one
// running finishes); resuming arms the first tick after now.
func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	s.pauseOrResume(w, r, s.o.Client.Pause)
}

func (s *Server) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	s.pauseOrResume(w, r, s.o.Client.Resume)
}

func (s *Server) pauseOrResume(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, topic, id string) error) {
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
	if err := op(r.Context(), topic, id); err != nil {
		if errors.Is(err, ontime.ErrNotFound) {
			writeError(w, errorf(http.StatusNotFound, "not_found", "no recurring timer with this id"))
			return
		}
		writeError(w, s.scheduleError(w, r, err))
		return
	}
	ti, err := s.o.Client.Get(r.Context(), topic, id)
	if err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	if s.o.Dispatcher != nil {
		s.o.Dispatcher.Ensure(topic)
	}
	writeJSON(w, http.StatusOK, timerJSON(ti, 0))
}

// backfill runs the ticks of a recurring timer in a past range, each once:
// each tick in (from, to] is published as a one-shot timer due now, with
// the recurring timer's body, headers and correlation id, the tick's
// instant in header ontime-tick, and the id wire.BackfillID(id, tick),
// if absent, so that backfilling a range again while its ticks are pending
// publishes none twice (delivered ones are gone and run again). At
// most MaxBatch ticks per request (one atomic write); to must not be in
// the future (a tick is never run before its instant).
func (s *Server) backfill(w http.ResponseWriter, r *http.Request) {
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
	var in wire.BackfillIn
	if e := decodeJSON(w, r, s.singleLimit(), &in); e != nil {
		writeError(w, e)
		return
	}
	if in.From == "" || in.To == "" {
		writeError(w, errorf(http.StatusBadRequest, "invalid_backfill", `give "from" and "to", RFC 3339 instants: the ticks in (from, to] run`))
		return
	}
	from, e := parseAt(in.From)
	if e != nil {
		e.code = "invalid_backfill"
		writeError(w, e)
		return
	}
	to, e := parseAt(in.To)
	if e != nil {
		e.code = "invalid_backfill"
		writeError(w, e)
		return
	}
	switch {
	case !to.After(from):
		writeError(w, errorf(http.StatusBadRequest, "invalid_backfill", "to %s is not after from %s", in.To, in.From))
		return
	case to.After(time.Now()):
		writeError(w, errorf(http.StatusBadRequest, "invalid_backfill", "to %s is in the future: a tick never runs before its instant", in.To))
		return
	}
	ti, err := s.o.Client.Get(r.Context(), topic, id)
	if err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	if ti.Recurring == nil {
		writeError(w, errorf(http.StatusNotFound, "not_found", "no recurring timer with this id"))
		return
	}
	sched, err := schedule.Parse(ti.Recurring.Schedule)
	if err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	ticks := schedule.Missed(sched, from, to, MaxBatch+1)
	if len(ticks) > MaxBatch {
		writeError(w, errorf(http.StatusBadRequest, "invalid_backfill", "the range holds more than %d ticks (one atomic write): split it", MaxBatch))
		return
	}
	ps := make([]parsed, len(ticks))
	for i, tick := range ticks {
		h := maps.Clone(ti.Headers)
		if h == nil {
			h = map[string]string{}
		}
		h[wire.TickHeader] = tick.UTC().Format(time.RFC3339Nano)
		ps[i] = parsed{ifAbsent: true, timer: ontime.Timer{
			ID: wire.BackfillID(id, tick), Body: bodyOf(ti.ContentType, ti.Body), Headers: h, CorrelationID: ti.CorrelationID,
		}}
	}
	out := wire.Backfilled{Ticks: len(ticks)}
	if len(ps) > 0 {
		res, err := s.publish(r, topic, ps)
		if err != nil {
			writeError(w, s.storeError(w, r, err))
			return
		}
		for _, pr := range res {
			switch {
			case pr.Err == nil:
				out.Published++
			case errors.Is(pr.Err, ontime.ErrExists):
				out.Existing++
			default:
				writeError(w, s.storeError(w, r, pr.Err))
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// bodyOf gives a stored body back to the library with its content type.
func bodyOf(contentType string, body []byte) any {
	switch {
	case len(body) == 0:
		return nil
	case strings.HasPrefix(contentType, wire.ContentTypeJSON):
		return json.RawMessage(body)
	case strings.HasPrefix(contentType, wire.ContentTypeText):
		return string(body)
	}
	return body
}
