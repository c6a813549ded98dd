package ontimeredis

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

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

	// NoClusterTopicIndex turns the topic index (ontimedriver.TopicIndex,
	// which ontime.HandleTopics and ontime serve's one worker for every
	// topic need) off on a Redis Cluster, or any client that is not a
	// single node. There the index lives in another slot than the topics,
	// so the driver writes it after each script: a hint that lowers a
	// topic's entry (a publish that makes the topic's head earlier, a
	// retry, a snooze) before the call returns, one round trip more; the
	// rest (claims, acks, cancels) in the background, coalesced per topic.
	// Measured on a 3-master Cluster, the index costs no measurable time or
	// Redis CPU on publishes behind the head and on claims and acks, and
	// one round trip on a publish that becomes its topic's head
	// (docs/BENCHMARKS.md, "The topic index on a Cluster"). On a single
	// node (standalone, Sentinel) the scripts keep the index at no extra
	// round trip, always, and this option does nothing.
	NoClusterTopicIndex bool

	// ClusterTopicIndex kept the topic index on a Cluster when it was off
	// by default.
	//
	// Deprecated: the index is kept on a Cluster by default; set
	// NoClusterTopicIndex to turn it off. This field has no effect.
	ClusterTopicIndex bool

	// Shards spreads hot topics over several hash slots, so that on a
	// Redis Cluster one topic can use several masters: a topic with n
	// shards keeps its timers in n groups of keys, each under its own
	// hash tag ("<prefix>{<topic>#<i>.<k>}:due"), chosen so that shard i
	// hashes to a slot in the middle of the i-th n-th of the slot space:
	// with n equal to the number of masters, and the masters owning equal
	// runs of slots (as redis-cli --cluster create splits them), each
	// shard is on its own master. A timer's shard is a hash of its id, so
	// Get, Cancel and settling stay one round trip; Claim takes the
	// shards in turn, starting at the next one on each call; List merges
	// the shards by due time; Count adds them up.
	//
	// A key is a topic name, or a pattern (ontimedriver.MatchTopic): a
	// topic takes its exact entry, else that of the matching pattern with
	// the most literal characters. Counts are 1 (not sharded) to 1024.
	// Every driver that uses a topic must have the same count for it: the
	// count is stored with the topic, and a driver with another count (or
	// none) is refused with an error wrapping ontimedriver.ErrInvalid. The
	// native layout only. See the package documentation for the costs.
	Shards map[string]int

	// ClassicPubSub makes the driver use classic pub/sub (PUBLISH,
	// SUBSCRIBE, PSUBSCRIBE on one connection) for wake-ups on a Redis
	// Cluster too, as on one Redis. By default a driver on a
	// *redis.ClusterClient uses sharded pub/sub (Redis 7.0 or later):
	// the scripts SPUBLISH each wake-up on a channel in the topic's own
	// hash slot, so only the topic's master (and its replicas) carry it,
	// instead of every node of the cluster, and the driver subscribes
	// with SSUBSCRIBE on one connection per master, moving each
	// subscription when its slot moves (a failover, resharding). Set it
	// for a Cluster of Redis older than 7.0, which has no SPUBLISH. It
	// changes nothing on one Redis (standalone, Sentinel) or in the
	// compatible layout, which use classic pub/sub always. Every driver
	// sharing a Cluster must agree on it: a subscriber listens on one
	// kind only.
	ClassicPubSub bool

	// WaitReplicas makes every Schedule (every publish) wait until this
	// many replicas have acknowledged its write (Redis WAIT, on the
	// connection of the write), at most WaitTimeout (default 1 s, which
	// must be shorter than the client's ReadTimeout), and fail with an
	// error wrapping ontimedriver.ErrNotReplicated when fewer did. A
	// context from ontimedriver.WithReplicaAck (ontime.WaitReplicas)
	// overrides it for one call. Default 0: a write is acknowledged when
	// the primary has it, and a failover can lose the writes its replica
	// had not received yet (docs/guarantees.md). Needs a *redis.Client or
	// *redis.ClusterClient.
	WaitReplicas int
	WaitTimeout  time.Duration
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
	if c.WaitReplicas < 0 || c.WaitTimeout < 0 {
		return c, fmt.Errorf("%w: Options.WaitReplicas %d, WaitTimeout %v: want >= 0", ontimedriver.ErrInvalid, c.WaitReplicas, c.WaitTimeout)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
