package ontimebolt

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// On-disk layout (see the package documentation for the whole picture).
//
//	ontime                      bucket: format marker
//	  format = "ontimebolt/1"
//	topics                      bucket: one nested bucket per topic
//	  <topic>                   bucket; its sequence numbers lease tokens
//	    n = count of timers     8 bytes big-endian
//	    d = count of dead       8 bytes big-endian
//	    t  id -> timer record
//	    q  ts(claimable) id -> ""   claim order: due time, or lease deadline while leased
//	    l  ts(lease deadline) id -> ""   leased timers only (counts live leases)
//	    x  id -> dead record
//	    y  ts(died) id -> ""    dead letters in order of death
var (
	bucketMeta   = []byte("ontime")
	bucketTopics = []byte("topics")
	keyFormat    = []byte("format")
	formatV1     = []byte("ontimebolt/1")

	bucketTimers  = []byte("t")
	bucketQueue   = []byte("q")
	bucketLeases  = []byte("l")
	bucketDead    = []byte("x")
	bucketDeadIdx = []byte("y")
	keyCount      = []byte("n")
	keyDeadCount  = []byte("d")
)

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

// Index keys are 8 bytes of time followed by the id. The time is the int64
// with its sign bit flipped, big-endian, so that byte order is time order
// (also before 1970).
const tsLen = 8

func indexKey(us int64, id string) []byte {
	k := make([]byte, tsLen+len(id))
	binary.BigEndian.PutUint64(k, uint64(us)^(1<<63))
	copy(k[tsLen:], id)
	return k
}

// tsKey is the smallest index key at instant us.
func tsKey(us int64) []byte {
	k := make([]byte, tsLen)
	binary.BigEndian.PutUint64(k, uint64(us)^(1<<63))
	return k
}

// splitKey returns the time and the id of an index key.
func splitKey(k []byte) (us int64, id []byte, ok bool) {
	if len(k) <= tsLen {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(k) ^ (1 << 63)), k[tsLen:], true
}

// Cursors are the last index key of a page, versioned and base64url encoded.
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
