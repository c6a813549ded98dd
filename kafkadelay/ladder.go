package kafkadelay

import (
	"fmt"
	"strings"
	"time"
)

// Bucket is one rung of a [Ladder]: a topic whose records each wait Delay
// before the republisher moves them on.
type Bucket struct {
	// Delay is how long a record waits in this topic: a record produced
	// at instant t leaves it at t+Delay (or at its due instant, if that is
	// earlier). At least a millisecond.
	Delay time.Duration
	// Topic is the bucket topic's name. It must exist before the
	// republisher starts and hold nothing but ontime's records.
	Topic string
}

// Ladder is the set of bucket topics, ordered by delay. A record with a
// remaining delay r goes to the largest bucket whose Delay is at most r;
// each time it leaves a bucket the republisher routes what remains the same
// way, so a record steps down the ladder, and the last remainder (less
// than the smallest Delay) is held in the republisher's memory and
// produced at the exact due instant. Because every bucket topic has one
// fixed delay, the records that belong in it (their remaining delay was at
// least its Delay) leave it in offset order, and the republisher waits
// only for a partition's head; a record in a bucket larger than its
// remaining delay (see [Ladder.RouteUp]) is moved on as soon as it is read.
//
// A Ladder is immutable and safe for concurrent use.
type Ladder struct {
	buckets []Bucket
	byTopic map[string]int
}

// RecommendedLadder is the ladder the documentation recommends, with topic
// names built from prefix: 1s, 5s, 15s, 1m, 5m, 15m, 1h, 6h and 24h. Each
// rung is at most 6 times the one below it, so a record makes at most
// five hops on a rung before it steps down, and the smallest rung (1 s)
// bounds what the republisher holds in memory. For example, with prefix
// "ontime.delay." the 5 m bucket is "ontime.delay.5m".
func RecommendedLadder(prefix string) *Ladder {
	delays := []time.Duration{
		time.Second, 5 * time.Second, 15 * time.Second,
		time.Minute, 5 * time.Minute, 15 * time.Minute,
		time.Hour, 6 * time.Hour, 24 * time.Hour,
	}
	bs := make([]Bucket, len(delays))
	for i, d := range delays {
		bs[i] = Bucket{Delay: d, Topic: prefix + shortDuration(d)}
	}
	l, err := NewLadder(bs...)
	if err != nil {
		panic(err) // the delays above are valid; only a bad prefix can fail
	}
	return l
}

// NewLadder checks buckets and returns them as a Ladder. The buckets must
// be given in increasing order of Delay, each Delay at least a millisecond
// and used once, each Topic a valid Kafka topic name used once. Errors wrap
// [ErrInvalid].
func NewLadder(buckets ...Bucket) (*Ladder, error) {
	if len(buckets) == 0 {
		return nil, fmt.Errorf("%w: a ladder needs at least one bucket", ErrInvalid)
	}
	l := &Ladder{buckets: make([]Bucket, len(buckets)), byTopic: make(map[string]int, len(buckets))}
	for i, b := range buckets {
		if b.Delay < time.Millisecond {
			return nil, fmt.Errorf("%w: bucket %q: delay %v must be at least 1ms", ErrInvalid, b.Topic, b.Delay)
		}
		if i > 0 {
			prev := buckets[i-1]
			if b.Delay == prev.Delay {
				return nil, fmt.Errorf("%w: buckets %q and %q have the same delay %v", ErrInvalid, prev.Topic, b.Topic, b.Delay)
			}
			if b.Delay < prev.Delay {
				return nil, fmt.Errorf("%w: buckets are not in increasing order of delay: %v (%q) comes after %v (%q)",
					ErrInvalid, b.Delay, b.Topic, prev.Delay, prev.Topic)
			}
		}
		if err := ValidTopic(b.Topic); err != nil {
			return nil, fmt.Errorf("bucket %v: %w", b.Delay, err)
		}
		if j, dup := l.byTopic[b.Topic]; dup {
			return nil, fmt.Errorf("%w: topic %q is used by two buckets (%v and %v)", ErrInvalid, b.Topic, buckets[j].Delay, b.Delay)
		}
		l.byTopic[b.Topic] = i
		l.buckets[i] = b
	}
	return l, nil
}

// Buckets returns a copy of the ladder's buckets, smallest delay first.
func (l *Ladder) Buckets() []Bucket { return append([]Bucket(nil), l.buckets...) }

// Topics returns the bucket topics, smallest delay first.
func (l *Ladder) Topics() []string {
	ts := make([]string, len(l.buckets))
	for i, b := range l.buckets {
		ts[i] = b.Topic
	}
	return ts
}

// Smallest is the smallest bucket delay: the longest a record is held in
// the republisher's memory before its due instant.
func (l *Ladder) Smallest() time.Duration { return l.buckets[0].Delay }

// Bucket returns the bucket of topic, if topic is one of the ladder's.
func (l *Ladder) Bucket(topic string) (Bucket, bool) {
	i, ok := l.byTopic[topic]
	if !ok {
		return Bucket{}, false
	}
	return l.buckets[i], true
}

// index returns the position of topic in the ladder, or -1.
func (l *Ladder) index(topic string) int {
	if i, ok := l.byTopic[topic]; ok {
		return i
	}
	return -1
}

// Route returns the bucket a record with the remaining delay rem goes to:
// the largest bucket whose Delay is at most rem. ok is false when rem is
// shorter than the smallest bucket; the producer then uses the smallest
// bucket (the republisher reads it at once and holds its records in memory
// until they are due) and the republisher holds the record itself.
func (l *Ladder) Route(rem time.Duration) (b Bucket, ok bool) {
	if rem < l.buckets[0].Delay {
		return l.buckets[0], false
	}
	// Ladders are short (a dozen rungs): a linear scan from the top is
	// as fast as a binary search.
	for i := len(l.buckets) - 1; i >= 0; i-- {
		if l.buckets[i].Delay <= rem {
			return l.buckets[i], true
		}
	}
	return l.buckets[0], false // unreachable
}

// RouteUp returns the bucket a producer that rounds up chooses for the
// remaining delay rem: the smallest bucket whose Delay is at least rem (the
// largest bucket when rem exceeds every Delay). It is the reference
// design's rule. The republisher takes such a record at once when it reads
// it, whatever waits ahead of it, and moves it on by its remaining delay, so
// rounding up costs a hop, never lateness.
func (l *Ladder) RouteUp(rem time.Duration) Bucket {
	for _, b := range l.buckets {
		if b.Delay >= rem {
			return b
		}
	}
	return l.buckets[len(l.buckets)-1]
}

// String lists the ladder as "1s=topic, 5s=topic, ...".
func (l *Ladder) String() string {
	parts := make([]string, len(l.buckets))
	for i, b := range l.buckets {
		parts[i] = shortDuration(b.Delay) + "=" + b.Topic
	}
	return strings.Join(parts, ", ")
}

// shortDuration prints whole hours, minutes and seconds as "6h", "15m",
// "5s", and anything else as time.Duration does.
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
