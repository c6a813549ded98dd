package server

import (
	"errors"

	"github.com/ontime-go/ontime/internal/wire"
)

// Dispatcher is what the API asks of the server's delivery workers
// (`ontime serve` passes its delivery dispatcher; the embeddable dashboard
// passes none, so that it needs nothing beyond the library).
type Dispatcher interface {
	// Ensure starts topic's worker if it is not running (a timer was just
	// published to it).
	Ensure(topic string)
	// Counters are the workers' numbers for /v1/stats.
	Counters() Counters
	// Watch connects a watch stream to topic: a confirming one
	// (o.Confirm) takes the topic's timers, a tap sees copies. It returns
	// ErrNotServed for a topic the server does not deliver and ErrClosed
	// while shutting down.
	Watch(topic string, o WatchOptions) (Watch, error)
	// Ack confirms events of topic's confirming watch streams by event id.
	Ack(topic string, ids []string) (acked int, unknown []string)
}

// Counters are the delivery workers' numbers reported by /v1/stats.
type Counters struct {
	Delivered, Failed int64
	Workers, Watchers int
}

// WatchOptions configure a watch stream (Dispatcher.Watch).
type WatchOptions struct {
	// Confirm makes the stream take the topic's timers, each event
	// confirmed with Dispatcher.Ack; without it the stream sees copies.
	Confirm bool
	// OnEnd, if set, is called once when the dispatcher ends the stream
	// (an event was not confirmed in time); Gone is closed then too.
	OnEnd func()
}

// WatchEvent is one event for a watch stream to write.
type WatchEvent struct {
	// ID is the event id a confirming client acks.
	ID string
	// Event is the timer as the stream's "data" carries it.
	Event wire.Event
	// Missed counts the copies a tap dropped since its previous event
	// (it reads too slowly).
	Missed int
}

// Watch is one connected watch stream.
type Watch interface {
	// Ready signals that Next may have events.
	Ready() <-chan struct{}
	// Next returns the next event to write, if any.
	Next() (WatchEvent, bool)
	// Gone is closed when the dispatcher ended the stream; Reason says why.
	Gone() <-chan struct{}
	Reason() string
	// Close ends the stream; its unconfirmed timers return to the topic.
	Close()
	// Release ends the stream at shutdown, handing its timers back.
	Release()
}

// Errors Dispatcher.Watch returns.
var (
	ErrNotServed = errors.New("topic not served by this server")
	ErrClosed    = errors.New("shutting down")
)
