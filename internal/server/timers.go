package server

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wire"
)

// publish schedules validated timers of one topic in one store call: the
// library writes up to MaxBatch timers in one atomic call (one transaction
// of the embedded store, one Lua script on Redis), so they are stored all
// together or not at all. Callers keep to MaxBatch timers that share one
// if_absent mode.
func (s *Server) publish(r *http.Request, topic string, ps []parsed) ([]ontime.PublishResult, error) {
	timers := make([]ontime.Timer, len(ps))
	for i := range ps {
		timers[i] = ps[i].timer
	}
	var opts []ontime.BatchOption
	if len(ps) > 0 && ps[0].ifAbsent {
		opts = append(opts, ontime.BatchIfAbsent())
	}
	res, err := s.o.Client.PublishBatch(r.Context(), topic, timers, opts...)
	if err != nil {
		return nil, err
	}
	if s.o.Dispatcher != nil {
		s.o.Dispatcher.Ensure(topic)
	}
	return res, nil
}

func timerURL(topic, id string) string {
	return "/v1/topics/" + url.PathEscape(topic) + "/timers/" + url.PathEscape(id)
}

func (s *Server) createTimer(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	data, e := readBody(w, r, s.singleLimit())
	if e != nil {
		writeError(w, e)
		return
	}
	var in wire.TimerIn
	if !decodeTimerFast(data, &in) {
		in = wire.TimerIn{}
		if e := unmarshalJSON(data, &in); e != nil {
			writeError(w, e)
			return
		}
	}
	p, e := s.parseTimer(&in)
	if e != nil {
		writeError(w, e)
		return
	}
	res, err := s.publish(r, topic, []parsed{p})
	if err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	if res[0].Err != nil {
		writeError(w, s.storeError(w, r, res[0].Err))
		return
	}
	w.Header().Set("Location", timerURL(topic, res[0].ID))
	due := res[0].Due.UTC()
	if b, ok := appendCreated(make([]byte, 0, 128), res[0].ID, topic, due); ok {
		writeBody(w, http.StatusCreated, append(b, '\n'))
		return
	}
	writeJSON(w, http.StatusCreated, wire.Created{ID: res[0].ID, Topic: topic, DueAt: due})
}

func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	var in []wire.TimerIn
	if e := decodeJSON(w, r, s.batchLimit(), &in); e != nil {
		writeError(w, e)
		return
	}
	switch {
	case len(in) == 0:
		writeError(w, errorf(http.StatusBadRequest, "invalid_batch", "the batch is empty"))
		return
	case len(in) > MaxBatch:
		writeError(w, errorf(http.StatusBadRequest, "batch_too_large", "the batch has %d timers; the limit is %d (one atomic store write): split it", len(in), MaxBatch))
		return
	}
	ps := make([]parsed, len(in))
	for i := range in {
		p, e := s.parseTimer(&in[i])
		if e != nil {
			e.msg = fmt.Sprintf("timer %d: %s", i, e.msg)
			writeError(w, e)
			return
		}
		if i > 0 && p.ifAbsent != ps[0].ifAbsent {
			writeError(w, errorf(http.StatusBadRequest, "invalid_batch",
				"timer %d: if_absent is %v but timer 0 has %v; a batch is one atomic write in one mode: send the two kinds in two batches", i, p.ifAbsent, ps[0].ifAbsent))
			return
		}
		ps[i] = p
	}
	res, err := s.publish(r, topic, ps)
	if err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	out := wire.BatchResult{Results: make([]wire.BatchItem, len(res))}
	for i, pr := range res {
		it := wire.BatchItem{ID: pr.ID, Topic: topic, Status: http.StatusCreated}
		if pr.Err != nil {
			ae := s.storeError(w, r, pr.Err)
			it.Status = ae.status
			it.Error = &wire.ErrorBody{Code: ae.code, Message: ae.msg}
		} else {
			due := pr.Due.UTC()
			it.DueAt = &due
		}
		out.Results[i] = it
	}
	writeJSON(w, http.StatusOK, out)
}

// timerJSON is a timer's answer; a body over bodyLimit bytes (> 0) is cut
// (wire.CutBody).
func timerJSON(ti *ontime.TimerInfo, bodyLimit int) wire.Timer {
	t := wire.Timer{
		ID: ti.ID, Topic: ti.Topic, DueAt: ti.Due.UTC(), State: string(ti.State), Attempt: ti.Attempt,
		LastError: ti.LastError, Headers: ti.Headers, CorrelationID: ti.CorrelationID, ContentType: ti.ContentType,
	}
	if t.Headers == nil {
		t.Headers = map[string]string{}
	}
	if !ti.LeaseUntil.IsZero() {
		lu := ti.LeaseUntil.UTC()
		t.LeaseUntil = &lu
	}
	if cut, ok := wire.CutBody(ti.ContentType, ti.Body, bodyLimit); ok {
		t.BodyCut = cut
	} else {
		t.Body, t.BodyBase64 = wire.BodyJSON(ti.ContentType, ti.Body)
	}
	t.Recurring = wire.RecurringOf(ti.Recurring)
	if ti.DecodeError != "" && t.LastError == "" {
		t.LastError = "stored envelope does not decode: " + ti.DecodeError
	}
	return t
}

func (s *Server) getTimer(w http.ResponseWriter, r *http.Request) {
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
	ti, err := s.o.Client.Get(r.Context(), topic, id)
	if err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	writeJSON(w, http.StatusOK, timerJSON(ti, 0))
}

func (s *Server) deleteTimer(w http.ResponseWriter, r *http.Request) {
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
	if err := s.o.Client.Cancel(r.Context(), topic, id); err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// cancelTimers deletes the timers {"ids": [...]} lists, up to MaxCancel in
// one atomic store call, and answers each id: 204 deleted, 404 none. The
// list must not be empty (an empty list never means "all"); every id is
// checked before anything is deleted.
func (s *Server) cancelTimers(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if r.ContentLength == 0 {
		writeError(w, errorf(http.StatusBadRequest, "missing_ids", `the request has no body: send {"ids": ["id", ...]}`))
		return
	}
	var in wire.CancelIn
	if e := decodeJSON(w, r, s.batchLimit(), &in); e != nil {
		writeError(w, e)
		return
	}
	switch {
	case len(in.IDs) == 0:
		writeError(w, errorf(http.StatusBadRequest, "missing_ids", `"ids" is missing or empty: list the timers to cancel (an empty list never means all)`))
		return
	case len(in.IDs) > MaxCancel:
		writeError(w, errorf(http.StatusBadRequest, "too_many_ids", "%d ids; cancel at most %d at once (one atomic store write): split them", len(in.IDs), MaxCancel))
		return
	}
	for i, id := range in.IDs {
		if e := checkID(id); e != nil {
			e.msg = fmt.Sprintf("id %d: %s", i, e.msg)
			writeError(w, e)
			return
		}
	}
	res, err := s.o.Client.CancelBatch(r.Context(), topic, in.IDs)
	if err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	out := wire.CancelResult{Results: make([]wire.CancelItem, len(res))}
	for i, err := range res {
		it := wire.CancelItem{ID: in.IDs[i], Status: http.StatusNoContent}
		if err != nil {
			ae := s.storeError(w, r, err)
			it.Status = ae.status
			it.Error = &wire.ErrorBody{Code: ae.code, Message: ae.msg}
		} else {
			out.Cancelled++
		}
		out.Results[i] = it
	}
	writeJSON(w, http.StatusOK, out)
}

// listOptions reads before, limit, cursor and body_limit. Each may be
// given once; one that is given must not be empty (an empty cursor would
// silently start over at page 1). A cursor the store did not make is
// refused by the store (ErrInvalid, answered as invalid_query by
// listError). body_limit (1 to 1 MiB; 0: whole bodies) cuts each body
// longer than that (wire.CutBody), so that a page of large bodies stays
// small: a dashboard's list loads the first KiB of each.
func listOptions(r *http.Request) (ontime.ListOptions, int, *apiError) {
	var o ontime.ListOptions
	q := r.URL.Query()
	for _, k := range []string{"before", "limit", "cursor", "body_limit"} {
		switch vs := q[k]; {
		case len(vs) > 1:
			return o, 0, errorf(http.StatusBadRequest, "invalid_query", "%s is given %d times; give it once", k, len(vs))
		case len(vs) == 1 && vs[0] == "":
			return o, 0, errorf(http.StatusBadRequest, "invalid_query", "%s is empty; leave it out instead", k)
		}
	}
	if v := q.Get("before"); v != "" {
		at, e := parseAt(v)
		if e != nil {
			e.code = "invalid_query"
			e.msg = "before: " + e.msg
			return o, 0, e
		}
		o.Before = at
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return o, 0, errorf(http.StatusBadRequest, "invalid_query", "limit %q: want an integer from 1 to 1000", v)
		}
		o.Limit = n
	}
	bodyLimit := 0
	if v := q.Get("body_limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<20 {
			return o, 0, errorf(http.StatusBadRequest, "invalid_query", "body_limit %q: want an integer from 1 to %d (bytes)", v, 1<<20)
		}
		bodyLimit = n
	}
	o.Cursor = q.Get("cursor")
	return o, bodyLimit, nil
}

// listError answers a failed List or DeadLetters: the store refuses a
// malformed cursor with ErrInvalid (invalid_query).
func (s *Server) listError(w http.ResponseWriter, r *http.Request, err error) *apiError {
	if errors.Is(err, ontime.ErrInvalid) {
		return errorf(http.StatusBadRequest, "invalid_query", "%s", trimInvalid(err))
	}
	return s.storeError(w, r, err)
}

func (s *Server) listTimers(w http.ResponseWriter, r *http.Request) {
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
	page, err := s.o.Client.List(r.Context(), topic, opts)
	if err != nil {
		writeError(w, s.listError(w, r, err))
		return
	}
	out := wire.TimerPage{Timers: make([]wire.Timer, len(page.Timers)), NextCursor: page.NextCursor}
	for i := range page.Timers {
		out.Timers[i] = timerJSON(&page.Timers[i], bodyLimit)
	}
	writeJSON(w, http.StatusOK, out)
}

// maxDelaySec caps delay_sec of the simple API (about 100 years).
const maxDelaySec = 100 * 365 * 24 * 3600

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	var in wire.MessageIn
	if e := decodeJSON(w, r, s.singleLimit(), &in); e != nil {
		writeError(w, e)
		return
	}
	if in.Message == nil {
		writeError(w, errorf(http.StatusBadRequest, "invalid_message", `field "message" (a string) is required`))
		return
	}
	if int64(len(*in.Message)) > s.o.MaxBodyBytes {
		writeError(w, errorf(http.StatusRequestEntityTooLarge, "body_too_large", "the message is %d bytes; the limit is %d", len(*in.Message), s.o.MaxBodyBytes))
		return
	}
	var delay time.Duration
	if in.DelaySec != nil {
		d := *in.DelaySec
		if d < 0 || d > maxDelaySec || math.IsNaN(d) {
			writeError(w, errorf(http.StatusBadRequest, "invalid_delay", "delay_sec %v: want a number of seconds from 0 to %d", d, maxDelaySec))
			return
		}
		delay = time.Duration(d * float64(time.Second))
	}
	p := parsed{timer: ontime.Timer{Body: *in.Message, Delay: delay}}
	res, err := s.publish(r, MessagesTopic, []parsed{p})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		writeError(w, s.storeError(w, r, err))
		return
	}
	w.Header().Set("Location", timerURL(MessagesTopic, res[0].ID))
	writeJSON(w, http.StatusCreated, wire.MessageOut{ID: res[0].ID, ScheduledFor: res[0].Due.Unix()})
}

// MessagesTopic is the topic of the simple API.
const MessagesTopic = "messages"
