package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wire"
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
