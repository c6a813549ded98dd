package ontimedriver

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every validation error, so callers (the HTTP API)
// can map them to a 400 with errors.Is.
var ErrInvalid = errors.New("ontime: invalid argument")

// Limits on names. They keep keys readable and bounded.
const (
	MaxTopicLen = 200
	MaxIDLen    = 200
)

// ValidateTopic checks a full topic name: 1–200 bytes of ASCII letters,
// digits and . _ - : / @ + ~ (no spaces, no braces: Redis hash tags use them,
// no '#': shard suffixes use it).
func ValidateTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: topic is empty", ErrInvalid)
	}
	if len(topic) > MaxTopicLen {
		return fmt.Errorf("%w: topic is %d bytes, the limit is %d", ErrInvalid, len(topic), MaxTopicLen)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '-', c == ':', c == '/', c == '@', c == '+', c == '~':
		default:
			return fmt.Errorf("%w: topic %q has character %q at byte %d; allowed are letters, digits and . _ - : / @ + ~", ErrInvalid, topic, c, i)
		}
	}
	return nil
}

// ValidateID checks a timer id: 1–200 bytes of valid UTF-8 without control
// characters.
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: id is empty", ErrInvalid)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("%w: id is %d bytes, the limit is %d", ErrInvalid, len(id), MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: id %q is not valid UTF-8", ErrInvalid, id)
	}
	for i, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("%w: id %q has control character %U at byte %d", ErrInvalid, id, r, i)
		}
	}
	return nil
}

// The supported range of due times: from the Unix epoch to the last
// millisecond of year 9999, UTC. Every driver refuses an absolute due time
// outside it (ValidateDue); relative ones (a delay from the store's clock)
// cannot leave it, since a time.Duration spans at most about 292 years.
var (
	// MinDue is the earliest due time a store accepts: 1970-01-01T00:00:00Z.
	MinDue = time.Unix(0, 0).UTC()
	// MaxDue is the latest due time a store accepts:
	// 9999-12-31T23:59:59.999Z (so that a store that rounds up to the
	// millisecond stays within year 9999).
	MaxDue = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
)

// ValidateDue checks an absolute due time: it must be within
// [MinDue, MaxDue]. The error wraps ErrInvalid and names the value.
func ValidateDue(t time.Time) error {
	if t.Before(MinDue) || t.After(MaxDue) {
		return fmt.Errorf("%w: due time %s is outside the supported range %s to %s",
			ErrInvalid, t.UTC().Format(time.RFC3339Nano), MinDue.Format(time.RFC3339), MaxDue.Format(time.RFC3339Nano))
	}
	return nil
}

// MaxDueBounds is the most bounds one CountDue call takes.
const MaxDueBounds = 1000

// ValidateDueBounds checks the bounds of a CountDue call: 1 to MaxDueBounds
// instants, strictly increasing, each within [MinDue, MaxDue].
func ValidateDueBounds(bounds []time.Time) error {
	if len(bounds) == 0 {
		return fmt.Errorf("%w: no bounds", ErrInvalid)
	}
	if len(bounds) > MaxDueBounds {
		return fmt.Errorf("%w: %d bounds, the limit is %d", ErrInvalid, len(bounds), MaxDueBounds)
	}
	for i, b := range bounds {
		if err := ValidateDue(b); err != nil {
			return fmt.Errorf("bound %d: %w", i, err)
		}
		if i > 0 && !b.After(bounds[i-1]) {
			return fmt.Errorf("%w: bound %d (%s) is not after bound %d (%s)", ErrInvalid, i, b.Format(time.RFC3339Nano), i-1, bounds[i-1].Format(time.RFC3339Nano))
		}
	}
	return nil
}

// ValidatePattern checks a topic pattern: what ValidateTopic allows, plus
// '*' (any run of characters, including none) and '?' (any one
// character). "*" matches every topic.
func ValidatePattern(pattern string) error {
	if pattern == "" {
		return fmt.Errorf("%w: topic pattern is empty", ErrInvalid)
	}
	if len(pattern) > MaxTopicLen {
		return fmt.Errorf("%w: topic pattern is %d bytes, the limit is %d", ErrInvalid, len(pattern), MaxTopicLen)
	}
	lit := make([]byte, 0, len(pattern))
	for i := 0; i < len(pattern); i++ {
		if c := pattern[i]; c != '*' && c != '?' {
			lit = append(lit, c)
		}
	}
	if len(lit) == 0 {
		return nil
	}
	if err := ValidateTopic(string(lit)); err != nil {
		return fmt.Errorf("%w: topic pattern %q: only '*' and '?' may be added to a topic's characters", ErrInvalid, pattern)
	}
	return nil
}

// MatchTopic reports whether topic matches pattern: '*' matches any run
// of characters (including none), '?' any one character, every other
// character itself. Every driver matches patterns this way.
func MatchTopic(pattern, topic string) bool {
	if pattern == "*" { // every topic: a server checks its default on every publish
		return true
	}
	// Iterative glob match with backtracking to the last '*'.
	p, t := 0, 0
	star, mark := -1, 0
	for t < len(topic) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == topic[t]):
			p++
			t++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, t
			p++
		case star >= 0:
			p = star + 1
			mark++
			t = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
