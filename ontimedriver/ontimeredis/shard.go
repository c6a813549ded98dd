package ontimeredis

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// A sharded topic (Options.Shards) keeps its timers in n key groups, the
// shards, each under its own hash tag: shard i of topic T is the internal
// topic "T#i.k" (keys "<prefix>{T#i.k}:due", ...), where k is the smallest
// number that puts the tag's hash slot in the middle of the i-th n-th of
// the slot space. A Cluster whose masters own equal runs of slots, as
// redis-cli --cluster create makes them, so holds each shard of a topic
// with as many shards as masters on its own master; other counts spread
// the shards over the slot space evenly. '#' is not allowed in topic
// names, so an internal topic never meets a user's.
//
// A timer lives in shard fnv32a(id) mod n: Get, Cancel, FireNow and the
// settlement of a claimed timer are one round trip, as on an unsharded
// topic. Claim starts at the next shard in turn on every call and moves on
// to the following ones until it has max timers; List and ListDead merge
// the shards' pages by due time; Count and CountDue add the shards up;
// Subscribe listens to every shard's wake channel. The topic registry and
// index hold the internal topics; Topics, DueTopics and SubscribeTopics
// answer with the topic.
//
// The shard count is stored in the topic's own slot ("<prefix>{T}:shards")
// by the first sharded Schedule or Claim, which refuses a topic stored with
// another count, or holding timers in its unsharded keys; an unsharded
// schedule of a sharded topic is refused too.

// shardSet is a sharded topic as one driver sees it.
type shardSet struct {
	topic string
	n     int
	// names are the internal topics of the shards, in shard order.
	names []string
	// turn is the shard the next Claim starts at (mod n).
	turn atomic.Uint32
	// checked is set once shards.lua has agreed to the count.
	checked atomic.Bool
}

// shardRule is a pattern of Options.Shards.
type shardRule struct {
	pattern string
	n       int
	lits    int // characters that are not wildcards
}

// shardConfig is Options.Shards, checked and ready for lookups.
type shardConfig struct {
	exact map[string]int
	rules []shardRule // most specific first
	sets  sync.Map    // topic → *shardSet (sharded topics only)
}

// maxShards bounds a topic's shard count.
const maxShards = 1024

// newShardConfig checks Options.Shards.
func newShardConfig(m map[string]int) (*shardConfig, error) {
	c := &shardConfig{exact: map[string]int{}}
	for p, n := range m {
		if n < 1 || n > maxShards {
			return nil, fmt.Errorf("%w: Options.Shards[%q] is %d, want 1 to %d", ontimedriver.ErrInvalid, p, n, maxShards)
		}
		if !strings.ContainsAny(p, "*?") {
			if err := ontimedriver.ValidateTopic(p); err != nil {
				return nil, fmt.Errorf("Options.Shards: %w", err)
			}
			c.exact[p] = n
			continue
		}
		if err := ontimedriver.ValidatePattern(p); err != nil {
			return nil, fmt.Errorf("Options.Shards: %w", err)
		}
		c.rules = append(c.rules, shardRule{pattern: p, n: n, lits: len(p) - strings.Count(p, "*") - strings.Count(p, "?")})
	}
	slices.SortFunc(c.rules, func(a, b shardRule) int {
		if a.lits != b.lits {
			return b.lits - a.lits
		}
		return strings.Compare(a.pattern, b.pattern)
	})
	return c, nil
}

// count is the shard count of topic: its exact entry, else that of the
// matching pattern with the most literal characters (ties: the pattern
// first in byte order), else 1.
func (c *shardConfig) count(topic string) int {
	if n, ok := c.exact[topic]; ok {
		return n
	}
	for _, r := range c.rules {
		if ontimedriver.MatchTopic(r.pattern, topic) {
			return r.n
		}
	}
	return 1
}

// ShardCount reports how many shards the driver keeps topic in (1: not
// sharded). See Options.Shards.
func (d *Driver) ShardCount(topic string) int {
	if s := d.sharded(topic); s != nil {
		return s.n
	}
	return 1
}

// sharded returns topic's shard set, or nil when topic is not sharded (or
// is an internal topic, a shard itself).
func (d *Driver) sharded(topic string) *shardSet {
	c := d.shards
	if c == nil || strings.IndexByte(topic, '#') >= 0 {
		return nil
	}
	if v, ok := c.sets.Load(topic); ok {
		return v.(*shardSet)
	}
	n := c.count(topic)
	if n < 2 {
		return nil
	}
	s := &shardSet{topic: topic, n: n, names: make([]string, n)}
	for i := range n {
		s.names[i] = shardName(topic, i, n)
	}
	v, _ := c.sets.LoadOrStore(topic, s)
	return v.(*shardSet)
}

// shardName is the internal topic of shard i of n: topic + "#i.k", with
// the smallest k whose hash slot lies in the middle half of the i-th n-th
// of the slots.
func shardName(topic string, i, n int) string {
	width := float64(clusterSlots) / float64(n)
	center := (float64(i) + 0.5) * width
	base := topic + "#" + strconv.Itoa(i) + "."
	for k := 0; ; k++ {
		name := base + strconv.Itoa(k)
		slot := float64(crc16(name) % clusterSlots)
		if slot >= center-width/4 && slot < center+width/4 {
			return name
		}
	}
}

// topicOf is the topic an internal topic (a shard) belongs to, or name
// itself.
func topicOf(name string) string {
	if i := strings.IndexByte(name, '#'); i >= 0 {
		return name[:i]
	}
	return name
}

// clusterSlots is the number of a Redis Cluster's hash slots.
const clusterSlots = 16384

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM: polynomial 0x1021,
// initial value 0), over a hash tag.
func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c ^= uint16(s[i]) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
	}
	return c
}

// of is the shard of a timer id.
func (s *shardSet) of(id string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(s.n))
}

// group splits the indexes 0..n-1 by the shard of id(i).
func (s *shardSet) group(n int, id func(int) string) [][]int {
	g := make([][]int, s.n)
	for i := range n {
		sh := s.of(id(i))
		g[sh] = append(g[sh], i)
	}
	return g
}

// each runs fn for every non-empty group, concurrently when there are
// several, and returns the error of the first shard that failed.
func (s *shardSet) each(groups [][]int, fn func(shard int, idx []int) error) error {
	var used []int
	for i, g := range groups {
		if len(g) > 0 {
			used = append(used, i)
		}
	}
	if len(used) == 1 {
		return fn(used[0], groups[used[0]])
	}
	errs := make([]error, s.n)
	var wg sync.WaitGroup
	for _, i := range used {
		wg.Go(func() { errs[i] = fn(i, groups[i]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// all runs fn for every shard, concurrently, and returns the error of the
// first shard that failed.
func (s *shardSet) all(fn func(shard int) error) error {
	groups := make([][]int, s.n)
	for i := range groups {
		groups[i] = []int{i}
	}
	return s.each(groups, func(shard int, _ []int) error { return fn(shard) })
}

// ensure checks (once per driver) that the topic is stored with the
// driver's shard count, recording it on first use.
func (d *Driver) ensure(ctx context.Context, s *shardSet) error {
	if s.checked.Load() {
		return nil
	}
	k := d.keys(s.topic)
	res, err := d.eval(ctx, sShards, []string{k.shards, k.due, k.dead}, s.n)
	if err != nil {
		return err
	}
	a, err := replyArray(res)
	if err != nil || len(a) < 1 {
		return errReply
	}
	switch replyStr(a[0]) {
	case "ok":
		s.checked.Store(true)
		return nil
	case "other":
		return fmt.Errorf("%w: topic %q is stored in %s shards and this driver is configured with %d (Options.Shards): a topic's shard count cannot change while it is in use; drain it and delete the key %q first (see the package documentation)",
			ontimedriver.ErrInvalid, s.topic, replyStr(a[1]), s.n, k.shards)
	case "unsharded":
		return fmt.Errorf("%w: topic %q holds timers or dead letters unsharded and this driver is configured with %d shards for it (Options.Shards): drain the topic first, or use another topic name (see the package documentation)",
			ontimedriver.ErrInvalid, s.topic, s.n)
	}
	return errReply
}

// shardedRefusal turns schedule.lua's refusal to write a sharded topic's
// unsharded keys into a clear error.
func shardedRefusal(topic string, err error) error {
	_, n, ok := strings.Cut(err.Error(), "ONTIMESHARDS ")
	if !ok {
		return err
	}
	return fmt.Errorf("%w: topic %q is sharded (%s shards) and this driver is not configured so (Options.Shards)", ontimedriver.ErrInvalid, topic, strings.TrimSpace(n))
}

func (d *Driver) scheduleSharded(ctx context.Context, s *shardSet, timers []ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	if err := d.ensure(ctx, s); err != nil {
		return nil, err
	}
	out := make([]ontimedriver.ScheduleResult, len(timers))
	groups := s.group(len(timers), func(i int) string { return timers[i].ID })
	failed := make([]error, s.n)
	_ = s.each(groups, func(shard int, idx []int) error {
		part := make([]ontimedriver.NewTimer, len(idx))
		for j, i := range idx {
			part[j] = timers[i]
		}
		res, err := d.Schedule(ctx, s.names[shard], part, mode)
		if err != nil {
			failed[shard] = err
			return err
		}
		for j, i := range idx {
			out[i] = res[j]
		}
		return nil
	})
	// A shard that failed (its master down) fails its own timers only: the
	// call fails when every shard it wrote to did.
	var first error
	ok := false
	for shard, idx := range groups {
		if len(idx) == 0 {
			continue
		}
		if failed[shard] == nil {
			ok = true
			continue
		}
		first = cmp.Or(first, failed[shard])
		for _, i := range idx {
			out[i] = ontimedriver.ScheduleResult{Err: failed[shard]}
		}
	}
	if !ok {
		return nil, first
	}
	return out, nil
}

// shardRetry is how soon a claim of a sharded topic that could not read
// one of its shards (its master down) reports the topic due again, so that
// the shard is tried again soon without a busy loop.
const shardRetry = 250 * time.Millisecond

// claimSharded claims the topic's oldest due timers across its shards in
// two parallel rounds: the scores of up to max due entries of each shard
// (peek.lua; the head's when none is due), then, from each shard that holds some of the max oldest due
// ones, as many (claim.lua takes a shard's oldest first). Equal due times
// are taken from the shards in turn, starting at the next shard on every
// call, so that no shard waits behind another. An idle topic costs the
// first round only. The result has one clock: Now is the earliest of the
// claims' clocks and every LeaseUntil the earliest lease deadline of the
// shards claimed (a lease is never reported later than it is).
func (d *Driver) claimSharded(ctx context.Context, s *shardSet, max int, lease time.Duration) (*ontimedriver.ClaimResult, error) {
	if err := d.ensure(ctx, s); err != nil {
		return nil, err
	}
	start := int((s.turn.Add(1) - 1) % uint32(s.n))
	type peek struct {
		now    int64
		scores []int64
	}
	peeks := make([]peek, s.n)
	peekErrs := make([]error, s.n)
	// The peeks get half of the call's time: a shard whose master is down
	// can take all the time it is given (the client's retries, a dead
	// connection), and the claims of the other shards need the rest.
	pctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		pctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer cancel()
	}
	_ = s.all(func(shard int) (err error) {
		defer func() { peekErrs[shard] = err }()
		res, err := d.eval(pctx, sPeek, []string{d.keys(s.names[shard]).due}, max)
		if err != nil {
			return err
		}
		a, err := replyArray(res)
		if err != nil || len(a) < 1 {
			return errReply
		}
		p := peek{now: replyInt(a[0]), scores: make([]int64, len(a)-1)}
		for i, v := range a[1:] {
			f, err := strconv.ParseFloat(replyStr(v), 64)
			if err != nil {
				return fmt.Errorf("%w: score %q", errReply, replyStr(v))
			}
			p.scores[i] = int64(f)
		}
		peeks[shard] = p
		return nil
	})
	// A shard that cannot be read (its master down, until its replica is
	// promoted) does not stop the others: the claim takes from the shards
	// it could read, and comes back for the missing one soon. It fails
	// when no shard could be read.
	var down error
	nowUs := int64(-1)
	for sh, p := range peeks {
		if peekErrs[sh] != nil {
			down = cmp.Or(down, peekErrs[sh])
			continue
		}
		// one clock for the whole claim: the earliest the peeks read
		if nowUs < 0 || p.now < nowUs {
			nowUs = p.now
		}
	}
	if nowUs < 0 {
		return nil, down
	}
	nowMs := floorDiv(nowUs, 1000)
	until := nowMs + durMs(lease)
	// the max oldest due entries, equal ones from the shards in turn
	type cand struct {
		score int64
		turn  int // (shard - start) mod n
		shard int
	}
	var due []cand
	for sh, p := range peeks {
		for _, sc := range p.scores {
			if sc > nowMs {
				break
			}
			due = append(due, cand{sc, (sh - start + s.n) % s.n, sh})
		}
	}
	slices.SortFunc(due, func(a, b cand) int {
		if c := cmp.Compare(a.score, b.score); c != 0 {
			return c
		}
		return a.turn - b.turn
	})
	take := make([]int, s.n)
	for _, c := range due[:min(max, len(due))] {
		take[c.shard]++
	}
	// Next: the heads of the shards not claimed, and the claims' Next
	var next time.Time
	lower := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for sh, p := range peeks {
		if take[sh] == 0 && len(p.scores) > 0 {
			lower(msTime(p.scores[0]))
		}
	}
	groups := make([][]int, s.n)
	for sh, k := range take {
		if k > 0 {
			groups[sh] = []int{k}
		}
	}
	if down != nil {
		// the unread shard is asked again within shardRetry
		lower(usTime(nowUs).Add(shardRetry))
	}
	var err error
	results := make([]*ontimedriver.ClaimResult, s.n)
	if len(due) > 0 {
		err = s.each(groups, func(shard int, k []int) error {
			r, err := d.claimNative(ctx, s.names[shard], k[0], lease, until, nowMs)
			results[shard] = r
			return err
		})
	}
	out := &ontimedriver.ClaimResult{Now: usTime(nowUs)}
	for _, r := range results {
		if r == nil {
			continue
		}
		lower(r.Next)
		out.Timers = append(out.Timers, r.Timers...)
	}
	if err != nil {
		if len(out.Timers) == 0 {
			return nil, err
		}
		// keep what is leased; the shard that failed is asked again at once
		lower(out.Now)
	}
	slices.SortStableFunc(out.Timers, func(a, b ontimedriver.ClaimedTimer) int { return a.Due.Compare(b.Due) })
	out.Next = next
	return out, nil
}

// perShard splits items by the shard of their id, calls call with each
// shard's part (the shards concurrently) and returns each item's result in
// the items' order; one shard's error fails the whole.
func perShard[T, R any](s *shardSet, items []T, id func(T) string, call func(shard string, part []T) ([]R, error)) ([]R, error) {
	out := make([]R, len(items))
	err := s.each(s.group(len(items), func(i int) string { return id(items[i]) }), func(shard int, idx []int) error {
		part := make([]T, len(idx))
		for j, i := range idx {
			part[j] = items[i]
		}
		res, err := call(s.names[shard], part)
		if err != nil {
			return err
		}
		for j, i := range idx {
			out[i] = res[j]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (d *Driver) settleSharded(ctx context.Context, s *shardSet, ops []ontimedriver.Settlement) ([]error, error) {
	return perShard(s, ops, func(op ontimedriver.Settlement) string { return op.ID }, func(shard string, part []ontimedriver.Settlement) ([]error, error) {
		return d.Settle(ctx, shard, part)
	})
}

func (d *Driver) extendSharded(ctx context.Context, s *shardSet, leases []ontimedriver.Lease, lease time.Duration) ([]error, error) {
	return perShard(s, leases, func(l ontimedriver.Lease) string { return l.ID }, func(shard string, part []ontimedriver.Lease) ([]error, error) {
		return d.Extend(ctx, shard, part, lease)
	})
}

func (d *Driver) cancelBatchSharded(ctx context.Context, s *shardSet, ids []string) ([]error, error) {
	return perShard(s, ids, func(id string) string { return id }, func(shard string, part []string) ([]error, error) {
		return d.CancelBatch(ctx, shard, part)
	})
}

// idsSharded runs fn (replay or purge of dead letters by id) per shard and
// adds the counts up.
func (d *Driver) idsSharded(s *shardSet, ids []string, fn func(name string, ids []string) (int, error)) (int, error) {
	var total atomic.Int64
	err := s.each(s.group(len(ids), func(i int) string { return ids[i] }), func(shard int, idx []int) error {
		part := make([]string, len(idx))
		for j, i := range idx {
			part[j] = ids[i]
		}
		n, err := fn(s.names[shard], part)
		total.Add(int64(n))
		return err
	})
	return int(total.Load()), err
}

// sumSharded runs fn for every shard and adds the counts up.
func (d *Driver) sumSharded(s *shardSet, fn func(name string) (int, error)) (int, error) {
	var total atomic.Int64
	err := s.all(func(shard int) error {
		n, err := fn(s.names[shard])
		total.Add(int64(n))
		return err
	})
	return int(total.Load()), err
}

func (d *Driver) countSharded(ctx context.Context, s *shardSet) (ontimedriver.Counts, error) {
	parts := make([]ontimedriver.Counts, s.n)
	err := s.all(func(shard int) error {
		var err error
		parts[shard], err = d.Count(ctx, s.names[shard])
		return err
	})
	if err != nil {
		return ontimedriver.Counts{}, err
	}
	var c ontimedriver.Counts
	for _, p := range parts {
		c.Scheduled += p.Scheduled
		c.Leased += p.Leased
		c.Dead += p.Dead
	}
	return c, nil
}

func (d *Driver) countDueSharded(ctx context.Context, s *shardSet, bounds []time.Time) ([]int64, error) {
	parts := make([][]int64, s.n)
	err := s.all(func(shard int) error {
		var err error
		parts[shard], err = d.CountDue(ctx, s.names[shard], bounds)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(parts[0]))
	for _, p := range parts {
		if len(p) != len(out) {
			return nil, errReply
		}
		for i, v := range p {
			out[i] += v
		}
	}
	return out, nil
}

// expandTopics replaces each sharded topic of topics by its shards, and
// returns for each name the index of its topic.
func (d *Driver) expandTopics(topics []string) (names []string, owner []int, any bool) {
	for i, t := range topics {
		if s := d.sharded(t); s != nil {
			any = true
			for _, n := range s.names {
				names = append(names, n)
				owner = append(owner, i)
			}
			continue
		}
		names = append(names, t)
		owner = append(owner, i)
	}
	return names, owner, any
}

// shardItem is a page item of one shard, with that shard's clock.
type shardItem struct {
	pageItem
	now int64
	key float64
}

// pageSharded reads one page from every shard (each from the same cursor:
// a cursor is a position in the (score, id) order all shards share) and
// merges them: the first limit items in that order, and the cursor after
// the last when there may be more.
func (d *Driver) pageSharded(ctx context.Context, s *shardSet, keysOf func(k keys) (zset, hash, lease string), before string, opts ontimedriver.ListOptions) ([]shardItem, string, error) {
	parts := make([][]shardItem, s.n)
	err := s.all(func(shard int) error {
		z, h, l := keysOf(d.keys(s.names[shard]))
		now, items, _, err := d.page(ctx, z, h, l, before, opts)
		if err != nil {
			return err
		}
		p := make([]shardItem, len(items))
		for i, it := range items {
			f, err := strconv.ParseFloat(it.score, 64)
			if err != nil {
				return fmt.Errorf("%w: score %q", errReply, it.score)
			}
			p[i] = shardItem{it, now, f}
		}
		parts[shard] = p
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	all := slices.Concat(parts...)
	slices.SortFunc(all, func(a, b shardItem) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	limit := pageLimit(opts.Limit)
	next := ""
	if len(all) >= limit {
		all = all[:limit]
		last := all[limit-1]
		next = encodeCursor(last.score, last.id)
	}
	return all, next, nil
}

func (d *Driver) listSharded(ctx context.Context, s *shardSet, before string, opts ontimedriver.ListOptions) (*ontimedriver.Page, error) {
	items, next, err := d.pageSharded(ctx, s, func(k keys) (string, string, string) { return k.due, k.msg, k.lease }, before, opts)
	if err != nil {
		return nil, err
	}
	p := &ontimedriver.Page{Timers: make([]ontimedriver.TimerInfo, 0, len(items)), NextCursor: next}
	for _, it := range items {
		if !it.exists {
			continue // an orphan; the next claim removes it
		}
		ti, err := d.info(it.id, it.now, it.score, it.value, it.lease)
		if err != nil {
			return nil, err
		}
		p.Timers = append(p.Timers, *ti)
	}
	return p, nil
}

func (d *Driver) listDeadSharded(ctx context.Context, s *shardSet, before string, opts ontimedriver.ListOptions) (*ontimedriver.DeadPage, error) {
	items, next, err := d.pageSharded(ctx, s, func(k keys) (string, string, string) { return k.dead, k.dmsg, "" }, before, opts)
	if err != nil {
		return nil, err
	}
	p := &ontimedriver.DeadPage{Dead: make([]ontimedriver.DeadLetter, 0, len(items)), NextCursor: next}
	for _, it := range items {
		if !it.exists {
			continue
		}
		r := parseDead(it.value)
		p.Dead = append(p.Dead, ontimedriver.DeadLetter{
			ID: it.id, Due: msTime(r.due), DiedAt: msTime(int64(it.key)), Attempt: r.attempt,
			Reason: r.reason, Error: r.err, Payload: r.payload,
		})
	}
	return p, nil
}

// subscribeSharded listens to every shard's wake channel on one channel.
func (d *Driver) subscribeSharded(ctx context.Context, s *shardSet) (<-chan time.Time, func(), error) {
	ch := make(chan time.Time, 1)
	cancels := make([]func(), 0, s.n)
	cancel := func() {
		for _, c := range cancels {
			c()
		}
	}
	for _, name := range s.names {
		c, err := d.hub.subscribeTo(ctx, d.keys(name).wake, ch)
		if err != nil {
			cancel()
			return nil, nil, err
		}
		cancels = append(cancels, c)
	}
	return ch, cancel, nil
}

// topicsOf maps internal topic names (shards) to their topics, sorted and
// without repeats.
func topicsOf(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = topicOf(n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
