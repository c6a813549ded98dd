package ontimeredis

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
)

var errClosed = fmt.Errorf("ontimeredis: %w", ontimedriver.ErrClosed)

// Driver keeps timers in Redis. It implements ontimedriver.Driver. It is
// safe for concurrent use; many Drivers (in many processes) may share one
// Redis and one prefix, which is how workers share topics.
type Driver struct {
	rdb    redis.UniversalClient
	opt    Options
	compat bool
	log    *slog.Logger
	closed atomic.Bool

	// ctxBound is true when rdb itself ends a command at its context's
	// deadline (go-redis's ContextTimeoutEnabled); otherwise the driver
	// enforces the deadline itself (see bounded).
	ctxBound bool

	// idx says who writes the topic index: nobody (compatible layout),
	// the scripts (one Redis), or the driver after each script (a Redis
	// Cluster, where the index lives in another slot).
	idx idxMode

	// shards is Options.Shards, ready for lookups; nil when no topic is
	// sharded.
	shards *shardConfig

	// spub: wake-ups go by sharded pub/sub (SPUBLISH, SSUBSCRIBE): a
	// Redis Cluster, native layout, unless Options.ClassicPubSub.
	spub bool

	hub hub
	// after writes, on a Cluster, the index hints and registry additions
	// a call need not wait for (hintwriter.go).
	after hintWriter
	// pool runs the calls bounded cannot run on the caller's goroutine.
	pool callPool
	// reload reloads a Cluster's slot map during an outage, and faults
	// tracks the topics whose calls fail (failover.go).
	reload reloader
	faults faults
}

var _ ontimedriver.Driver = (*Driver)(nil)
var _ ontimedriver.LegacyPayloads = (*Driver)(nil)
var _ ontimedriver.TopicIndex = (*Driver)(nil)
var _ ontimedriver.TopicCounter = (*Driver)(nil)

// New returns a Driver on rdb. The caller owns rdb: Close does not close
// it. New does not contact Redis; Ping does.
//
// The compatible layout keeps two keys per topic with no hash tag, as the
// Python library does, so it cannot run on Redis Cluster: New refuses a
// *redis.ClusterClient for it.
func New(rdb redis.UniversalClient, opts *Options) (*Driver, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: ontimeredis.New: client is nil", ontimedriver.ErrInvalid)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, ok := rdb.(*redis.ClusterClient); ok && o.Layout == Compatible {
		return nil, fmt.Errorf("%w: the compatible layout cannot run on Redis Cluster: its two keys per topic have no hash tag (faststream-redis-timers cannot either)", ontimedriver.ErrInvalid)
	}
	d := &Driver{rdb: rdb, opt: o, compat: o.Layout == Compatible, log: o.Logger, ctxBound: honoursContext(rdb)}
	if len(o.Shards) > 0 {
		if d.compat {
			return nil, fmt.Errorf("%w: Options.Shards: the compatible layout cannot shard a topic (the Python library reads one key per topic)", ontimedriver.ErrInvalid)
		}
		if d.shards, err = newShardConfig(o.Shards); err != nil {
			return nil, err
		}
	}
	switch {
	case d.compat:
		d.idx = idxNone
	case isSingle(rdb):
		d.idx = idxScripts
	case o.NoClusterTopicIndex:
		d.idx = idxNone
	default:
		d.idx = idxHints
	}
	if _, ok := rdb.(*redis.ClusterClient); ok && !d.compat && !o.ClassicPubSub {
		d.spub = true
	}
	d.hub.init(d)
	d.after.init(d)
	d.pool.init()
	d.reload.init(rdb)
	d.reload.after = d.hub.slotsReloaded
	return d, nil
}

// honoursContext reports whether rdb ends a command when its context's
// deadline passes. go-redis does so only with ContextTimeoutEnabled; without
// it a command waits for the client's ReadTimeout (and its retries), whatever
// the context says. A client type the driver does not know counts as not
// honouring it.
func honoursContext(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// bounded runs fn and returns its result, or ctx's error as soon as ctx is
// done, whichever comes first: every call of the driver ends by its
// context's deadline, whether or not the client was built with
// ContextTimeoutEnabled. When the client honours contexts itself (or ctx
// can never end) fn runs on the caller's goroutine. Otherwise it runs on
// a goroutine of the driver's call pool (see callPool), and a call cut
// short keeps running there until the client's own timeouts end it (its
// connection stays busy until then); its result is dropped. Like any timed-out call, it may or may not have been applied.
func bounded[T any](d *Driver, ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	if d.ctxBound || ctx.Done() == nil {
		return fn(ctx)
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	d.pool.run(func() {
		v, err := fn(ctx)
		ch <- result{v, err}
	})
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}

// Layout reports the driver's layout.
func (d *Driver) Layout() Layout { return d.opt.Layout }

// AcceptsLegacyPayloads reports whether payloads may have been written by
// other programs: true for the compatible layout, where Python writes them.
func (d *Driver) AcceptsLegacyPayloads() bool { return d.compat }

// Ping checks that Redis answers. (Scripts are loaded where they run, on
// first use; see eval.)
func (d *Driver) Ping(ctx context.Context) error {
	if d.closed.Load() {
		return errClosed
	}
	if _, err := bounded(d, ctx, func(ctx context.Context) (string, error) { return d.rdb.Ping(ctx).Result() }); err != nil {
		d.observe(nil, err)
		return fmt.Errorf("ontimeredis: ping: %w", err)
	}
	return nil
}

// Close stops the driver's subscriptions. It does not close the client.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.after.close()
	d.hub.close()
	d.pool.close()
	d.reload.close()
	return nil
}

// ---- keys ----

// keys of one topic.
type keys struct {
	due, msg, lease, seq, dead, dmsg, wake string
	// sched holds the schedule entries of the topic's recurring timers
	// (native layout; see recurring.go).
	sched string
	// shards holds the topic's shard count once it is sharded (native
	// layout; see Options.Shards).
	shards string
}

func (d *Driver) keys(topic string) keys {
	if d.compat {
		tl := d.opt.TimelineBase + ":" + topic
		return keys{
			due:  tl,
			msg:  d.opt.PayloadsBase + ":" + topic,
			dead: d.opt.DeadBase + ":" + topic,
			dmsg: d.opt.DeadBase + "_payloads:" + topic,
			wake: "ontime:wake:" + tl,
		}
	}
	b := d.opt.Prefix + "{" + topic + "}:"
	return keys{
		due:    b + "due",
		msg:    b + "msg",
		lease:  b + "lease",
		seq:    b + "seq",
		dead:   b + "dead",
		dmsg:   b + "dmsg",
		wake:   b + "wake",
		shards: b + "shards",
		sched:  b + "sched",
	}
}

// registryKey is the topic registry (native layout): a set of the topics
// that hold keys, which Topics lists. schedule.lua adds a topic with its
// first timer (one Redis), or the driver right after (a Cluster, where
// the registry is in another slot); Topics removes the topics it finds
// empty (prune), so it does not grow with topics that come and go.
func (d *Driver) registryKey() string { return d.opt.Prefix + "topics" }

// withRegistry appends the registry to schedule.lua's keys when the script
// writes it itself (one Redis, after the index key withIndex appends).
func (d *Driver) withRegistry(ks []string) []string {
	if d.idx == idxScripts {
		return append(ks, d.registryKey())
	}
	return ks
}

// registerAfter adds topic to the registry after a script wrote its keys,
// where the script could not (a Redis Cluster, or a client the driver does
// not know to be one Redis): in this order a prune that runs meanwhile
// either sees the keys or is followed by this add (see pruneTopics). The
// add is queued for the background writer (hintwriter.go): the call does
// not wait for it, and a lost add is logged; the topic is listed again
// after its next schedule.
func (d *Driver) registerAfter(topic string) {
	if d.compat || d.idx == idxScripts {
		return
	}
	d.after.register(topic)
}

// ---- time ----

// ceilMs is t in Unix milliseconds, rounded up: a timer is never due early.
func ceilMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

// durMs is d in milliseconds, rounded up (without overflow near the
// largest Duration).
func durMs(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// delaySpec is a delay as the scripts read it: "<ms>:<us>", d rounded up to
// the microsecond and split into whole milliseconds and the microseconds
// past them (so that no number passes 2^53 in Lua, even for the largest
// Duration). The scripts add it to the store's clock at its full
// resolution and round the sum up to the millisecond (due_after in
// lua/shared.lua): a timer is never due before the store's clock, read in
// microseconds, has advanced by d.
func delaySpec(d time.Duration) string {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond > 0 {
		us++
	}
	return strconv.FormatInt(us/1000, 10) + ":" + strconv.FormatInt(us%1000, 10)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms) }
func usTime(us int64) time.Time { return time.UnixMicro(us) }

// scoreTime converts a sorted-set score (milliseconds, or float seconds in
// the compatible layout) to a time.
func (d *Driver) scoreTime(score string) (time.Time, error) {
	f, err := strconv.ParseFloat(score, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("ontimeredis: bad score %q: %w", score, err)
	}
	if d.compat {
		// The instant the score stands for, to the nearest microsecond,
		// as the claim script reads it (score_us in
		// lua/compat_common.lua): a Python score of 10.0005 s is due at
		// 10.000500 s, not before. The arithmetic is exact (see there).
		sec := math.Floor(f)
		return usTime(int64(sec)*1e6 + int64(math.Floor((f-sec)*1e6+0.5))), nil
	}
	return msTime(int64(f)), nil
}

// ---- reply parsing ----

var errReply = errors.New("ontimeredis: unexpected reply from script")

func replyArray(v any) ([]any, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %T", errReply, v)
	}
	return a, nil
}

func replyInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func replyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// ---- paging cursors ----

func encodeCursor(score, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(score + "\n" + id))
}

func decodeCursor(c string) (score, id string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		var ok bool
		score, id, ok = strings.Cut(string(b), "\n")
		if ok {
			if _, perr := strconv.ParseFloat(score, 64); perr == nil {
				return score, id, nil
			}
		}
	}
	return "", "", fmt.Errorf("%w: cursor %q is not one this driver made", ontimedriver.ErrInvalid, c)
}

func pageLimit(n int) int {
	switch {
	case n <= 0:
		return 100
	case n > 1000:
		return 1000
	}
	return n
}

// pageItem is one item of page.lua's reply.
type pageItem struct {
	id, score string
	exists    bool
	value     string
	lease     string
}

// page runs page.lua over a sorted set and its hash.
func (d *Driver) page(ctx context.Context, zset, hash, lease string, before string, opts ontimedriver.ListOptions) (now int64, items []pageItem, next string, err error) {
	var cs, cid string
	if opts.Cursor != "" {
		if cs, cid, err = decodeCursor(opts.Cursor); err != nil {
			return 0, nil, "", err
		}
	}
	limit := pageLimit(opts.Limit)
	ks := []string{zset, hash}
	if lease != "" {
		ks = append(ks, lease)
	}
	res, err := d.eval(ctx, sPage, ks, cs, cid, before, limit)
	if err != nil {
		return 0, nil, "", err
	}
	a, err := replyArray(res)
	if err != nil || len(a) < 1 || (len(a)-1)%5 != 0 {
		return 0, nil, "", errReply
	}
	now = replyInt(a[0])
	for i := 1; i < len(a); i += 5 {
		items = append(items, pageItem{replyStr(a[i]), replyStr(a[i+1]), replyInt(a[i+2]) == 1, replyStr(a[i+3]), replyStr(a[i+4])})
	}
	if len(items) == limit {
		last := items[len(items)-1]
		next = encodeCursor(last.score, last.id)
	}
	return now, items, next, nil
}

// ---- topics ----

// Topics lists topics that hold a timer or a dead letter, sorted. The
// native layout keeps a registry set (Prefix + "topics"); the compatible
// layout scans for the Python key names.
func (d *Driver) Topics(ctx context.Context) ([]string, error) {
	// this process's queued registry additions first (a Cluster)
	if err := d.after.sync(ctx); err != nil {
		return nil, fmt.Errorf("ontimeredis: topics: %w", err)
	}
	names, err := d.storedTopics(ctx)
	if err != nil || d.shards == nil {
		return names, err
	}
	return topicsOf(names), nil
}

// storedTopics is Topics with the shards of sharded topics listed as
// they are stored (see shard.go).
func (d *Driver) storedTopics(ctx context.Context) ([]string, error) {
	if d.closed.Load() {
		return nil, errClosed
	}
	var cands []string
	if d.compat {
		var err error
		if cands, err = d.scanTopics(ctx); err != nil {
			return nil, err
		}
	} else {
		var err error
		if cands, err = bounded(d, ctx, func(ctx context.Context) ([]string, error) { return d.rdb.SMembers(ctx, d.registryKey()).Result() }); err != nil {
			return nil, fmt.Errorf("ontimeredis: topics: %w", err)
		}
	}
	slices.Sort(cands)
	cands = slices.Compact(cands)
	if len(cands) == 0 {
		return []string{}, nil
	}
	pipe := d.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(cands))
	for i, t := range cands {
		switch {
		case !d.compat:
			k := d.countKeys(t) // the keys it needs, in one allocation
			cmds[i] = pipe.Exists(ctx, k[0], k[2])
		case d.opt.CompatDeadLetters:
			k := d.keys(t)
			cmds[i] = pipe.Exists(ctx, k.due, k.dead)
		default:
			cmds[i] = pipe.Exists(ctx, d.keys(t).due)
		}
	}
	if _, err := bounded(d, ctx, pipe.Exec); err != nil {
		return nil, fmt.Errorf("ontimeredis: topics: %w", err)
	}
	out := make([]string, 0, len(cands))
	var empty []string
	for i, t := range cands {
		if cmds[i].Val() > 0 {
			out = append(out, t)
		} else {
			empty = append(empty, t)
		}
	}
	if len(empty) > 0 && !d.compat {
		if err := d.pruneTopics(ctx, empty); err != nil {
			// The list is right all the same; the next call prunes.
			d.log.Warn("ontimeredis: pruning empty topics from the registry", "topics", len(empty), "error", err)
		}
	}
	return out, nil
}

// pruneTopics removes topics that hold nothing from the registry. On one
// Redis prune.lua checks and removes atomically, in batches. Elsewhere
// (a Cluster: the registry and the topics are in other slots) each is
// removed, then checked again and added back if a timer was written
// meanwhile: a writer adds its topic after its script (registerAfter), so
// either the check sees the timer or the add follows the removal.
func (d *Driver) pruneTopics(ctx context.Context, topics []string) error {
	reg := d.registryKey()
	if d.idx == idxScripts {
		for start := 0; start < len(topics); start += syncBatch {
			batch := topics[start:min(start+syncBatch, len(topics))]
			ks := make([]string, 0, 1+2*len(batch))
			ks = append(ks, reg)
			args := make([]any, len(batch))
			for i, t := range batch {
				k := d.keys(t)
				ks = append(ks, k.due, k.dead)
				args[i] = t
			}
			if _, err := d.eval(ctx, sPrune, ks, args...); err != nil {
				return err
			}
		}
		return nil
	}
	members := make([]any, len(topics))
	for i, t := range topics {
		members[i] = t
	}
	if _, err := bounded(d, ctx, func(ctx context.Context) (int64, error) { return d.rdb.SRem(ctx, reg, members...).Result() }); err != nil {
		return err
	}
	pipe := d.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(topics))
	for i, t := range topics {
		k := d.keys(t)
		cmds[i] = pipe.Exists(ctx, k.due, k.dead)
	}
	if _, err := bounded(d, ctx, pipe.Exec); err != nil {
		return err
	}
	var back []any
	for i, t := range topics {
		if cmds[i].Val() > 0 {
			back = append(back, t)
		}
	}
	if len(back) > 0 {
		if _, err := bounded(d, ctx, func(ctx context.Context) (int64, error) { return d.rdb.SAdd(ctx, reg, back...).Result() }); err != nil {
			return err
		}
	}
	return nil
}

// scanTopics finds compatible-layout topics by their key names.
func (d *Driver) scanTopics(ctx context.Context) ([]string, error) {
	bases := []string{d.opt.TimelineBase + ":"}
	if d.opt.CompatDeadLetters {
		bases = append(bases, d.opt.DeadBase+":")
	}
	type scanPage struct {
		keys []string
		next uint64
	}
	var out []string
	for _, base := range bases {
		var cursor uint64
		for {
			p, err := bounded(d, ctx, func(ctx context.Context) (scanPage, error) {
				ks, next, err := d.rdb.Scan(ctx, cursor, escapeGlob(base)+"*", 1000).Result()
				return scanPage{ks, next}, err
			})
			ks, next := p.keys, p.next
			if err != nil {
				return nil, fmt.Errorf("ontimeredis: topics: %w", err)
			}
			for _, k := range ks {
				t := strings.TrimPrefix(k, base)
				if ontimedriver.ValidateTopic(t) == nil {
					out = append(out, t)
				}
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return out, nil
}

func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Options returns the options the Driver runs with (defaults filled in).
func (d *Driver) Options() Options { return d.opt }
