package ontime

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ontime-go/ontime/ontimedriver"
)

// A Client's methods are in one file per job: publish.go (publish, cancel,
// fire now), inspect.go (get, list, count, topics), deadletters.go (list,
// replay and purge dead letters). Payloads are written and read in
// payload.go, for the Client and the Workers alike.

// Config configures a Client. The zero value (or nil) means the defaults.
type Config struct {
	// Prefix is glued in front of every topic this Client and its Workers
	// touch, with no separator (the faststream convention: prefix
	// "billing:" and topic "invoices" give the full topic
	// "billing:invoices"). Default "".
	Prefix string
	// Logger receives the library's logs. Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes refuses publishes whose encoded envelope is larger.
	// Default 1 MiB; negative means no limit.
	MaxBodyBytes int
	// Hooks observe and extend the Client and the Workers built from it,
	// so that a module (metrics, tracing, audit) can be plugged in without
	// the library importing it. Each value implements one or more of
	// [BeforePublishHook], [AfterPublishHook], [DeliveryStartHook],
	// [DeliveryEndHook], [StoreCallHook] and [UnfiredTicksHook]; NewClient refuses a value
	// that implements none.
	// Hooks run on the calling goroutine (the publisher's, the handler's):
	// keep them fast and never block in them. A delivery hook's panic is
	// logged and the delivery goes on, and so do the other hooks of that
	// call, so every DeliveryStart is paired with its DeliveryEnd; a
	// publish hook's panic reaches the caller of Publish. Hooks of one
	// kind run in the order given here; those that end something (AfterPublish,
	// DeliveryEnd) run in reverse order, so that spans nest. Default none.
	Hooks []any
}

// Client publishes, cancels and inspects timers on one store. It is safe
// for concurrent use. Workers are built from a Client with NewWorker.
type Client struct {
	drv     ontimedriver.Driver // orig, or orig wrapped for StoreCallHooks
	orig    ontimedriver.Driver
	prefix  string
	log     *slog.Logger
	maxBody int
	lenient bool
	hooks   hookSet
	pub     publishCoalescer
	can     cancelCoalescer
}

// NewClient returns a Client on the store behind d. The Client does not own
// d: closing d is the caller's job, after every Worker has stopped.
func NewClient(d ontimedriver.Driver, cfg *Config) (*Client, error) {
	if d == nil {
		return nil, invalidf("NewClient: driver is nil")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.Prefix != "" {
		// The prefix must itself be a valid topic fragment.
		if err := ontimedriver.ValidateTopic(c.Prefix); err != nil {
			return nil, fmt.Errorf("Config.Prefix: %w", err)
		}
	}
	hooks, err := newHookSet(c.Hooks)
	if err != nil {
		return nil, fmt.Errorf("NewClient: %w", err)
	}
	drv := d
	if len(hooks.store) > 0 {
		drv = &observedDriver{Driver: d, hooks: hooks.store, log: c.Logger}
	}
	return &Client{
		drv:     drv,
		orig:    d,
		prefix:  c.Prefix,
		log:     c.Logger,
		maxBody: c.MaxBodyBytes,
		lenient: ontimedriver.AcceptsLegacyPayloads(drv),
		hooks:   hooks,
	}, nil
}

// Driver returns the store the Client was built on.
func (c *Client) Driver() ontimedriver.Driver { return c.orig }

// Prefix returns Config.Prefix: the start of the full topic (the name the
// Driver sees) of every topic this Client names.
func (c *Client) Prefix() string { return c.prefix }

// fullTopic applies the client prefix and validates the result.
func (c *Client) fullTopic(topic string) (string, error) {
	if topic == "" {
		return "", invalidf("topic is empty")
	}
	full := c.prefix + topic
	if err := ontimedriver.ValidateTopic(full); err != nil {
		return "", err
	}
	return full, nil
}

// Ping checks that the store is reachable.
func (c *Client) Ping(ctx context.Context) error { return c.drv.Ping(ctx) }
