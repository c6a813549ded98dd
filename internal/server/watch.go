package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ontime-go/ontime/internal/wire"
)

// watchWriteTimeout bounds one event write to a slow or vanished client.
const watchWriteTimeout = 10 * time.Second

// maxAckIDs caps the ids of one watch:ack request.
const maxAckIDs = 1000

// watch streams a topic's fired timers as server-sent events.
//
// With ?ack=explicit the stream takes the topic's timers from its target
// while it is open, and each event's id must be confirmed with POST
// …/watch:ack (see delivery.Watcher): a timer counts as delivered only
// then. Without it (a plain curl -N) the stream sees a copy of each
// delivery of the topic and takes nothing, so it cannot make a timer
// disappear.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	var confirm bool
	switch v := r.URL.Query().Get("ack"); v {
	case "", "none":
	case "explicit":
		confirm = true
	default:
		writeError(w, errorf(http.StatusBadRequest, "invalid_ack", "ack %q: want explicit (the stream takes the topic's timers; confirm each event with POST …/watch:ack) or none (copies only; the default)", v))
		return
	}
	if s.o.Dispatcher == nil {
		writeError(w, errorf(http.StatusNotImplemented, "watch_unavailable", "this endpoint needs a running server with workers"))
		return
	}
	rc := http.NewResponseController(w)
	wt, err := s.o.Dispatcher.Watch(topic, WatchOptions{
		Confirm: confirm,
		// Unblock a write to a client that stopped reading: the stream ends.
		OnEnd: func() { _ = rc.SetWriteDeadline(time.Now()) },
	})
	if err != nil {
		if errors.Is(err, ErrNotServed) {
			writeError(w, errorf(http.StatusForbidden, "topic_not_served", "this server does not deliver topic %q (add it to serve_topics or configure it): watching it would take its timers from their consumers", topic))
			return
		}
		if errors.Is(err, ErrClosed) {
			writeError(w, errorf(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down"))
			return
		}
		writeError(w, errorf(http.StatusInternalServerError, "internal", "%v", err))
		return
	}
	defer wt.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return err
		}
		err := rc.Flush()
		_ = rc.SetWriteDeadline(time.Time{})
		return err
	}
	hello := ": watching " + topic + "\n\n"
	if confirm {
		hello += ": ack=explicit: confirm each event's id with POST " + r.URL.Path + ":ack {\"ids\": [...]}\n\n"
	} else {
		hello += ": copies of the topic's deliveries; this stream takes nothing (?ack=explicit takes the timers)\n\n"
	}
	if err := write([]byte(hello)); err != nil {
		return
	}
	ping := time.NewTicker(s.o.WatchPing)
	defer ping.Stop()
	var buf bytes.Buffer
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.o.Done:
			wt.Release()
			return
		case <-wt.Gone():
			if why := wt.Reason(); why != "" {
				_ = write([]byte(": closing: " + oneLine(why) + "\n\n"))
			}
			return
		case <-ping.C:
			if err := write([]byte(": ping\n\n")); err != nil {
				return
			}
		case <-wt.Ready():
			for {
				ev, ok := wt.Next()
				if !ok {
					break
				}
				buf.Reset()
				if ev.Missed > 0 {
					fmt.Fprintf(&buf, ": missed %d events: this stream reads too slowly\n\n", ev.Missed)
				}
				if err := appendEvent(&buf, ev); err != nil {
					s.log.Error("watch: an event does not encode", "topic", topic, "id", ev.Event.ID, "err", err)
					return // its timer comes back (an unconfirmed event)
				}
				if err := write(buf.Bytes()); err != nil {
					return
				}
			}
		}
	}
}

// oneLine keeps a text on one SSE comment line.
func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }

// appendEvent writes one SSE event: its id, "event: timer" and a one-line
// JSON "data" (the Event schema).
func appendEvent(buf *bytes.Buffer, ev WatchEvent) error {
	data, err := json.Marshal(ev.Event)
	if err != nil {
		return err
	}
	buf.WriteString("id: ")
	buf.WriteString(ev.ID)
	buf.WriteString("\nevent: timer\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	return nil
}

// watchAck confirms events of confirming watch streams of the topic.
func (s *Server) watchAck(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	var in wire.WatchAck
	if r.ContentLength == 0 {
		writeError(w, errorf(http.StatusBadRequest, "missing_ids", `the request has no body: send {"ids": ["<event id>", ...]}`))
		return
	}
	if e := decodeJSON(w, r, s.singleLimit(), &in); e != nil {
		writeError(w, e)
		return
	}
	switch {
	case len(in.IDs) == 0:
		writeError(w, errorf(http.StatusBadRequest, "missing_ids", `"ids" is missing or empty: list the ids of the events to confirm`))
		return
	case len(in.IDs) > maxAckIDs:
		writeError(w, errorf(http.StatusBadRequest, "too_many_ids", "%d ids; confirm at most %d at once", len(in.IDs), maxAckIDs))
		return
	}
	if s.o.Dispatcher == nil {
		writeError(w, errorf(http.StatusNotImplemented, "watch_unavailable", "this endpoint needs a running server with workers"))
		return
	}
	acked, unknown := s.o.Dispatcher.Ack(topic, in.IDs)
	if unknown == nil {
		unknown = []string{}
	}
	writeJSON(w, http.StatusOK, wire.WatchAcked{Acked: acked, Unknown: unknown})
}
