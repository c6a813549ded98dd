// Package ontimedriver defines the contract between the ontime library and
// the stores that keep its timers (Redis, the embedded bbolt store, ...).
//
// Users of ontime do not call a Driver directly: they pass one to
// ontime.NewClient and use the Client and Worker. This package is public so
// that drivers can live in their own packages and so that every driver can run
// the one conformance suite in package drivertest.
//
// # Model
//
// A topic is a set of timers keyed by id. Each timer holds an opaque payload
// (the encoded envelope, see package envelope), the instant it is due, an
// attempt counter and, while a worker holds it, a lease. A timer is in exactly
// one of three places: scheduled (waiting for its due time, or due and not yet
// claimed), leased (claimed by a worker until the lease deadline), or dead (in
// the topic's dead-letter set). An expired lease makes a timer due again: the
// next Claim takes it, with its attempt counter raised.
//
// Time: every due and lease comparison uses the store's clock (the Redis
// server's TIME, the embedded store's process clock), never the caller's.
// Relative values (NewTimer.Delay, Settlement.Delay, lease durations) are
// added to the store's clock by the store. Due times are kept to at least the
// millisecond, and a timer is never claimable before its due time, compared
// at the store clock's full resolution: a store that rounds must round due
// times up, and add a delay to its clock read at full resolution (not
// rounded down first). ClaimResult.Now reports the clock at that
// resolution.
//
// Fencing: Claim hands out a lease token per timer. Settle and Extend must
// present it, and the store refuses (ErrLeaseLost) when the timer was
// re-published, cancelled, or claimed again by someone else since. So a
// handler that re-publishes its own id (re-arming) keeps the new timer when it
// acks, and a worker whose lease expired cannot touch what another worker now
// holds.
//
// Optional interfaces: a store may also implement LegacyPayloads,
// SlowClaims, TopicIndex, TopicIndexRepairer and Recurring. A Driver that wraps
// another implements Wrapper, and callers look the optional interfaces up
// through wrappers with As, so a wrapper hides none of them.
//
// All methods are safe for concurrent use. Topics passed to a Driver are full
// topics (any router prefix already applied) and ids are valid (see
// ValidateTopic and ValidateID); drivers may assume so.
package ontimedriver

import (
	"context"
	"errors"
	"time"
)

// Errors drivers return. Callers compare with errors.Is.
var (
	// ErrNotFound: no timer (or dead letter) with that id in that topic.
	ErrNotFound = errors.New("ontime: timer not found")
	// ErrExists: an IfAbsent schedule found the id already present
	// (scheduled or leased).
	ErrExists = errors.New("ontime: timer already exists")
	// ErrLeaseLost: the lease token no longer matches: the lease expired and
	// the timer was claimed again, or the timer was re-published, cancelled
	// or settled meanwhile. Nothing was changed.
	ErrLeaseLost = errors.New("ontime: lease lost")
	// ErrClosed: the driver was closed.
	ErrClosed = errors.New("ontime: driver closed")
	// ErrLeased: FireNow found the timer held by a worker under a live
	// lease (it is being delivered). Nothing was changed.
	ErrLeased = errors.New("ontime: timer is being delivered")
)

// Driver is a store of timers. See the package documentation for the model.
// Every implementation must pass drivertest.Run.
type Driver interface {
	// Schedule writes a batch of timers to one topic in one round trip.
	// With the default mode an existing id is overwritten: new payload, new
	// due time, attempt counter reset to 0, any lease dropped (the old lease
	// token stops working). With IfAbsent, an id that exists (scheduled or
	// leased; dead letters do not count) is left untouched and its result
	// carries ErrExists. Results are in the order of timers. The returned
	// error is for the call as a whole (store unreachable, ...): then nothing
	// may be reported as written.
	//
	// When a scheduled timer becomes the earliest of its topic the store
	// notifies Subscribe listeners of the topic.
	Schedule(ctx context.Context, topic string, timers []NewTimer, mode ScheduleMode) ([]ScheduleResult, error)

	// Claim leases up to max timers of the topic that are due now (due time,
	// or expired lease deadline, <= store now), oldest first, atomically and
	// in one round trip. Each claimed timer gets lease deadline = store now +
	// lease, a fresh lease token and attempt = previous attempt + 1. Ids in the
	// due index that have no payload (orphans) are removed, not returned.
	// The result also carries the instant the topic's next timer (scheduled
	// or leased) becomes claimable, if any, so a worker knows how long it may
	// sleep.
	Claim(ctx context.Context, topic string, max int, lease time.Duration) (*ClaimResult, error)

	// Settle applies the outcome of handled timers in one round trip: ack
	// (delete), retry/snooze/release (schedule again after Delay), or move to
	// the dead-letter set. Each is fenced by its lease token; a refused one
	// gets ErrLeaseLost in its slot of the result and changes nothing.
	Settle(ctx context.Context, topic string, ops []Settlement) ([]error, error)

	// Extend pushes the lease deadline of claimed timers to store now + lease,
	// fenced by token. A lost lease gets ErrLeaseLost in its slot. The tokens
	// stay valid (Extend does not change them).
	Extend(ctx context.Context, topic string, leases []Lease, lease time.Duration) ([]error, error)

	// Cancel deletes a scheduled or leased timer (not a dead letter).
	// ErrNotFound when absent.
	Cancel(ctx context.Context, topic, id string) error

	// CancelBatch is Cancel for many timers of one topic, in one atomic
	// step and one round trip: the result has one slot per id, in order,
	// nil for a timer deleted and ErrNotFound for an id with no scheduled
	// or leased timer (a dead letter, an absent id, or an id given
	// earlier in the same call). The returned error is for the call as a
	// whole: then nothing was deleted. nil or empty ids delete nothing and
	// return an empty result. The call holds the store (one transaction,
	// one script) for its whole length, so callers send large sets in
	// chunks of a few thousand ids.
	CancelBatch(ctx context.Context, topic string, ids []string) ([]error, error)

	// Get returns one scheduled or leased timer, or ErrNotFound.
	Get(ctx context.Context, topic, id string) (*TimerInfo, error)

	// List returns scheduled and leased timers ordered by the instant they
	// become claimable (due time, or lease deadline while leased), then id.
	// Paging: pass the previous page's NextCursor in ListOptions.Cursor.
	List(ctx context.Context, topic string, opts ListOptions) (*Page, error)

	// Count counts a topic's timers by state.
	Count(ctx context.Context, topic string) (Counts, error)

	// Topics lists the topics that hold at least one timer or dead letter,
	// sorted.
	Topics(ctx context.Context) ([]string, error)

	// CountDue counts a topic's timers (scheduled and leased, each by the
	// instant it becomes claimable, as List orders them) between
	// consecutive bounds, in one round trip, from the due index alone: no
	// payload is read, and the cost grows with the number of bounds (Redis:
	// one ZCOUNT each) or with the timers in the counted range (the
	// embedded store scans index keys), never with the topic's whole
	// size. bounds must be strictly increasing and hold 1 to MaxDueBounds
	// instants (see ValidateDueBounds). The result has len(bounds)+1
	// counts: [0] the timers claimable before bounds[0], [i] those in
	// [bounds[i-1], bounds[i]), and the last those at or after the last
	// bound. Bounds are compared at the store's precision the way due
	// times are stored (rounded up), so a timer published with At: b is
	// counted from bound b on.
	CountDue(ctx context.Context, topic string, bounds []time.Time) ([]int64, error)

	// FireNow makes a scheduled timer due at once, in one atomic step: its
	// due time becomes the store's now (a timer already due keeps its due
	// time and its place in line), its payload, attempt counter and last
	// error are kept, and Subscribe listeners of the topic are woken. It
	// returns the due time as stored. ErrNotFound when there is no such
	// timer (dead letters are replayed, not fired); ErrLeased when a worker
	// holds it under a live lease (it is being delivered: nothing
	// changes). A store that cannot tell a leased timer from a scheduled
	// one (the faststream-compatible layout) makes it due all the same,
	// which delivers it a second time.
	FireNow(ctx context.Context, topic, id string) (time.Time, error)

	// ListDead returns a topic's dead letters, oldest death first, paged like
	// List.
	ListDead(ctx context.Context, topic string, opts ListOptions) (*DeadPage, error)

	// ReplayDead moves the dead letters named by ids back to scheduled, due
	// at once, attempt counter reset to 0. It acts on exactly the ids given:
	// nil or empty ids replay nothing (0, nil); ReplayAllDead replays every
	// one. It returns how many were moved. An id that is not a dead letter
	// is skipped (not an error); if a live timer with that id exists, the
	// dead letter is not replayed over it and stays dead.
	ReplayDead(ctx context.Context, topic string, ids []string) (int, error)

	// ReplayAllDead is ReplayDead for every dead letter of the topic.
	ReplayAllDead(ctx context.Context, topic string) (int, error)

	// PurgeDead deletes the dead letters named by ids: exactly those, so nil
	// or empty ids delete nothing (0, nil). It returns how many were
	// deleted.
	PurgeDead(ctx context.Context, topic string, ids []string) (int, error)

	// PurgeAllDead deletes every dead letter of the topic and returns how
	// many there were.
	PurgeAllDead(ctx context.Context, topic string) (int, error)

	// Subscribe returns a channel that receives a value when a timer of the
	// topic is scheduled that may be earlier than what a sleeping worker knows
	// about. The value is the new timer's due time (zero if unknown). The
	// channel has a buffer and the store drops notifications rather than
	// block: a receiver must treat a notification as "claim now or re-check
	// the sleep", and keep a fallback poll. cancel releases the subscription;
	// it is safe to call more than once. The subscription is active when
	// Subscribe returns.
	Subscribe(ctx context.Context, topic string) (ch <-chan time.Time, cancel func(), err error)

	// Ping checks that the store is reachable.
	Ping(ctx context.Context) error

	// Close releases what the driver itself opened (subscriptions, files). It
	// never closes a client the caller passed in.
	Close() error
}

// ScheduleMode says what Schedule does with an id that exists.
type ScheduleMode int

const (
	// Upsert overwrites an existing timer (reschedule, new payload).
	Upsert ScheduleMode = iota
	// IfAbsent leaves an existing timer untouched and reports ErrExists.
	IfAbsent
)

// NewTimer is a timer to schedule. Exactly one of At and Delay is used: At if
// it is not the zero time, else Delay (>= 0) added to the store's clock. At
// must be within [MinDue, MaxDue] (see ValidateDue): Schedule refuses the
// whole call otherwise, with an error wrapping ErrInvalid that names the
// value, and writes nothing.
type NewTimer struct {
	ID      string
	At      time.Time
	Delay   time.Duration
	Payload []byte
}

// ScheduleResult is the outcome of one NewTimer.
type ScheduleResult struct {
	// Due is the due time as stored (rounded up to the store's precision).
	Due time.Time
	// Err is nil, or ErrExists in IfAbsent mode.
	Err error
}

// ClaimResult is what Claim returns.
type ClaimResult struct {
	Timers []ClaimedTimer
	// Next is when the topic's earliest remaining timer becomes claimable
	// (may be in the past if more are due than max). Zero when the topic is
	// empty.
	Next time.Time
	// Now is the store's clock at the claim.
	Now time.Time
}

// ClaimedTimer is a timer leased to the caller.
type ClaimedTimer struct {
	ID string
	// Token fences Settle and Extend.
	Token string
	// Due is the time the timer was scheduled for (before any lease). Stores
	// that cannot keep it (the faststream-compatible layout) report the
	// instant the timer became claimable.
	Due time.Time
	// Attempt counts claims since the timer was (re)scheduled: 1 on the first
	// delivery. Stores that cannot count (compatible layout) report 1.
	Attempt int
	// LeaseUntil is the lease deadline on the store's clock.
	LeaseUntil time.Time
	Payload    []byte
	// Schedule is the spec of a recurring timer (see Recurring), empty
	// for a plain timer; Tick is then the number of the tick claimed and
	// TickAt its scheduled instant (the due time it was armed with; Due
	// moves when the tick is retried, TickAt does not).
	Schedule string
	Tick     int64
	TickAt   time.Time
}

// Lease names a claimed timer and its token.
type Lease struct {
	ID    string
	Token string
}

// SettleKind is what to do with a handled timer.
type SettleKind int

const (
	// Ack deletes the timer.
	Ack SettleKind = iota
	// Retry schedules the timer again at store now + Delay; the attempt
	// counter is kept (the failed attempt counts). Error is kept as the last
	// error text where the store can.
	Retry
	// Snooze schedules the timer again at store now + Delay and gives back
	// the attempt the claim counted, so a snooze is not a failure. Release at
	// shutdown is Snooze with Delay 0.
	Snooze
	// Dead moves the timer to the topic's dead-letter set with Reason and
	// Error.
	Dead
)

// String returns the kind's name.
func (k SettleKind) String() string {
	switch k {
	case Ack:
		return "ack"
	case Retry:
		return "retry"
	case Snooze:
		return "snooze"
	case Dead:
		return "dead"
	}
	return "unknown"
}

// Dead-letter reasons used by ontime.
const (
	ReasonMaxAttempts = "max_attempts" // the retry policy gave up
	ReasonRejected    = "rejected"     // the handler asked for it
	ReasonUndecodable = "undecodable"  // the stored envelope does not decode
)

// Settlement is one outcome passed to Settle.
type Settlement struct {
	Lease
	Kind SettleKind
	// Delay for Retry and Snooze (>= 0).
	Delay time.Duration
	// Reason for Dead (see the Reason constants; free text allowed).
	Reason string
	// Error is the last error text, for Retry and Dead. Stores may truncate
	// it to 1 KiB.
	Error string
	// Next, for an Ack or Dead of a recurring timer's tick, is the next
	// tick to arm in the same atomic step (see Recurring); nil ends the
	// schedule. Ignored for a plain timer and for Retry and Snooze.
	Next *Tick
}

// State is where a timer is.
type State string

const (
	// StateScheduled: waiting for its due time, or due and not yet claimed.
	StateScheduled State = "scheduled"
	// StateLeased: claimed by a worker whose lease has not expired.
	StateLeased State = "leased"
)

// TimerInfo is a stored timer as Get and List see it.
type TimerInfo struct {
	ID string
	// Due is the scheduled due time (compatible layout: the instant the timer
	// becomes claimable, which is the lease deadline while leased).
	Due   time.Time
	State State
	// LeaseUntil is the lease deadline while leased, else zero.
	LeaseUntil time.Time
	// Attempt is the number of claims since the timer was (re)scheduled.
	Attempt int
	// LastError is the error text of the last failed attempt, if the store
	// keeps it.
	LastError string
	Payload   []byte
	// Recurring is the schedule entry of a recurring timer (nil for a
	// plain timer). Due is then its current tick's due time.
	Recurring *RecurringInfo
}

// DeadLetter is a timer in a topic's dead-letter set.
type DeadLetter struct {
	ID      string
	Due     time.Time // the due time it had
	DiedAt  time.Time
	Attempt int
	Reason  string
	Error   string
	Payload []byte
}

// ListOptions pages List and ListDead.
type ListOptions struct {
	// Before, if not zero, keeps only timers claimable before this instant
	// (List) or that died before it (ListDead).
	Before time.Time
	// Limit is the page size; 0 means 100. Drivers cap it at 1000.
	Limit int
	// Cursor is the previous page's NextCursor; empty for the first page.
	// Cursors are opaque.
	Cursor string
}

// Page is a page of List.
type Page struct {
	Timers []TimerInfo
	// NextCursor is empty on the last page.
	NextCursor string
}

// DeadPage is a page of ListDead.
type DeadPage struct {
	Dead       []DeadLetter
	NextCursor string
}

// Counts counts a topic's timers.
type Counts struct {
	Scheduled int64 // includes due-but-unclaimed and expired leases
	Leased    int64 // live leases
	Dead      int64
}

// LegacyPayloads is implemented by drivers whose payloads may have been
// written by other programs (the faststream-compatible Redis layout). When
// AcceptsLegacyPayloads reports true, the library decodes payloads with the
// lenient envelope.Decode (legacy JSON forms, raw bodies); otherwise with the
// strict envelope.DecodeBinary, and a payload that does not decode is
// dead-lettered with ReasonUndecodable.
type LegacyPayloads interface {
	AcceptsLegacyPayloads() bool
}

// SlowClaims is implemented by drivers whose Claim takes long next to a
// quick handler, typically because it waits for a disk sync before it
// answers (the embedded store). When SlowClaims reports true, a worker
// claims ahead of its free handler slots by default (TopicOptions.ClaimAhead),
// so that the next claim runs while the current handlers do.
type SlowClaims interface {
	SlowClaims() bool
}

// DeadLetterGetter is implemented by drivers that read one dead letter by
// id in one store call (the embedded store and Redis do), so that a
// dashboard can load the whole body of one dead letter while its lists
// carry cut bodies. A caller without it pages through ListDead.
type DeadLetterGetter interface {
	// GetDead returns the dead letter id of topic, or ErrNotFound.
	GetDead(ctx context.Context, topic, id string) (*DeadLetter, error)
}

// TopicCounter is implemented by drivers that count the timers of many
// topics in one call (Redis: one or two pipelines; the embedded
// store: one read transaction), so that listing thousands of topics with
// their counts (the server's GET /v1/topics and /v1/stats, a dashboard's
// refresh) costs the same few round trips whatever the number of topics.
// A caller without it calls Count per topic.
//
// A driver that wraps another (to observe or decorate its calls) should
// forward it, or its callers fall back to one Count per topic.
type TopicCounter interface {
	// CountTopics returns the counts of each of topics, in order, each as
	// Count returns it (a topic that holds nothing counts zero). Topics
	// are valid full topics; duplicates are allowed.
	CountTopics(ctx context.Context, topics []string) ([]Counts, error)
}

// TopicIndex is implemented by drivers that keep a store-wide index of
// topics by the instant their next timer becomes claimable, so that one
// worker loop can serve thousands of topics (all of them, or a pattern)
// without asking each one: an idle topic then costs nothing per poll.
//
// The index is a hint with one firm rule: for every topic that holds a
// timer, the indexed instant is at or before the instant the topic's next
// timer becomes claimable (a lower bound), or, where the store cannot keep
// it so atomically (a Redis Cluster, where the index and the topic live in
// different slots), it becomes so within a bounded time that the driver
// documents. An instant that is too early costs one Claim that finds
// nothing; every Claim of a topic sets the topic's entry to the exact
// next instant (Claim's ClaimResult.Next), or removes it when the topic
// has no timers, so topics that empty out leave the index.
//
// A driver that wraps another (to observe or decorate its calls) need
// not forward these methods: it implements Wrapper, and the library finds
// the index through it with As, as it finds every optional interface.
type TopicIndex interface {
	// TopicIndexed reports whether this driver, as configured, keeps the
	// index. (A driver type may keep it in one layout and not another:
	// the faststream-compatible Redis layout cannot, because the Python
	// library writes its keys without it.) When false, DueTopics and
	// SubscribeTopics return an error wrapping ErrNoTopicIndex.
	TopicIndexed() bool

	// DueTopics returns up to limit topics that match pattern (see
	// MatchTopic) and whose indexed instant is at or before the store's
	// now plus within (>= 0; 0: the topics due now), earliest first, each
	// with its instant, and the earliest indexed instant after that of a
	// matching topic (Next; zero when there is none, or when the driver
	// gave up looking for one among many topics that do not match: the
	// caller then polls). A worker asks with within = its poll interval,
	// so that it can start each topic at its instant and ask the index
	// once per poll interval, not at every topic's instant. One round
	// trip; the cost grows with the topics returned and, for a pattern,
	// with the non-matching topics passed over, never with the index's
	// whole size.
	DueTopics(ctx context.Context, pattern string, within time.Duration, limit int) (*DueTopicsResult, error)

	// SubscribeTopics is Subscribe for every topic that matches pattern:
	// the channel receives the topic and the new timer's due time when a
	// timer is scheduled that may be earlier than what a sleeping worker
	// knows about. Same buffering and "claim now or re-check" rules as
	// Subscribe; after a lost connection every subscriber gets a wake-up
	// with an empty Topic, meaning "any topic: look again".
	SubscribeTopics(ctx context.Context, pattern string) (ch <-chan TopicWake, cancel func(), err error)
}

// ErrNoTopicIndex is returned (wrapped) by the TopicIndex methods of a
// driver that does not keep the index in its configuration.
var ErrNoTopicIndex = errors.New("ontime: the store keeps no topic index")

// DueTopicsResult is what DueTopics returns.
type DueTopicsResult struct {
	// Topics are due (indexed instant <= Now + within), earliest first.
	Topics []string
	// At holds each topic's indexed instant (At[i] is Topics[i]'s).
	At []time.Time
	// Next is the earliest indexed instant after Now + within of a
	// matching topic; zero if none is known.
	Next time.Time
	// Now is the store's clock.
	Now time.Time
}

// TopicWake is one wake-up of SubscribeTopics.
type TopicWake struct {
	// Topic is the topic of the new timer; empty means "any topic".
	Topic string
	// Due is the new timer's due time; zero if unknown.
	Due time.Time
}

// TopicIndexRepairer is implemented by TopicIndex drivers whose index can
// miss a hint (a Redis Cluster, where the index is written after the
// topic's own script: a crash between the two loses the hint). A worker
// that serves topics from the index calls SyncTopicIndex every
// WorkerConfig.TopicIndexRepair when NeedsIndexRepair reports true.
type TopicIndexRepairer interface {
	// NeedsIndexRepair reports whether the index, as configured, can miss
	// a hint.
	NeedsIndexRepair() bool
	// SyncTopicIndex sets every topic's entry to its exact next instant
	// (or removes it); a repair that reads every topic, never run per
	// poll.
	SyncTopicIndex(ctx context.Context) error
}
