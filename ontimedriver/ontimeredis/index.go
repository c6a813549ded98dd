package ontimeredis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
)

// idxMode says who keeps the topic index.
type idxMode int

const (
	// idxNone: no index (the compatible layout).
	idxNone idxMode = iota
	// idxScripts: the scripts write it, atomically (one Redis).
	idxScripts
	// idxHints: the driver writes what each script returns, after it, as a
	// versioned hint (a Redis Cluster, or a client the driver does not know
	// to be one Redis).
	idxHints
)

// isSingle reports whether rdb talks to one Redis (a standalone server, or
// a Sentinel-managed master: redis.NewFailoverClient returns a
// *redis.Client), where a script may touch keys of any slot.
func isSingle(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.Client)
	return ok
}

// Bounds of DueTopics.
const (
	// maxDueTopics caps DueTopics' limit.
	maxDueTopics = 1000
	// dueTopicsScan bounds the index entries DueTopics reads in each of
	// its two parts (the due topics, the next one) when a pattern leaves
	// entries out.
	dueTopicsScan = 1000
	// syncBatch is the number of topics SyncTopicIndex handles per round
	// trip.
	syncBatch = 200
	// hintTimeout bounds the write of one hint (a Cluster), which runs
	// after the operation succeeded, even if the caller's context ends.
	hintTimeout = 2 * time.Second
)

// topicWakeChannel is where hint.lua publishes the wake-ups of every
// topic, "<ms> <topic>", on a Cluster with sharded pub/sub: a shard
// channel under the index's hash tag, so on the index's master.
func (d *Driver) topicWakeChannel() string { return d.opt.Prefix + "{topics}:wake" }

// indexKeys returns the topic index (sorted set: topic → the ms instant
// its next timer becomes claimable) and its versions (hash: topic → the
// clock, in µs, of the script whose hint was last applied; a Cluster only).
// Both share the hash tag {topics}, so hint.lua runs in one slot.
func (d *Driver) indexKeys() (next, ver string) {
	return d.opt.Prefix + "{topics}:next", d.opt.Prefix + "{topics}:ver"
}

// withIndex appends the index key to a native script's keys when the
// script writes the index itself (one Redis).
func (d *Driver) withIndex(ks []string) []string {
	if d.idx == idxScripts {
		next, _ := d.indexKeys()
		return append(ks, next)
	}
	return ks
}

// Hint kinds, as hint.lua reads them.
const (
	hintLower = "l" // ZADD LT: a timer was written that may be earlier
	hintExact = "s" // the exact head, or a removal when the score is ""
)

// hintAfter writes the index hint a native script returned, on a Cluster
// (on one Redis the script wrote the index itself). version is the
// script's clock in µs, score the instant in ms ("" with hintLower: no
// change; "" with hintExact: the topic holds no timer). It runs after the
// operation succeeded, so it does not fail it: a lost hint is logged, and
// costs lateness until the topic's next Claim or SyncTopicIndex.
//
// A hint that can lower the entry is written before the call returns (a
// worker must see the new head); one that can only raise it (raise: after
// a claim, a cancel, or a settle of acks and dead letters only) is queued
// for the background writer (hintwriter.go), as an entry left too low for
// a moment costs at most one claim that finds nothing.
func (d *Driver) hintAfter(ctx context.Context, topic string, version any, kind string, score any, raise bool) {
	if d.idx != idxHints {
		return
	}
	sc := replyStr(score)
	if sc == "" && kind == hintLower {
		return
	}
	if raise && kind == hintExact {
		d.after.hint(topic, replyInt(version), sc)
		return
	}
	switch {
	case kind == hintExact && sc == "":
		kind = "r"
	case kind == hintExact:
		// written now because it may lower the entry: the pattern
		// subscribers hear of it whatever the entry was
		kind = "w"
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hintTimeout)
	defer cancel()
	if err := d.writeHints(ctx, []any{topic, replyInt(version), kind, sc}); err != nil {
		d.log.Warn("ontimeredis: topic index hint lost; the topic's next claim or SyncTopicIndex repairs it", "topic", topic, "error", err)
	}
}

// writeHints runs hint.lua with quads of topic, version, kind, score.
func (d *Driver) writeHints(ctx context.Context, quads []any) error {
	next, ver := d.indexKeys()
	wake := ""
	if d.spub {
		wake = d.topicWakeChannel()
	}
	// not refused once Close began: Close writes the queued hints last
	_, err := d.evalOpen(ctx, sHint, []string{next, ver}, append([]any{wake}, quads...)...)
	return err
}

func (d *Driver) noIndex(what string) error {
	if d.compat {
		return fmt.Errorf("ontimeredis: %s: the compatible layout keeps no topic index (faststream-redis-timers writes its keys without one): %w", what, ontimedriver.ErrNoTopicIndex)
	}
	return fmt.Errorf("ontimeredis: %s: no topic index on a Redis Cluster with Options.NoClusterTopicIndex: %w", what, ontimedriver.ErrNoTopicIndex)
}

// TopicIndexed reports whether the driver keeps the topic index: true in
// the native layout on a single node, and on a Cluster with
// Options.NoClusterTopicIndex unset (the default); false in the compatible layout (the Python
// library writes its keys without it). See ontimedriver.TopicIndex.
func (d *Driver) TopicIndexed() bool { return d.idx != idxNone }

// NeedsIndexRepair reports whether the topic index is kept by hints
// written after each operation, which a crash between the two can lose
// (a Redis Cluster), so that SyncTopicIndex should run now and then. On
// one Redis the scripts keep the index atomically and it reports false.
func (d *Driver) NeedsIndexRepair() bool { return d.idx == idxHints }

// DueTopics returns up to limit topics matching pattern whose indexed
// instant has come, with one script call on the index. See
// ontimedriver.TopicIndex. limit must be at least 1; above 1000 it is
// 1000.
//
// Cost: "*" reads the due entries it returns and one more (O(log N) in
// the index's size N); a pattern without wildcards reads its one entry. A
// pattern with wildcards reads entries in order and matches each (in Lua,
// linear in the topic's length for each part of the pattern): at most
// 1000 due entries (when they do not match enough, DueTopics gives up:
// Next is zero, the caller polls) and at most 1000 later ones looking for
// Next (zero when none matched). With 10,000 idle topics that is about
// 15 µs of Redis time a call for "*" or a pattern most topics match, and
// at most about 0.5–1 ms for a pattern that matches none
// (TestIndexScale).
func (d *Driver) DueTopics(ctx context.Context, pattern string, within time.Duration, limit int) (*ontimedriver.DueTopicsResult, error) {
	if d.idx == idxNone {
		return nil, d.noIndex("DueTopics")
	}
	if err := ontimedriver.ValidatePattern(pattern); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: DueTopics limit %d, want at least 1", ontimedriver.ErrInvalid, limit)
	}
	// this process's queued hints first (a Cluster): it reads its own writes
	if err := d.after.sync(ctx); err != nil {
		return nil, fmt.Errorf("ontimeredis: DueTopics: %w", err)
	}
	if within < 0 {
		return nil, fmt.Errorf("%w: DueTopics within %s, want >= 0", ontimedriver.ErrInvalid, within)
	}
	limit = min(limit, maxDueTopics)
	// The horizon in whole ms, rounded down: a topic is never reported
	// before now + within.
	glob := luaGlob(pattern)
	if glob[0] == "e" && d.sharded(pattern) != nil {
		// the topic's shards are indexed: match them by the pattern
		glob = []any{"x", "^" + luaLiteral(pattern) + "$"}
	}
	args := append([]any{limit, dueTopicsScan, int64(within / time.Millisecond)}, glob...)
	next, _ := d.indexKeys()
	res, err := d.eval(ctx, sDueTopics, []string{next}, args...)
	if err != nil {
		return nil, err
	}
	a, err := replyArray(res)
	if err != nil || len(a) < 2 {
		return nil, errReply
	}
	if len(a)%2 != 0 {
		return nil, errReply
	}
	out := &ontimedriver.DueTopicsResult{Now: usTime(replyInt(a[0])), Topics: make([]string, 0, (len(a)-2)/2), At: make([]time.Time, 0, (len(a)-2)/2)}
	if s := replyStr(a[1]); s != "" {
		if out.Next, err = d.scoreTime(s); err != nil {
			return nil, err
		}
	}
	for i := 2; i+1 < len(a); i += 2 {
		at, err := d.scoreTime(replyStr(a[i+1]))
		if err != nil {
			return nil, err
		}
		t := replyStr(a[i])
		if d.shards != nil {
			// a shard is listed as its topic, once: at its earliest shard
			t = topicOf(t)
			if slices.Contains(out.Topics, t) {
				continue
			}
		}
		out.Topics = append(out.Topics, t)
		out.At = append(out.At, at)
	}
	return out, nil
}

// luaGlob turns a topic pattern (valid, see ontimedriver.ValidatePattern)
// into due_topics.lua's pattern arguments: the form, then Lua patterns of
// its parts (see there). Every character but a letter or digit is escaped
// with '%' (so '.', '-' and '+' are literal), and '?' is '.'.
func luaGlob(pattern string) []any {
	if strings.Trim(pattern, "*") == "" {
		return []any{"a"}
	}
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		if !strings.Contains(pattern, "?") {
			return []any{"e", pattern}
		}
		return []any{"x", "^" + luaLiteral(pattern) + "$"}
	}
	pre, suf := parts[0], parts[len(parts)-1]
	args := []any{"g", "", "", 0}
	if pre != "" {
		args[1] = "^" + luaLiteral(pre)
	}
	if suf != "" {
		args[2] = "^" + luaLiteral(suf) + "$"
		args[3] = len(suf)
	}
	for _, mid := range parts[1 : len(parts)-1] {
		if mid != "" {
			args = append(args, luaLiteral(mid))
		}
	}
	return args
}

// luaLiteral is a Lua pattern matching s, where '?' matches any one
// character.
func luaLiteral(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '?':
			b.WriteByte('.')
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(c)
		}
	}
	return b.String()
}

// SyncTopicIndex sets every topic's index entry to the topic's exact next
// claimable instant, or removes it when the topic holds no timer: a
// repair, walking the topic registry (Prefix + "topics") with SSCAN in
// batches, a few round trips per 200 topics. Never run it per poll.
//
// On one Redis the scripts keep the index exact, and this is needed only
// after the index was deleted or the keys were written by something else
// (an ontime version without the index). On a Redis Cluster the index is
// written by a hint after each operation (the index lives in another slot
// than the topic), and a crash between the operation and its hint loses
// the hint; a late hint cannot undo a newer one (hints are versioned by
// the topic's clock). A lost or out-of-order hint costs lateness, until the
// topic's next Claim or the next SyncTopicIndex, never a lost timer; the
// library's pattern workers call SyncTopicIndex every IndexRepairInterval
// when NeedsIndexRepair reports true.
//
// The compatible layout keeps no index: the error wraps
// ontimedriver.ErrNoTopicIndex.
func (d *Driver) SyncTopicIndex(ctx context.Context) error {
	if d.closed.Load() {
		return errClosed
	}
	if d.idx == idxNone {
		return d.noIndex("SyncTopicIndex")
	}
	if err := d.after.sync(ctx); err != nil {
		return fmt.Errorf("ontimeredis: SyncTopicIndex: %w", err)
	}
	var cursor uint64
	for {
		type scanPage struct {
			topics []string
			next   uint64
		}
		p, err := bounded(d, ctx, func(ctx context.Context) (scanPage, error) {
			ts, next, err := d.rdb.SScan(ctx, d.registryKey(), cursor, "", syncBatch).Result()
			return scanPage{ts, next}, err
		})
		if err != nil {
			return fmt.Errorf("ontimeredis: SyncTopicIndex: %w", err)
		}
		for start := 0; start < len(p.topics); start += syncBatch {
			batch := p.topics[start:min(start+syncBatch, len(p.topics))]
			if err := d.syncBatch(ctx, batch); err != nil {
				return fmt.Errorf("ontimeredis: SyncTopicIndex: %w", err)
			}
		}
		if p.next == 0 {
			return nil
		}
		cursor = p.next
	}
}

// syncBatch repairs the index entries of some topics.
func (d *Driver) syncBatch(ctx context.Context, topics []string) error {
	next, _ := d.indexKeys()
	if d.idx == idxScripts {
		// One script: the heads and the index entries, atomically.
		ks := make([]string, 0, 1+len(topics))
		ks = append(ks, next)
		args := make([]any, 0, len(topics))
		for _, t := range topics {
			ks = append(ks, d.keys(t).due)
			args = append(args, t)
		}
		_, err := d.eval(ctx, sSync, ks, args...)
		return err
	}
	// A Cluster: each head with its node's clock (head.lua, pipelined; EVAL
	// carries the script, so no node needs it loaded), then every hint in
	// one call on the index's node. A hint older than one written since
	// is not applied.
	pipe := d.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(topics))
	for i, t := range topics {
		cmds[i] = pipe.Eval(ctx, sHead.src, []string{d.keys(t).due})
	}
	if _, err := bounded(d, ctx, pipe.Exec); err != nil {
		return err
	}
	quads := make([]any, 0, 4*len(topics))
	for i, t := range topics {
		a, err := replyArray(cmds[i].Val())
		if err != nil || len(a) != 2 {
			return errReply
		}
		kind := hintExact
		sc := replyStr(a[1])
		if sc == "" {
			kind = "r"
		}
		quads = append(quads, t, replyInt(a[0]), kind, sc)
	}
	return d.writeHints(ctx, quads)
}

// SubscribeTopics returns a channel of wake-ups for every topic that
// matches pattern, over the driver's one pub/sub connection (PSUBSCRIBE
// on the topics' wake channels). See ontimedriver.TopicIndex. A wake-up
// carries the topic and the new timer's due time; after the connection
// dropped every subscriber gets one with an empty Topic ("look again"),
// and so does one whose buffer overflowed. The subscription is confirmed
// by Redis before SubscribeTopics returns.
//
// On a Redis Cluster with sharded pub/sub (the default; see the package
// documentation, "Wake-ups on a Redis Cluster") there is no sharded
// PSUBSCRIBE: the subscriber listens to one shard channel, where the
// index hint written after each operation publishes the topic's wake-up
// when its index entry is added or made earlier, and the driver matches
// the topic against pattern. With Options.ClassicPubSub the wake-up is
// the one the topic's script PUBLISHes. Either way it comes before the
// hint is written or with it: claim the woken topic rather than wait for
// DueTopics to list it.
func (d *Driver) SubscribeTopics(ctx context.Context, pattern string) (<-chan ontimedriver.TopicWake, func(), error) {
	if d.idx == idxNone {
		return nil, nil, d.noIndex("SubscribeTopics")
	}
	if err := ontimedriver.ValidatePattern(pattern); err != nil {
		return nil, nil, err
	}
	b := d.opt.Prefix + "{"
	shards := ""
	if d.shards != nil {
		// and the wake channels of the shards of matching topics
		shards = "*"
	}
	return d.hub.psubscribe(ctx, escapeGlob(b)+pattern+shards+"}:wake", pattern, b, "}:wake")
}
