package kafkadelay

import (
	"sort"
	"time"
)

// Observer receives the republisher's events, for metrics. Its methods are
// called from the republisher's goroutines, outside its locks, and must
// return quickly. Embed [BaseObserver] to implement only some of them:
// methods added to Observer later will have a no-op there.
type Observer interface {
	// Released is called when a record's produce to its destination was
	// acknowledged.
	Released(Release)
	// Rerouted is called when a record's produce to the next bucket topic
	// was acknowledged.
	Rerouted(from, to Bucket)
	// ProduceFailed is called when a produce failed; the republisher
	// retries it with backoff (the partition stays paused meanwhile) or,
	// for a destination that cannot take the record, dead-letters it.
	ProduceFailed(ProduceFailure)
	// FetchFailed is called for each error a poll of the bucket topics
	// returned: a partition's fetch failed, or the client could not reach
	// the cluster or join its group (while the cluster is unreachable, the
	// republisher keeps polling, and each poll reports it again). The
	// republisher logs it and polls again; franz-go retries on its own.
	FetchFailed(FetchFailure)
	// DeadLettered is called when a record's produce to the dead-letter
	// topic was acknowledged.
	DeadLettered(DeadLetter)
	// Rebalanced is called after each change of the partitions this
	// republisher owns.
	Rebalanced(Rebalance)
}

// BaseObserver implements [Observer] with methods that do nothing.
type BaseObserver struct{}

// Released does nothing.
func (BaseObserver) Released(Release) {}

// Rerouted does nothing.
func (BaseObserver) Rerouted(from, to Bucket) {}

// ProduceFailed does nothing.
func (BaseObserver) ProduceFailed(ProduceFailure) {}

// FetchFailed does nothing.
func (BaseObserver) FetchFailed(FetchFailure) {}

// DeadLettered does nothing.
func (BaseObserver) DeadLettered(DeadLetter) {}

// Rebalanced does nothing.
func (BaseObserver) Rebalanced(Rebalance) {}

// Release describes a record delivered to its destination.
type Release struct {
	// Source, Partition and Offset are the bucket record that was
	// released.
	Source    string
	Partition int32
	Offset    int64
	// Destination is the topic it was produced to.
	Destination string
	// ID is the delivery id.
	ID string
	// Due is the due instant; Produced is when the republisher handed the
	// record to the producer (never before Due); Acked is when the
	// cluster acknowledged it.
	Due, Produced, Acked time.Time
	// Early reports a release produced before its due instant by the
	// republisher's clock. It is always false unless the clock went
	// backwards between the check and the produce; it is counted in
	// [PartitionStats.ReleasedEarly].
	Early bool
}

// Lateness is how long after its due instant the record was produced.
func (r Release) Lateness() time.Duration { return r.Produced.Sub(r.Due) }

// ProduceFailure describes a failed produce.
type ProduceFailure struct {
	// Source is the bucket topic and partition the record was read from.
	Source    string
	Partition int32
	// Offset is the bucket record's offset.
	Offset int64
	// Target is the topic the produce was for.
	Target string
	// Attempt counts the failures of this record's produce, from 1.
	Attempt int
	// Err is franz-go's error.
	Err error
}

// FetchFailure describes an error a poll of the bucket topics returned.
type FetchFailure struct {
	// Topic and Partition are the partition whose fetch failed; Topic is
	// empty (and Partition 0) for an error of the client as a whole, such
	// as a group it cannot join.
	Topic     string
	Partition int32
	// Err is franz-go's error.
	Err error
}

// DeadLetter describes a record sent to the dead-letter topic.
type DeadLetter struct {
	// Source is the bucket topic and partition the record was read from.
	Source    string
	Partition int32
	Offset    int64
	// Reason is the header [HeaderDeadReason] of the dead letter.
	Reason string
}

// Rebalance describes a change of the partitions a republisher owns.
type Rebalance struct {
	// Kind is "assigned", "revoked" or "lost".
	Kind string
	// Partitions are the partitions assigned, revoked or lost, by topic.
	Partitions map[string][]int32
	// Committed is the offsets committed for revoked partitions (next
	// offset to read, by topic and partition).
	Committed map[string]map[int32]int64
	// HandedOff counts records a revoked partition held in memory,
	// waiting for their instant, that were produced to the bucket their
	// remaining delay routes them to (or to their destination, if due) so
	// that the offsets behind them could be committed.
	HandedOff int
	// Dropped counts records fetched but not taken, and records held by
	// a lost partition: the next owner reads them again.
	Dropped int
	// Unacked counts records whose produce was not acknowledged when the
	// partitions were given up: they may reach their target as well as
	// being produced again by the next owner (duplicates).
	Unacked int
	// Repeated bounds the records whose output was produced but whose
	// offset could not be committed (behind a record still held or
	// failing, or past the last commit of a lost partition, or of a
	// revoked one whose commit failed): the next owner produces them
	// again. Unacked + Repeated bounds the duplicates a change of owner
	// causes.
	Repeated int
}

// PartitionStats is a snapshot of one bucket partition.
type PartitionStats struct {
	Topic     string
	Partition int32
	// Owned reports whether this republisher owns the partition now; the
	// counters below are kept after a partition is revoked.
	Owned bool
	// Paused reports whether fetching is paused (the head record is not
	// due to move yet, a produce is being retried, or MaxInFlight is
	// reached).
	Paused bool
	// HeadLate is how far past its instant the partition's oldest
	// unfinished record is: the instant it should have left its bucket
	// or reached its destination. It is the lag that matters for a delay
	// topic; the offset lag of a paused partition says nothing. Zero when
	// nothing is overdue.
	HeadLate time.Duration
	// Buffered counts fetched records not yet taken (the head is not due
	// to move); Held counts records taken and waiting in memory for their
	// instant; Producing counts produces not yet acknowledged.
	Buffered, Held, Producing int
	// Committed is the last offset committed (the next to read), -1 if
	// none yet.
	Committed int64
	// Released, Rerouted and DeadLettered count acknowledged produces to
	// a destination, to a bucket and to the dead-letter topic.
	Released, Rerouted, DeadLettered int64
	// ReleasedEarly counts releases produced before their due instant by
	// the republisher's clock. It must stay 0.
	ReleasedEarly int64
	// ProduceErrors counts failed produces (each retry that fails counts).
	ProduceErrors int64
	// LatenessMax is the largest lateness of a release from this
	// partition.
	LatenessMax time.Duration
	// OutOfOrder counts records taken ahead of the partition's head
	// because they could not wait behind it: in a bucket larger than their
	// remaining delay (a producer that rounds up), or behind records whose
	// timestamps are later than theirs by more than the prefetch. A
	// producer that follows the ladder's rule causes none.
	OutOfOrder int64
}

// counters are a partition's totals, kept across revocations.
type counters struct {
	released, rerouted, dead, early, errors, outOfOrder int64
	latenessMax                                         time.Duration
}

// Stats returns a snapshot of every partition this republisher owns or
// has owned, sorted by topic and partition.
func (r *Republisher) Stats() []PartitionStats {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]PartitionStats, 0, len(r.counters))
	for tp, c := range r.counters {
		s := PartitionStats{
			Topic: tp.topic, Partition: tp.partition, Committed: -1,
			Released: c.released, Rerouted: c.rerouted, DeadLettered: c.dead,
			ReleasedEarly: c.early, ProduceErrors: c.errors, LatenessMax: c.latenessMax,
			OutOfOrder: c.outOfOrder,
		}
		if p := r.parts[tp]; p != nil {
			s.Owned = true
			s.Paused = p.paused
			s.HeadLate = p.headLate(now)
			s.Buffered = p.waiting
			s.Held, s.Producing = p.counts()
			s.Committed = p.committed
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
