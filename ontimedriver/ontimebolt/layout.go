package ontimebolt

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// On-disk layout, format 2 (see the package documentation for the whole
// picture). Every bucket is store-wide: a topic is a key prefix, not a
// bucket, so a topic without timers and dead letters has nothing in the
// file, and Open reads no per-topic structure.
//
//	ontime                      bucket: format marker
//	  format = "ontimebolt/2"
//	m  topic -> counts          topics that hold a timer or a dead letter
//	t  key(id, topic) -> timer record; its sequence numbers lease tokens
//	u  key(id, topic) -> timer record, far part (see below)
//	r  key(id, topic) -> schedule entry of a recurring timer (recurring.go)
//	q  tp(topic) ts(claimable) id -> ""   the claim index: due time, or lease deadline while leased
//	f  tp(topic) ts(claimable) id -> ""   the claim index, far part (see below)
//	l  tp(topic) ts(lease deadline) id -> ""   leased timers only
//	x  tp(topic) id -> dead record
//	y  tp(topic) ts(died) id -> ""   dead letters in order of death
//
// tp(topic) is the topic's length as a uvarint, then the topic, so that no
// topic's keys are a prefix of another's, whatever the bytes. A timer's
// key puts the id first (its length as a uvarint, the id, then the topic):
// ids made by the library are UUIDv7, time-ordered, so the records written
// and settled at one time are in a few pages whatever the topics, and a
// store with many timers due later writes about as many pages per commit
// as an empty one.
//
// # Near and far
//
// The timers are split in two by the instant they become claimable: a
// timer claimable before the driver's near mark (Driver.near, one to two
// minutes ahead of the clock) has its record in t and its claim index
// entry in q, a later one in u and f, with the same keys. The promoter
// (promote.go) moves timers from u and f to t and q as the mark advances.
// Readers look in both (Get and the fenced calls look a record up in t,
// then u; Claim, List, CountDue and a topic's head merge q and f), so
// where a timer is never matters for what is read, only for what a commit
// writes: the commits of the timers due now touch t and q, which hold the
// next minutes' timers of every topic, a few pages for a hundred topics,
// and not u and f, where a million timers due next year make trees three
// or four pages deep and keep each topic's head in a page of its own.
//
// Format 1 ("ontimebolt/1") kept a bucket per topic, never deleted; Open
// migrates it (migrate.go).
var (
	bucketMeta = []byte("ontime")
	keyFormat  = []byte("format")
	formatV2   = []byte("ontimebolt/2")

	bucketTopicMeta = []byte("m")
	bucketTimers    = []byte("t")
	bucketFarTimers = []byte("u")
	bucketQueue     = []byte("q")
	bucketFuture    = []byte("f")
	bucketLeases    = []byte("l")
	bucketDead      = []byte("x")
	bucketDeadIdx   = []byte("y")
	// bucketSched holds recurring timers' schedule entries (recurring.go);
	// it is not among dataBuckets: a store gets it with its first
	// recurring timer.
	bucketSched = []byte("r")

	dataBuckets = [][]byte{bucketTopicMeta, bucketTimers, bucketFarTimers, bucketQueue, bucketFuture, bucketLeases, bucketDead, bucketDeadIdx}
)

// topicPrefix is tp(topic): the prefix of the topic's keys in q, l, x and
// y.
func topicPrefix(topic string) []byte {
	p := make([]byte, 0, binary.MaxVarintLen64+len(topic))
	p = binary.AppendUvarint(p, uint64(len(topic)))
	return append(p, topic...)
}

// splitTopic splits a key of q, f, l, x or y into its topic and the rest.
func splitTopic(k []byte) (topic, rest []byte, ok bool) { return splitLengthPrefixed(k) }

// splitLengthPrefixed splits k into the part its leading uvarint length
// names and what follows.
func splitLengthPrefixed(k []byte) (head, rest []byte, ok bool) {
	n, w := binary.Uvarint(k)
	if w <= 0 || n > uint64(len(k)-w) {
		return nil, nil, false
	}
	return k[w : w+int(n)], k[w+int(n):], true
}

// timerKey is a timer record's key in t: the id first, then the topic.
func timerKey(topic, id string) []byte {
	k := make([]byte, 0, binary.MaxVarintLen64+len(id)+len(topic))
	k = binary.AppendUvarint(k, uint64(len(id)))
	k = append(k, id...)
	return append(k, topic...)
}

// splitTimerKey returns the id and the topic of a key of t or u.
func splitTimerKey(k []byte) (id, topic []byte, ok bool) { return splitLengthPrefixed(k) }

// prefixEnd returns the smallest key greater than every key that starts
// with p, or nil when there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Times are stored as Unix microseconds. The bounds keep every conversion
// free of overflow (about ±292,000 years).
const (
	maxMicros = math.MaxInt64 / 2
	minMicros = -maxMicros
	maxSecs   = maxMicros / 1_000_000
)

// ceilMicros converts t to Unix microseconds rounding up, so that a due time
// is never earlier than asked for.
func ceilMicros(t time.Time) int64 {
	s, ns := t.Unix(), int64(t.Nanosecond())
	switch {
	case s >= maxSecs:
		return maxMicros
	case s <= -maxSecs:
		return minMicros
	}
	return s*1e6 + (ns+999)/1000
}

// floorMicros converts t to Unix microseconds rounding down; "now" is taken
// this way so that nothing is claimable early.
func floorMicros(t time.Time) int64 {
	s, ns := t.Unix(), int64(t.Nanosecond())
	switch {
	case s >= maxSecs:
		return maxMicros
	case s <= -maxSecs:
		return minMicros
	}
	return s*1e6 + ns/1000
}

// addMicros returns the ceiling of now + d in microseconds, d clamped to >= 0.
func addMicros(now time.Time, d time.Duration) int64 {
	if d < 0 {
		d = 0
	}
	return ceilMicros(now.Add(d))
}

// fromMicros is the inverse of the conversions above.
func fromMicros(us int64) time.Time { return time.UnixMicro(us) }

// Index keys (q, l, y) are the topic's prefix, then 8 bytes of time, then
// the id. The time is the int64 with its sign bit flipped, big-endian, so
// that byte order is time order (also before 1970). Within a topic the
// part after the prefix (time and id) is what cursors hold.
const tsLen = 8

// indexKey is the index key of id at instant us in the topic whose prefix
// is prefix.
func indexKey(prefix []byte, us int64, id string) []byte {
	k := make([]byte, len(prefix)+tsLen+len(id))
	n := copy(k, prefix)
	binary.BigEndian.PutUint64(k[n:], uint64(us)^(1<<63))
	copy(k[n+tsLen:], id)
	return k
}

// tsKey is the smallest index key of the topic at instant us.
func tsKey(prefix []byte, us int64) []byte {
	k := make([]byte, len(prefix)+tsLen)
	n := copy(k, prefix)
	binary.BigEndian.PutUint64(k[n:], uint64(us)^(1<<63))
	return k
}

// splitKey returns the time and the id of the part of an index key after
// the topic's prefix.
func splitKey(k []byte) (us int64, id []byte, ok bool) {
	if len(k) <= tsLen {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(k) ^ (1 << 63)), k[tsLen:], true
}

// Cursors are the last index key of a page without the topic's prefix
// (time and id), versioned and base64url encoded. Format 1 wrote the same,
// so a cursor handed out before an upgrade goes on working.
const cursorVersion = 1

func encodeCursor(key []byte) string {
	b := make([]byte, 1+len(key))
	b[0] = cursorVersion
	copy(b[1:], key)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) <= 1+tsLen || b[0] != cursorVersion {
		return nil, fmt.Errorf("%w: malformed cursor %q", ontimedriver.ErrInvalid, s)
	}
	return b[1:], nil
}

// Page sizes of List and ListDead.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

func pageLimit(n int) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("%w: negative limit %d", ontimedriver.ErrInvalid, n)
	case n == 0:
		return defaultLimit, nil
	case n > maxLimit:
		return maxLimit, nil
	}
	return n, nil
}

// beforeMicros turns ListOptions.Before into an exclusive upper bound on
// stored instants: stored < bound exactly when the instant is before b.
func beforeMicros(b time.Time) int64 {
	if b.IsZero() {
		return maxMicros + 1
	}
	return ceilMicros(b)
}
