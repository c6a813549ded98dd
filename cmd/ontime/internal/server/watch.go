package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/ontime-go/ontime/cmd/ontime/internal/delivery"
	"github.com/ontime-go/ontime/cmd/ontime/internal/wire"
)

// watchWriteTimeout bounds one event write to a slow or vanished client.
const watchWriteTimeout = 10 * time.Second

// watch streams a topic's fired timers as server-sent events. While the
// stream is open the topic's timers go to this (and any other) watcher
// instead of the topic's target; each is acked once its event has been
// written and flushed to the connection.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if s.o.Dispatcher == nil {
		writeError(w, errorf(http.StatusNotImplemented, "watch_unavailable", "this endpoint needs a running server with workers"))
		return
	}
	wt, err := s.o.Dispatcher.Watch(topic)
	if err != nil {
		if errors.Is(err, delivery.ErrNotServed) {
			writeError(w, errorf(http.StatusForbidden, "topic_not_served", "this server does not deliver topic %q (add it to serve_topics or configure it): watching it would take its timers from their consumers", topic))
			return
		}
		if errors.Is(err, delivery.ErrClosed) {
			writeError(w, errorf(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down"))
			return
		}
		writeError(w, errorf(http.StatusInternalServerError, "internal", "%v", err))
		return
	}
	defer wt.Close()

	rc := http.NewResponseController(w)
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
	if err := write([]byte(": watching " + topic + "\n\n")); err != nil {
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
			return
		case <-ping.C:
			if err := write([]byte(": ping\n\n")); err != nil {
				return
			}
		case it := <-wt.C():
			buf.Reset()
			err := appendEvent(&buf, it.Msg)
			if err == nil {
				err = write(buf.Bytes())
			}
			it.Done(err)
			if err != nil {
				return
			}
		}
	}
}

// appendEvent writes one SSE event: "id", "event: timer" and a one-line
// JSON "data".
func appendEvent(buf *bytes.Buffer, m *delivery.Message) error {
	ev := wire.NewEvent(m.ID, m.Topic, m.Due, m.Attempt, m.Headers, m.CorrelationID, m.ContentType, m.Body)
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	buf.WriteString("id: ")
	buf.WriteString(m.ID)
	buf.WriteString("\nevent: timer\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	return nil
}
