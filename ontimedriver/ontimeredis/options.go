package ontimeredis

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Layout selects how timers are laid out in Redis.
type Layout int

const (
	// Native is ontime's own layout: every key of a topic under one hash
	// tag, attempt counters, dead letters, lease tokens, wake-ups.
	Native Layout = iota
	// Compatible is the layout of faststream-redis-timers (Python), byte for
	// byte: a Python service and an ontime worker can share topics in both
	// directions. See the package documentation for what it cannot keep.
	Compatible
)

// String returns "native" or "compatible".
func (l Layout) String() string {
	switch l {
	case Native:
		return "native"
	case Compatible:
		return "compatible"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// Options configure a Driver. The zero value (or nil) is the native layout
// with prefix "ontime:".
type Options struct {
	// Layout is Native (default) or Compatible.
	Layout Layout

	// Prefix starts every native key: "ontime:" (the default) gives keys
	// such as "ontime:{invoices}:due". Must not contain '{' or '}'.
	Prefix string

	// TimelineBase and PayloadsBase name the compatible layout's two keys
	// per topic, glued to the topic with ':' as the Python library does.
	// Defaults "timers_timeline" and "timers_payloads".
	TimelineBase string
	PayloadsBase string

	// CompatDeadLetters lets the compatible layout keep dead letters in two
	// keys the Python library does not know, DeadBase + ":" + topic (sorted
	// set) and DeadBase + "_payloads:" + topic (hash). Off by default: then
	// a dead-lettered timer is deleted (and logged), as Python would do.
	CompatDeadLetters bool
	// DeadBase names the compatible dead-letter keys. Default "timers_dead".
	DeadBase string

	// Logger receives the driver's logs (lost subscriptions, dropped dead
	// letters). Default slog.Default().
	Logger *slog.Logger

	// ClusterTopicIndex keeps the topic index (ontimedriver.TopicIndex,
	// which ontime.HandleTopics needs) on a Redis Cluster, or any client
	// that is not a single node. There the index lives in another slot
	// than the topics, so every schedule, claim, settle, cancel, fire and
	// replay call makes one more round trip after its script to write the
	// index hint: measured on one Redis in the same mode, +30 % time per
	// 100-timer publish batch and +20 % per 100-timer claim and ack. Off
	// by default: a Cluster user who serves topics one by one (Handle)
	// does not pay for it. On a single node (standalone, Sentinel) the
	// scripts keep the index at no extra round trip, always.
	ClusterTopicIndex bool
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	switch c.Layout {
	case Native, Compatible:
	default:
		return c, fmt.Errorf("%w: Options.Layout %d is neither Native nor Compatible", ontimedriver.ErrInvalid, int(c.Layout))
	}
	if c.Prefix == "" {
		c.Prefix = "ontime:"
	}
	if strings.ContainsAny(c.Prefix, "{}") {
		return c, fmt.Errorf("%w: Options.Prefix %q must not contain '{' or '}' (ontime adds the hash tag)", ontimedriver.ErrInvalid, c.Prefix)
	}
	if c.TimelineBase == "" {
		c.TimelineBase = "timers_timeline"
	}
	if c.PayloadsBase == "" {
		c.PayloadsBase = "timers_payloads"
	}
	if c.DeadBase == "" {
		c.DeadBase = "timers_dead"
	}
	if c.TimelineBase == c.PayloadsBase {
		return c, fmt.Errorf("%w: Options.TimelineBase and PayloadsBase are both %q", ontimedriver.ErrInvalid, c.TimelineBase)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
