package kafkadelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures a [Republisher]. Every field states its default.
type Config struct {
	// Ladder is the bucket topics to consume. Required.
	Ladder *Ladder
	// Group is the consumer group id of the republishers. Required. Run
	// any number of republishers with the same group; Kafka shares the
	// bucket partitions among them.
	Group string
	// DeadLetterTopic receives bucket records that cannot be delivered:
	// ontime's headers missing or malformed, or a destination that
	// refuses the record (unknown topic, record too large, not
	// authorised). It lives on the bucket cluster. Required.
	DeadLetterTopic string
	// Prefetch is how long before a record is due to leave a bucket the
	// republisher reads it into memory, so that the fetch round trip after
	// resuming a partition never makes a record late. Default: the
	// smallest bucket delay, at most 1s. Records of the smallest bucket
	// are read at once whatever Prefetch is.
	Prefetch time.Duration
	// MaxInFlight bounds the records taken from all partitions and not
	// yet acknowledged by their target (held in memory, or being
	// produced). While it is reached the republisher does not poll
	// (franz-go keeps at most one fetch per broker buffered; heartbeats and
	// rebalances go on) until produces finish. Records fetched behind a
	// head that is not due are not counted: a partition holds about
	// ReadAhead of them plus one fetch. Default 50,000 (about 60 MB with
	// 100-byte values).
	MaxInFlight int
	// CommitInterval is how often finished offsets are committed; a
	// crash repeats at most this much work (and what was being produced).
	// Default 200ms.
	CommitInterval time.Duration
	// ReadAhead bounds the records of one partition fetched behind a
	// head that is not due to move yet. They are read so that a record
	// that must not wait behind the head (in a bucket larger than its
	// remaining delay, as a producer that rounds up writes it) is moved on
	// at once; fetching pauses while ReadAhead records wait. Default 1,000.
	ReadAhead int
	// RetryMin and RetryMax bound the backoff between attempts of a
	// failed produce (it doubles from RetryMin up to RetryMax). Defaults
	// 100ms and 5s.
	RetryMin, RetryMax time.Duration
	// RevokeWait is how long a revocation (a rebalance, or Run ending)
	// waits for produces already sent before committing and giving the
	// partitions up; produces still running after it may be repeated by
	// the next owner. Default 5s; keep it well under the group's
	// rebalance timeout (franz-go's default is 60s).
	RevokeWait time.Duration
	// SessionTimeout is the consumer group's session timeout: how long
	// the group waits for a republisher that stopped heartbeating (a crash,
	// SIGKILL, a network partition, a long GC or VM pause) before giving
	// its partitions to the others. It bounds how late the records of a
	// crashed republisher's partitions are (about SessionTimeout plus a
	// heartbeat and a rebalance). Lower means faster takeover after a crash
	// but more rebalances on a slow network or a paused process (each
	// costs a hand-off and may repeat records). The brokers must allow it
	// (group.min.session.timeout.ms, 6s by default in Kafka). Default 6s
	// (franz-go's own default is 45s).
	SessionTimeout time.Duration
	// HeartbeatInterval is how often a republisher heartbeats to the group:
	// how soon the survivors learn of a rebalance. It must be less than
	// SessionTimeout (a third or less is usual). Default 500ms.
	HeartbeatInterval time.Duration
	// RebalanceStrategy is the group's partition assignor:
	// "cooperative-sticky" (default: partitions that stay put keep working
	// during a rebalance), "sticky", "range" or "round-robin". Every member
	// of the group must use the same.
	RebalanceStrategy string
	// DestinationOpts, when not nil, are the options of a second franz-go
	// client that produces released records to their destinations (a
	// different cluster than the buckets'). Nil: releases use the bucket
	// cluster's client.
	DestinationOpts []kgo.Opt
	// CreateDestinations, when true, makes the republisher create a
	// destination topic that does not exist (when a release to it fails
	// with UNKNOWN_TOPIC_OR_PARTITION), with DestinationPartitions and
	// DestinationReplicationFactor, and retry the release; the first
	// record to a new topic is late by the failed lookup and the creation
	// (about a second). The client needs the CREATE permission on the
	// destination cluster. A creation the cluster refuses (authorization,
	// policy, an invalid partition count or replication factor) or a
	// topic still unknown after 5 creations dead-letters the record.
	// Default false: a release to an unknown topic is dead-lettered.
	CreateDestinations bool
	// DestinationPartitions and DestinationReplicationFactor are those of
	// the destination topics CreateDestinations creates. Default -1: the
	// cluster's defaults (num.partitions, default.replication.factor).
	DestinationPartitions        int32
	DestinationReplicationFactor int16
	// Observer receives events for metrics. Default: none.
	Observer Observer
	// Logger receives a line per rebalance and per failing produce.
	// Default slog.Default().
	Logger *slog.Logger
}

// Republisher consumes the bucket topics of a [Ladder] and moves each
// record on when it is due: to the next bucket, or to its destination at
// its exact due instant. See the package documentation for the design.
type Republisher struct {
	cfg      Config
	prefetch time.Duration
	cl       *kgo.Client // buckets: consume, reroute, dead letters
	dest     *kgo.Client // destinations (== cl unless DestinationOpts)
	obs      Observer
	log      *slog.Logger

	mu       sync.Mutex
	parts    map[tp]*partition // owned partitions
	counters map[tp]*counters  // totals, kept after revocation
	changed  chan struct{}     // closed and replaced when a produce finishes while a revocation waits
	waiting  int               // revocations waiting on changed
	pending  int               // entries taken and not finished, over all partitions
	room     chan struct{}     // signalled when pending drops below MaxInFlight

	// commitMu orders commits: it is held from the snapshot of the
	// offsets to the end of their commit, by the commit loop and by
	// revocations alike, so an older snapshot can never be committed after
	// a newer one (which would rewind a partition). Lock order: commitMu,
	// then mu.
	commitMu sync.Mutex

	// names interns destination topic names with what parse checks of
	// them; only the poll loop (parse) uses it.
	names   map[string]destName
	last    destName // the latest name looked up (most fetches hold few destinations)
	creator *creator // nil unless Config.CreateDestinations

	runOnce      sync.Once
	commitErrors atomic.Int64 // failed commits since the last success
}

// tp names a topic partition.
type tp struct {
	topic     string
	partition int32
}

// NewRepublisher checks cfg and creates the franz-go client with opts (seed
// brokers, TLS, SASL, client id, ...). The republisher adds what its
// guarantees need: the consumer group, the bucket topics, manual commits,
// reading a new group's partitions from the start, an idempotent producer
// with acks from all in-sync replicas, and its rebalance callbacks; do not
// pass options that change those. Nothing connects until [Republisher.Run].
func NewRepublisher(cfg Config, opts ...kgo.Opt) (*Republisher, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	r := &Republisher{
		cfg:      cfg,
		prefetch: cfg.Prefetch,
		obs:      cfg.Observer,
		log:      cfg.Logger,
		parts:    make(map[tp]*partition),
		counters: make(map[tp]*counters),
		changed:  make(chan struct{}),
		room:     make(chan struct{}, 1),
	}
	// The group's timing first, so that options in opts override it.
	all := []kgo.Opt{
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(cfg.HeartbeatInterval),
		kgo.Balancers(balancer(cfg.RebalanceStrategy)),
	}
	all = append(all, opts...)
	all = append(all,
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Ladder.Topics()...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(fetchWait(r.prefetch)),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onLost),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(30*time.Second),
	)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("kafkadelay: bucket client: %w", err)
	}
	r.cl, r.dest = cl, cl
	if cfg.DestinationOpts != nil {
		dopts := append(append([]kgo.Opt(nil), cfg.DestinationOpts...),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(30*time.Second))
		d, err := kgo.NewClient(dopts...)
		if err != nil {
			cl.Close()
			return nil, fmt.Errorf("kafkadelay: destination client: %w", err)
		}
		r.dest = d
	}
	if cfg.CreateDestinations {
		r.creator = newCreator(r.dest, cfg.DestinationPartitions, cfg.DestinationReplicationFactor, r.log)
	}
	return r, nil
}

// fill checks the required fields and sets the defaults.
func (c *Config) fill() error {
	if c.Ladder == nil {
		return fmt.Errorf("%w: Config.Ladder is required", ErrInvalid)
	}
	if c.Group == "" {
		return fmt.Errorf("%w: Config.Group is required", ErrInvalid)
	}
	if c.DeadLetterTopic == "" {
		return fmt.Errorf("%w: Config.DeadLetterTopic is required", ErrInvalid)
	}
	if err := ValidTopic(c.DeadLetterTopic); err != nil {
		return fmt.Errorf("Config.DeadLetterTopic: %w", err)
	}
	if _, ok := c.Ladder.Bucket(c.DeadLetterTopic); ok {
		return fmt.Errorf("%w: Config.DeadLetterTopic %q is a bucket topic", ErrInvalid, c.DeadLetterTopic)
	}
	for name, d := range map[string]time.Duration{
		"Prefetch": c.Prefetch, "CommitInterval": c.CommitInterval,
		"RetryMin": c.RetryMin, "RetryMax": c.RetryMax, "RevokeWait": c.RevokeWait,
	} {
		if d < 0 {
			return fmt.Errorf("%w: Config.%s is negative (%v)", ErrInvalid, name, d)
		}
	}
	if c.ReadAhead < 0 {
		return fmt.Errorf("%w: Config.ReadAhead is negative (%d)", ErrInvalid, c.ReadAhead)
	}
	if c.ReadAhead == 0 {
		c.ReadAhead = 1000
	}
	if c.MaxInFlight < 0 {
		return fmt.Errorf("%w: Config.MaxInFlight is negative (%d)", ErrInvalid, c.MaxInFlight)
	}
	if c.Prefetch == 0 {
		c.Prefetch = min(c.Ladder.Smallest(), time.Second)
	}
	if c.SessionTimeout < 0 || c.HeartbeatInterval < 0 {
		return fmt.Errorf("%w: Config.SessionTimeout and HeartbeatInterval must not be negative", ErrInvalid)
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = min(DefaultHeartbeatInterval, c.SessionTimeout/3)
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		return fmt.Errorf("%w: Config.HeartbeatInterval (%v) must be less than SessionTimeout (%v)", ErrInvalid, c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.RebalanceStrategy == "" {
		c.RebalanceStrategy = "cooperative-sticky"
	}
	if balancer(c.RebalanceStrategy) == nil {
		return fmt.Errorf("%w: Config.RebalanceStrategy %q: want one of %s", ErrInvalid, c.RebalanceStrategy, strings.Join(RebalanceStrategies, ", "))
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 50000
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = 200 * time.Millisecond
	}
	if c.RetryMin == 0 {
		c.RetryMin = 100 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 5 * time.Second
	}
	if c.RetryMax < c.RetryMin {
		return fmt.Errorf("%w: Config.RetryMax (%v) is less than RetryMin (%v)", ErrInvalid, c.RetryMax, c.RetryMin)
	}
	if c.RevokeWait == 0 {
		c.RevokeWait = 5 * time.Second
	}
	if c.DestinationPartitions == 0 {
		c.DestinationPartitions = -1
	}
	if c.DestinationReplicationFactor == 0 {
		c.DestinationReplicationFactor = -1
	}
	if c.DestinationPartitions < -1 || c.DestinationReplicationFactor < -1 {
		return fmt.Errorf("%w: Config.DestinationPartitions (%d) and DestinationReplicationFactor (%d) must be positive, or -1 for the cluster's default",
			ErrInvalid, c.DestinationPartitions, c.DestinationReplicationFactor)
	}
	if c.Observer == nil {
		c.Observer = BaseObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// The defaults of Config's group timing: a republisher killed by SIGKILL
// has its partitions taken over within about DefaultSessionTimeout plus a
// heartbeat and a rebalance.
const (
	DefaultSessionTimeout    = 6 * time.Second
	DefaultHeartbeatInterval = 500 * time.Millisecond
)

// RebalanceStrategies are the values Config.RebalanceStrategy accepts.
var RebalanceStrategies = []string{"cooperative-sticky", "sticky", "range", "round-robin"}

// balancer returns the franz-go balancer of a strategy name, or nil.
func balancer(name string) kgo.GroupBalancer {
	switch name {
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer()
	case "sticky":
		return kgo.StickyBalancer()
	case "range":
		return kgo.RangeBalancer()
	case "round-robin":
		return kgo.RoundRobinBalancer()
	}
	return nil
}

// destName is an interned destination name: its ValidTopic error, and
// whether it is a bucket or the dead-letter topic.
type destName struct {
	name    string
	invalid error
	ours    bool
}

// intern returns the string of b, one copy per distinct name (up to
// 10,000 names; then it stops remembering new ones), and ValidTopic's
// verdict on it. It remembers whether the name is a bucket or the
// dead-letter topic for parse (see isOurs).
func (r *Republisher) intern(b []byte) (string, error) {
	d := r.destName(b)
	return d.name, d.invalid
}

// isOurs reports whether a destination is a bucket or the dead-letter
// topic.
func (r *Republisher) isOurs(dest string) bool {
	if dest == r.last.name && r.last.name != "" {
		return r.last.ours
	}
	if d, ok := r.names[dest]; ok {
		return d.ours
	}
	_, isBucket := r.cfg.Ladder.Bucket(dest)
	return isBucket || dest == r.cfg.DeadLetterTopic
}

// destName returns b's interned name.
func (r *Republisher) destName(b []byte) destName {
	if string(b) == r.last.name && r.last.name != "" {
		return r.last
	}
	if d, ok := r.names[string(b)]; ok {
		r.last = d
		return d
	}
	s := string(b)
	_, isBucket := r.cfg.Ladder.Bucket(s)
	d := destName{name: s, invalid: ValidTopic(s), ours: isBucket || s == r.cfg.DeadLetterTopic}
	if r.names == nil {
		r.names = make(map[string]destName)
	}
	if len(r.names) < 10000 {
		r.names[s] = d
	}
	r.last = d
	return d
}

// fetchWait is the broker's long-poll wait: half the prefetch, so that a
// partition resumed while another fetch is waiting on the same broker is
// read well before its records are due (at most 500ms, at least 10ms).
func fetchWait(prefetch time.Duration) time.Duration {
	return min(max(prefetch/2, 10*time.Millisecond), 500*time.Millisecond)
}

// Run consumes the bucket topics until ctx is done, then stops: it gives
// up its partitions (waiting up to RevokeWait for produces in flight,
// committing what is finished) and closes its clients. It returns nil
// after a stop by ctx, or the error that stopped it. A Republisher runs
// once.
func (r *Republisher) Run(ctx context.Context) error {
	err := errors.New("kafkadelay: Republisher.Run called twice")
	r.runOnce.Do(func() { err = r.run(ctx) })
	return err
}

func (r *Republisher) run(ctx context.Context) error {
	defer func() {
		if r.dest != r.cl {
			r.dest.Close()
		}
	}()
	if err := r.checkTopics(ctx); err != nil {
		r.cl.Close()
		return err
	}
	commitDone := make(chan struct{})
	commitCtx, stopCommits := context.WithCancel(context.Background())
	go func() {
		defer close(commitDone)
		r.commitLoop(commitCtx)
	}()
	var acts []action // reused from poll to poll
	for {
		if !r.waitRoom(ctx) {
			break
		}
		fetches := r.cl.PollRecords(ctx, 10000)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			r.cl.AllowRebalance()
			break
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				r.log.Warn("kafkadelay: fetch error", "topic", topic, "partition", p, "err", err)
				r.obs.FetchFailed(FetchFailure{Topic: topic, Partition: p, Err: err})
			}
		})
		// Headers are parsed before taking the lock, which produce
		// callbacks need too.
		now := time.Now()
		// The entries of a partition's records are allocated together,
		// slabEntries at a time (franz-go allocates the records of a
		// fetch together too, and an entry keeps its record: one slab's
		// entries are alive about as long as the fetch's records).
		type batch struct {
			key   tp
			items []*entry
		}
		var batches []batch
		fetches.EachPartition(func(f kgo.FetchTopicPartition) {
			if len(f.Records) == 0 {
				return
			}
			var slab []entry
			items := make([]*entry, len(f.Records))
			for i, rec := range f.Records {
				if len(slab) == 0 {
					slab = make([]entry, min(len(f.Records)-i, slabEntries))
				}
				e := &slab[0]
				slab = slab[1:]
				r.parse(e, rec, now)
				items[i] = e
			}
			batches = append(batches, batch{tp{f.Topic, f.Partition}, items})
		})
		// One partition at a time, so that produce callbacks (which need
		// the lock too) are not held up behind a whole poll.
		acts = acts[:0]
		for _, b := range batches {
			r.mu.Lock()
			if p := r.parts[b.key]; p != nil {
				if len(p.buf) == 0 {
					p.buf = b.items
				} else {
					p.buf = append(p.buf, b.items...)
				}
				p.waiting += len(b.items)
				acts = r.pump(p, now, acts)
			}
			r.mu.Unlock()
		}
		r.cl.AllowRebalance()
		r.do(acts)
		clear(acts) // keep no entry alive
	}
	stopCommits()
	<-commitDone
	// Close leaves the group: onRevoked runs for every partition, waits
	// for the produces in flight and commits, before the producer stops.
	r.cl.Close()
	return nil
}

// slabEntries is how many entries the poll loop allocates at once: 64
// entries (288 bytes each) stay under the Go runtime's 32 KB small-object
// limit, so slabs come from reused size-classed spans rather than as large
// allocations zeroed and faulted in for each fetch, and a long-lived entry
// keeps at most 63 others' memory alive.
const slabEntries = 64

// checkTopics fails when a bucket topic or the dead-letter topic does not
// exist, naming it, rather than consuming nothing or dead-lettering into
// the void.
func (r *Republisher) checkTopics(ctx context.Context) error {
	want := append(r.cfg.Ladder.Topics(), r.cfg.DeadLetterTopic)
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range want {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, mt)
	}
	var resp *kmsg.MetadataResponse
	var err error
	for attempt := 0; ; attempt++ {
		resp, err = req.RequestWith(ctx, r.cl)
		if err == nil || attempt == 2 || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("kafkadelay: reading the bucket topics' metadata: %w", err)
	}
	var missing []string
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || len(t.Partitions) == 0 {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kafkadelay: topics missing on the bucket cluster (create them first): %q", missing)
	}
	return nil
}

// commitLoop commits finished offsets every CommitInterval.
func (r *Republisher) commitLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.commitMu.Lock()
		r.mu.Lock()
		offsets, parts := r.committable(nil)
		r.mu.Unlock()
		if testHookBeforeCommit != nil && len(offsets) > 0 {
			testHookBeforeCommit("loop")
		}
		r.commit(ctx, offsets, parts)
		r.commitMu.Unlock()
	}
}

// testHookBeforeCommit, set by tests only, runs between the snapshot of
// the offsets and their commit.
var testHookBeforeCommit func(kind string)

// committable returns the offsets to commit for the given partitions (all
// owned ones if ps is nil): those whose finished prefix moved past the last
// commit. r.mu is held.
func (r *Republisher) committable(ps []*partition) (map[string]map[int32]kgo.EpochOffset, []*partition) {
	if ps == nil {
		for _, p := range r.parts {
			ps = append(ps, p)
		}
	}
	var offsets map[string]map[int32]kgo.EpochOffset
	var out []*partition
	for _, p := range ps {
		if !p.hasNext || p.next.Offset <= p.committed {
			continue
		}
		if offsets == nil {
			offsets = make(map[string]map[int32]kgo.EpochOffset)
		}
		if offsets[p.topic] == nil {
			offsets[p.topic] = make(map[int32]kgo.EpochOffset)
		}
		offsets[p.topic][p.id] = p.next
		out = append(out, p)
	}
	return offsets, out
}

// commit commits offsets and records them on parts when the broker
// accepted them.
func (r *Republisher) commit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, parts []*partition) {
	if len(offsets) == 0 {
		return
	}
	r.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			if !errors.Is(err, context.Canceled) && r.commitErrors.Add(1) == 1 {
				r.log.Warn("kafkadelay: commit failed; retrying every commit interval (logged once until a commit succeeds)", "err", err)
			}
			return
		}
		if n := r.commitErrors.Swap(0); n > 0 {
			r.log.Info("kafkadelay: commit succeeded again", "failed_commits", n)
		}
		ok := make(map[tp]bool)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					r.log.Warn("kafkadelay: commit refused", "topic", t.Topic, "partition", p.Partition, "err", err)
					continue
				}
				ok[tp{t.Topic, p.Partition}] = true
			}
		}
		r.mu.Lock()
		for _, p := range parts {
			if ok[tp{p.topic, p.id}] {
				if o := offsets[p.topic][p.id].Offset; o > p.committed {
					p.committed = o
				}
			}
		}
		r.mu.Unlock()
	})
}

// onAssigned starts tracking newly assigned partitions.
func (r *Republisher) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	for topic, ps := range assigned {
		idx := r.cfg.Ladder.index(topic)
		for _, id := range ps {
			k := tp{topic, id}
			if r.counters[k] == nil {
				r.counters[k] = new(counters)
			}
			p := newPartition(topic, id, r.cfg.Ladder.buckets[idx], idx == 0)
			p.counters = r.counters[k]
			r.parts[k] = p
		}
	}
	r.mu.Unlock()
	// A partition paused by an earlier owner of this client (paused
	// state outlives rebalances in franz-go) must fetch again.
	cl.ResumeFetchPartitions(assigned)
	r.log.Info("kafkadelay: partitions assigned", "partitions", describe(assigned))
	r.obs.Rebalanced(Rebalance{Kind: "assigned", Partitions: assigned})
}

// onRevoked gives partitions up: it stops their timers and takes no new
// record, waits up to RevokeWait for the produces already sent, commits
// the finished prefix, drops what is held and resumes the partitions.
func (r *Republisher) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	r.giveUp(ctx, cl, revoked, "revoked")
}

// onLost drops partitions that another member may already own: nothing
// is committed (the commit would fail or rewind the new owner's).
func (r *Republisher) onLost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	r.giveUp(ctx, cl, lost, "lost")
}

func (r *Republisher) giveUp(ctx context.Context, cl *kgo.Client, gone map[string][]int32, kind string) {
	if len(gone) == 0 {
		return
	}
	ev := Rebalance{Kind: kind, Partitions: gone}
	r.mu.Lock()
	var ps []*partition
	var acts []action
	now := time.Now()
	for topic, ids := range gone {
		for _, id := range ids {
			if p := r.parts[tp{topic, id}]; p != nil {
				p.stop()
				ps = append(ps, p)
				if kind == "revoked" {
					var n int
					acts, n = r.handOff(p, now, acts)
					ev.HandedOff += n
				}
			}
		}
	}
	r.mu.Unlock()
	r.do(acts)

	if kind == "revoked" {
		r.awaitProduces(ctx, ps, time.Now().Add(r.cfg.RevokeWait))
	}

	if kind == "revoked" {
		r.commitMu.Lock() // until the commit below is done: see commitMu
	}
	r.mu.Lock()
	var offsets map[string]map[int32]kgo.EpochOffset
	var committing []*partition
	if kind == "revoked" {
		offsets, committing = r.committable(ps)
	}
	for _, p := range ps {
		r.pending -= p.pending
		r.wakePoll()
		dropped, unacked := p.drop()
		ev.Dropped += dropped
		ev.Unacked += unacked
		delete(r.parts, tp{p.topic, p.id})
	}
	r.mu.Unlock()

	cl.ResumeFetchPartitions(gone)
	if kind == "revoked" {
		if len(offsets) > 0 {
			if testHookBeforeCommit != nil {
				testHookBeforeCommit("revoke")
			}
			r.commit(ctx, offsets, committing)
			ev.Committed = make(map[string]map[int32]int64)
			for t, m := range offsets {
				ev.Committed[t] = make(map[int32]int64)
				for id, o := range m {
					ev.Committed[t][id] = o.Offset
				}
			}
		}
		r.commitMu.Unlock()
	}
	r.mu.Lock()
	for _, p := range ps {
		ev.Repeated += p.repeated()
	}
	r.mu.Unlock()
	r.log.Info("kafkadelay: partitions "+kind, "partitions", describe(gone),
		"committed", len(committing), "handed_off", ev.HandedOff, "dropped", ev.Dropped, "unacked", ev.Unacked, "repeated", ev.Repeated)
	r.obs.Rebalanced(ev)
}

// awaitProduces waits until the partitions have no produce in flight, the
// deadline passes or ctx ends.
func (r *Republisher) awaitProduces(ctx context.Context, ps []*partition, deadline time.Time) {
	for {
		r.mu.Lock()
		busy := 0
		for _, p := range ps {
			busy += p.producing
		}
		wait := time.Until(deadline)
		if busy == 0 || wait <= 0 || ctx.Err() != nil {
			r.mu.Unlock()
			return
		}
		changed := r.changed
		r.waiting++
		r.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		r.mu.Lock()
		r.waiting--
		r.mu.Unlock()
	}
}

// describe prints a partition map as "topic[0 1 2] topic2[0]".
func describe(m map[string][]int32) string {
	s := ""
	for t, ps := range m {
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("%s%v", t, ps)
	}
	return s
}

// waitRoom waits until fewer than MaxInFlight records are taken and
// unfinished, or ctx ends (false). This is backpressure, not a sleep:
// rebalances are allowed while it waits (AllowRebalance ran after the last
// poll), and franz-go heartbeats on its own goroutine.
func (r *Republisher) waitRoom(ctx context.Context) bool {
	for {
		r.mu.Lock()
		full := r.pending >= r.cfg.MaxInFlight
		r.mu.Unlock()
		if !full {
			return ctx.Err() == nil
		}
		select {
		case <-r.room:
		case <-ctx.Done():
			return false
		}
	}
}

// wakePoll tells a waiting poll loop that a record finished. r.mu is held.
func (r *Republisher) wakePoll() {
	if r.pending < r.cfg.MaxInFlight {
		select {
		case r.room <- struct{}{}:
		default:
		}
	}
}

// signal wakes the revocations waiting for produces. r.mu is held.
func (r *Republisher) signal() {
	if r.waiting == 0 {
		return
	}
	close(r.changed)
	r.changed = make(chan struct{})
}
