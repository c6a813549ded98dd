// Package testkit connects package ontimetest to what it drives inside
// package ontime, which ontime does not export: ontime sets the variables
// below when it is initialised. ontimetest imports ontime, so they are set
// before ontimetest uses them. (The same bridge as gRPC's internal
// package: a test kit gets the internals it needs, and the public API
// stays what users call.)
package testkit

import (
	"context"
	"log/slog"
	"time"
)

// Config is what a test worker is built with. Middleware holds a
// []ontime.Middleware and Defaults an ontime.TopicOptions (or nil), types
// this package cannot name.
type Config struct {
	Middleware any
	Hooks      []any
	Defaults   any
	Logger     *slog.Logger
}

// Delivery is the timer a test worker delivers.
type Delivery struct {
	Topic         string
	ID            string
	Attempt       int
	Due           time.Time
	Headers       map[string]string
	CorrelationID string
	// Body is encoded as Publish encodes it, unless Payload is set: then
	// Payload is the stored payload as is, decoded leniently if Lenient.
	Body    any
	Payload []byte
	Lenient bool
	// SettleErr is the store's answer to manual settles.
	SettleErr error
}

// Worker is a test worker. Its dynamic type also implements
// ontime.Registrar, so handlers are registered on it with ontime.Handle.
type Worker interface {
	// Work runs the handler registered for d.Topic on d, as a worker
	// would (decode, hooks, middleware, handler, outcome), with no store,
	// and returns the ontime.DeliveryResult.
	Work(ctx context.Context, d Delivery) (result any, err error)
	// Build decodes d and calls d.Topic's handler with it, and nothing
	// more (no hooks, no middleware, no outcome). The manual settles of
	// the message the handler got are recorded: manual returns the last
	// one (an ontime.DeliveryResult) and whether there was one.
	Build(ctx context.Context, d Delivery) (manual func() (any, bool), err error)
}

var (
	// NewWorker returns a test worker.
	NewWorker func(Config) (Worker, error)
	// EncodeBody encodes a body as Publish does: the bytes and the
	// content type.
	EncodeBody func(body any) ([]byte, string, error)
)
