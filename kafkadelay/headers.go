package kafkadelay

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The headers ontime adds to a delayed record. The user's key, value and
// headers are never changed; these follow the user's headers, on the
// bucket records and on the record delivered to the destination (so a
// consumer can tell how late it is and drop duplicates by id).
const (
	// HeaderDue is the due instant, in milliseconds since the Unix epoch,
	// as a decimal string. The destination never sees the record before
	// this instant (by the republisher's clock).
	HeaderDue = "ontime-due-ms"
	// HeaderDestination is the topic the record is delivered to.
	HeaderDestination = "ontime-destination"
	// HeaderID is the delivery id, unique per Publish: a record delivered
	// twice carries the same id both times.
	HeaderID = "ontime-id"
	// HeaderTimestamp is the timestamp of the record as the user published
	// it, in milliseconds since the Unix epoch. Bucket and destination
	// records carry the instant they were produced as their own timestamp.
	HeaderTimestamp = "ontime-timestamp-ms"

	// HeaderDeadReason is added to a record sent to the dead-letter
	// topic: why it could not be delivered.
	HeaderDeadReason = "ontime-dead-reason"
	// HeaderDeadSource is added to a dead-lettered record: the bucket
	// record it was read from, as "topic/partition/offset".
	HeaderDeadSource = "ontime-dead-source"
)

// reserved reports whether a header name is one of ontime's.
func reserved(key string) bool {
	switch key {
	case HeaderDue, HeaderDestination, HeaderID, HeaderTimestamp, HeaderDeadReason, HeaderDeadSource:
		return true
	}
	return false
}

// ErrInvalid is wrapped by every error about a bad argument: a bad ladder,
// topic name, due instant or configuration value.
var ErrInvalid = errors.New("kafkadelay: invalid")

// The supported range of due instants (and of timestamps in headers):
// the years 1970 to 9999, in milliseconds since the Unix epoch.
const (
	minMillis int64 = 0
	maxMillis int64 = 253402300799999 // 9999-12-31T23:59:59.999Z
)

// MaxDue is the latest due instant a record can have.
var MaxDue = time.UnixMilli(maxMillis).UTC()

// Meta is what ontime's headers say about a bucket record.
type Meta struct {
	// Due is the due instant (millisecond precision).
	Due time.Time
	// Destination is the topic the record is delivered to.
	Destination string
	// ID is the delivery id.
	ID string
	// Timestamp is the user's original record timestamp; zero if the
	// header was absent.
	Timestamp time.Time
}

// dueMillis returns the due instant in milliseconds.
func (m *Meta) dueMillis() int64 { return m.Due.UnixMilli() }

// ParseMeta reads ontime's headers of a bucket record. It fails, naming
// the header, when the due instant, destination or id is missing, appears
// twice, or is malformed (a due instant that is not a decimal number of
// milliseconds between 1970 and 9999, a destination that is not a valid
// Kafka topic name). The timestamp header is optional. Errors wrap
// [ErrInvalid].
func ParseMeta(headers []kgo.RecordHeader) (Meta, error) {
	var m Meta
	err := parseMeta(&m, headers, nil)
	return m, err
}

// parseMeta is ParseMeta into m (a zero Meta); intern, when not nil,
// returns the string of a destination's bytes and ValidTopic's verdict on
// it (the republisher keeps one copy of each name and its verdict rather
// than allocating and checking one per record).
func parseMeta(m *Meta, headers []kgo.RecordHeader, intern func([]byte) (string, error)) error {
	var (
		due, dest, id, ts         []byte
		seenDue, seenDest, seenID bool
		seenTS                    bool
	)
	for _, h := range headers {
		var seen *bool
		var into *[]byte
		switch h.Key {
		case HeaderDue:
			seen, into = &seenDue, &due
		case HeaderDestination:
			seen, into = &seenDest, &dest
		case HeaderID:
			seen, into = &seenID, &id
		case HeaderTimestamp:
			seen, into = &seenTS, &ts
		default:
			continue
		}
		if *seen {
			return fmt.Errorf("%w: header %s appears twice", ErrInvalid, h.Key)
		}
		*seen = true
		*into = h.Value
	}
	switch {
	case !seenDue:
		return fmt.Errorf("%w: header %s is missing", ErrInvalid, HeaderDue)
	case !seenDest:
		return fmt.Errorf("%w: header %s is missing", ErrInvalid, HeaderDestination)
	case !seenID:
		return fmt.Errorf("%w: header %s is missing", ErrInvalid, HeaderID)
	}
	ms, err := parseMillisBytes(due)
	if err != nil {
		return fmt.Errorf("%w: header %s: %v", ErrInvalid, HeaderDue, err)
	}
	m.Due = time.UnixMilli(ms)
	var invalid error
	if intern != nil {
		m.Destination, invalid = intern(dest)
	} else {
		m.Destination = string(dest)
		invalid = ValidTopic(m.Destination)
	}
	if invalid != nil {
		return fmt.Errorf("header %s: %w", HeaderDestination, invalid)
	}
	if len(id) == 0 || len(id) > 255 {
		return fmt.Errorf("%w: header %s: %d bytes (want 1 to 255)", ErrInvalid, HeaderID, len(id))
	}
	m.ID = string(id)
	if seenTS {
		ms, err := parseMillisBytes(ts)
		if err != nil {
			return fmt.Errorf("%w: header %s: %v", ErrInvalid, HeaderTimestamp, err)
		}
		m.Timestamp = time.UnixMilli(ms)
	}
	return nil
}

// parseMillisBytes is parseMillis without converting b to a string
// unless it is malformed.
func parseMillisBytes(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 15 {
		return parseMillis(string(b))
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return parseMillis(string(b))
		}
		n = n*10 + int64(c-'0')
	}
	if n < minMillis || n > maxMillis {
		return parseMillis(string(b))
	}
	return n, nil
}

// parseMillis reads a decimal count of milliseconds in [minMillis,
// maxMillis]: digits only, no sign, no spaces, at most 15 digits.
func parseMillis(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	if len(s) > 15 {
		return 0, fmt.Errorf("%.20q is out of range (years 1970 to 9999)", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a decimal number of milliseconds", s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %v", s, err)
	}
	if n < minMillis || n > maxMillis {
		return 0, fmt.Errorf("%q is out of range (years 1970 to 9999)", s)
	}
	return n, nil
}

// ValidTopic checks a Kafka topic name: 1 to 249 characters of
// [a-zA-Z0-9._-], and not "." or "..". The error wraps [ErrInvalid].
func ValidTopic(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty topic name", ErrInvalid)
	}
	if len(name) > 249 {
		return fmt.Errorf("%w: topic name of %d characters (at most 249)", ErrInvalid, len(name))
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: topic name %q", ErrInvalid, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %.60q has character %q (allowed: a-z A-Z 0-9 . _ -)", ErrInvalid, name, c)
		}
	}
	return nil
}

// appendMeta returns the user's headers without any of ontime's, followed
// by ontime's headers for m. The user's headers keep their order.
func appendMeta(user []kgo.RecordHeader, m *Meta) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(user)+4)
	for _, h := range user {
		if !reserved(h.Key) {
			out = append(out, h)
		}
	}
	out = append(out,
		kgo.RecordHeader{Key: HeaderDue, Value: strconv.AppendInt(nil, m.dueMillis(), 10)},
		kgo.RecordHeader{Key: HeaderDestination, Value: []byte(m.Destination)},
		kgo.RecordHeader{Key: HeaderID, Value: []byte(m.ID)},
		kgo.RecordHeader{Key: HeaderTimestamp, Value: strconv.AppendInt(nil, m.Timestamp.UnixMilli(), 10)},
	)
	return out
}

// deadHeaders returns a dead-lettered record's headers: the bucket record's
// own (ontime's included, as read) followed by the reason and the source
// (the bucket record's topic, partition and offset).
func deadHeaders(headers []kgo.RecordHeader, topic string, partition int32, offset int64, reason string) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(headers)+2)
	for _, h := range headers {
		if h.Key != HeaderDeadReason && h.Key != HeaderDeadSource {
			out = append(out, h)
		}
	}
	return append(out,
		kgo.RecordHeader{Key: HeaderDeadReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderDeadSource, Value: []byte(fmt.Sprintf("%s/%d/%d", topic, partition, offset))},
	)
}

// ceilMillis rounds t up to the next whole millisecond, so a due instant
// given with a finer precision is never brought forward.
func ceilMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// trimReason keeps a dead-letter reason to one line of reasonable length.
func trimReason(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 500 {
		s = s[:500] + "..."
	}
	return s
}

// DefaultDeadLetterTopic is the dead-letter topic ontime suggests (and
// its TOML configuration uses when it names none).
const DefaultDeadLetterTopic = "ontime.delay.dead-letters"
