package ontimedriver

import (
	"errors"
	"fmt"
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
