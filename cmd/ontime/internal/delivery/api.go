package delivery

import (
	"errors"

	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wire"
)

// API returns the dispatcher as the HTTP API's server.Dispatcher (nil for a
// nil dispatcher: the API then has no watch stream and starts no worker).
func (d *Dispatcher) API() server.Dispatcher {
	if d == nil {
		return nil
	}
	return apiDispatcher{d}
}

type apiDispatcher struct{ d *Dispatcher }

func (a apiDispatcher) Ensure(topic string) { a.d.Ensure(topic) }

func (a apiDispatcher) Counters() server.Counters {
	c := a.d.Counters()
	return server.Counters{Delivered: c.Delivered, Failed: c.Failed, Workers: c.Workers, Watchers: c.Watchers}
}

func (a apiDispatcher) Ack(topic string, ids []string) (int, []string) { return a.d.Ack(topic, ids) }

func (a apiDispatcher) Watch(topic string, o server.WatchOptions) (server.Watch, error) {
	w, err := a.d.Watch(topic, WatchOptions{Confirm: o.Confirm, OnEnd: o.OnEnd})
	switch {
	case errors.Is(err, ErrNotServed):
		return nil, server.ErrNotServed
	case errors.Is(err, ErrClosed):
		return nil, server.ErrClosed
	case err != nil:
		return nil, err
	}
	return apiWatch{w}, nil
}

// apiWatch is a Watcher whose events carry the stream's JSON form.
type apiWatch struct{ *Watcher }

func (w apiWatch) Next() (server.WatchEvent, bool) {
	ev, ok := w.Watcher.Next()
	if !ok {
		return server.WatchEvent{}, false
	}
	m := ev.Msg
	return server.WatchEvent{
		ID:     ev.ID,
		Missed: ev.Missed,
		Event:  wire.NewEvent(m.ID, m.Topic, m.Due, m.Attempt, m.Headers, m.CorrelationID, m.ContentType, m.Body),
	}, true
}
