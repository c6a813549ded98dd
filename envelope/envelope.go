// Package envelope encodes and decodes the message envelope that ontime
// stores for each timer.
//
// The native layout is FastStream's BinaryMessageFormatV1, the format written
// by the Python library faststream-redis-timers, so Go and Python services can
// share topics:
//
//	offset size field
//	0      8    magic 89 42 49 4E 0D 0A 1A 0A
//	8      2    version = 1
//	10     4    headers_start (18 when written)
//	14     4    data_start
//	hs     2    header count (at headers_start)
//	hs+2   ...  repeated {u16 key length, key, u16 value length, value}
//	ds     ...  body, to the end of the buffer
//
// All integers are big-endian and unsigned.
//
// [Encode] and [AppendEncode] write that format. [DecodeBinary] reads only
// that format and rejects anything else with an error wrapping
// [ErrMalformed]. [Decode] is the lenient reader used for stored payloads: it
// also accepts the legacy JSON envelopes {"b": "<hex>", "ct": ...} and
// {"data": "<text>", "headers": {...}}, and treats anything else as a raw body
// without headers.
//
// # Length fields
//
// ontime writes byte lengths in the header length fields. The Python writer
// writes code-point counts instead (its data_start is still the real byte
// offset of the body); the two agree for ASCII keys and values, which is what
// timers use in practice. [DecodeBinary] (and so [Decode]) reads both: it
// reads the lengths as bytes first and, when that reading fails, does not end
// exactly at data_start or yields text that is not valid UTF-8, reads them
// again as code-point counts and keeps that reading if it is consistent (all
// valid UTF-8, ending exactly at data_start). A Python envelope with a
// non-ASCII header therefore decodes to the headers its writer meant; when
// both readings are consistent (possible only for contrived bytes) the byte
// reading wins.
//
// This departs from the Python reader in two ways, both on purpose:
//
//   - A Python envelope with a non-ASCII header is decoded properly. The
//     Python reader cannot read it and hands the whole envelope (magic and
//     header block included) to the handler as a raw body.
//   - A magic-prefixed envelope that reads consistently neither way, and
//     whose byte reading fails, is an error wrapping [ErrMalformed] (the
//     error reports both readings), not a raw body. The bytes claim to be an
//     envelope, so delivering them as a body would hand the handler garbage
//     in place of its payload; ontime's worker dead-letters such a timer with
//     reason "undecodable" instead, keeping the stored bytes whole. (In
//     ontimeredis's compatible layout without CompatDeadLetters the dead
//     letter is deleted and logged; see that package.)
//
// A byte reading that parses but is not consistent is still used when the
// code-point reading fails too: the bytes between the last header and
// data_start are ignored, and header bytes that are not UTF-8 are kept as
// they are (Encode accepts any Go strings, and they round-trip).
//
// Envelopes written by ontime with non-ASCII headers are well formed and
// round-trip through [DecodeBinary]. That the Python reader fails on its own
// non-ASCII envelopes implies that it takes the lengths as byte counts, and
// so reads ontime's; this has not been checked against the library.
//
// # Aliasing
//
// For binary and raw envelopes the decoded [Message.Body] aliases the input
// buffer (its capacity is clipped so appending to it never writes into the
// input). Callers that reuse or modify the input buffer must copy Body first.
// Header keys and values are always copies. Bodies decoded from the legacy
// JSON formats are freshly allocated.
package envelope

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// Well-known header keys and content types.
const (
	// HeaderCorrelationID is the header that carries the correlation id.
	HeaderCorrelationID = "correlation_id"
	// HeaderContentType is the header that carries the body's content type.
	HeaderContentType = "content-type"

	// ContentTypeText marks a UTF-8 text body.
	ContentTypeText = "text/plain"
	// ContentTypeJSON marks a JSON body.
	ContentTypeJSON = "application/json"
)

// ErrMalformed is wrapped by every error that reports an envelope which
// claims to be (or must be) BinaryMessageFormatV1 but cannot be read as one.
// Test for it with errors.Is.
var ErrMalformed = errors.New("envelope: malformed message")

// Header is one envelope header, a key and its value.
type Header struct {
	Key, Value string
}

// Format identifies the layout an envelope was decoded from.
// The zero value means the message was not produced by a decoder.
type Format int

const (
	// FormatBinaryV1 is FastStream's BinaryMessageFormatV1.
	FormatBinaryV1 Format = iota + 1
	// FormatLegacyHex is the legacy JSON envelope {"b": "<hex body>", "ct": <content type or null>}.
	FormatLegacyHex
	// FormatLegacyData is the older JSON envelope {"data": "<text>", "headers": {...}}.
	FormatLegacyData
	// FormatRaw means the input matched no envelope layout and is the body itself.
	FormatRaw
)

// String returns the name of the format, for logs and test output.
func (f Format) String() string {
	switch f {
	case FormatBinaryV1:
		return "binary-v1"
	case FormatLegacyHex:
		return "legacy-hex"
	case FormatLegacyData:
		return "legacy-data"
	case FormatRaw:
		return "raw"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// Message is a decoded envelope.
type Message struct {
	// Headers holds the headers in wire order. A hand-built binary envelope
	// may repeat a key; all occurrences are kept here.
	Headers []Header
	// Body is the payload. See the package documentation for when it
	// aliases the decoded buffer.
	Body []byte
	// Format records the layout the message was decoded from.
	Format Format
}

// Get returns the value of the header key and whether it is present. Keys
// are compared exactly (case-sensitively). If the key occurs more than once,
// the last occurrence wins, as it does for the Python reader, which collects
// headers into a dict.
func (m *Message) Get(key string) (string, bool) {
	for i := len(m.Headers) - 1; i >= 0; i-- {
		if m.Headers[i].Key == key {
			return m.Headers[i].Value, true
		}
	}
	return "", false
}

// CorrelationID returns the "correlation_id" header, or "" if there is none.
// Legacy and raw envelopes carry no correlation id; by convention the timer id
// stands in for it.
func (m *Message) CorrelationID() string {
	v, _ := m.Get(HeaderCorrelationID)
	return v
}

// ContentType returns the "content-type" header, or "" if there is none.
func (m *Message) ContentType() string {
	v, _ := m.Get(HeaderContentType)
	return v
}

// Split separates the well-known headers from the user's, in one pass:
// the correlation id and the content type ("" when absent, as
// CorrelationID and ContentType), and every other header in a map (nil
// when there is none). A key that occurs more than once takes its last
// value, as with Get. It is how ontime hands headers to handlers,
// inspection and the server's watchers alike.
func (m *Message) Split() (correlationID, contentType string, user map[string]string) {
	for _, h := range m.Headers {
		switch h.Key {
		case HeaderCorrelationID:
			correlationID = h.Value
		case HeaderContentType:
			contentType = h.Value
		default:
			if user == nil {
				user = make(map[string]string, len(m.Headers))
			}
			user[h.Key] = h.Value
		}
	}
	return correlationID, contentType, user
}

// BodyKind tells how a message body should be interpreted.
type BodyKind int

const (
	// KindBytes is an opaque byte body.
	KindBytes BodyKind = iota
	// KindText is a UTF-8 text body (content type text/plain).
	KindText
	// KindJSON is a JSON document (content type application/json*).
	KindJSON
)

// String returns the name of the kind, for logs and test output.
func (k BodyKind) String() string {
	switch k {
	case KindBytes:
		return "bytes"
	case KindText:
		return "text"
	case KindJSON:
		return "json"
	}
	return "BodyKind(" + strconv.Itoa(int(k)) + ")"
}

// BodyKind classifies the body the way the Python reader does:
//
//   - content type text/plain (parameters such as "; charset=utf-8" allowed) → KindText;
//   - content type starting with application/json → KindJSON;
//   - any other content type, including a present but empty one → KindBytes;
//   - no content-type header → KindJSON if the body is valid JSON, else KindBytes.
//
// Content types are compared case-insensitively, ignoring surrounding spaces.
func (m *Message) BodyKind() BodyKind {
	ct, ok := m.Get(HeaderContentType)
	if !ok {
		if json.Valid(m.Body) {
			return KindJSON
		}
		return KindBytes
	}
	ct = strings.TrimSpace(ct)
	media := ct
	if i := strings.IndexByte(media, ';'); i >= 0 {
		media = strings.TrimSpace(media[:i])
	}
	switch {
	case strings.EqualFold(media, ContentTypeText):
		return KindText
	case len(ct) >= len(ContentTypeJSON) && strings.EqualFold(ct[:len(ContentTypeJSON)], ContentTypeJSON):
		return KindJSON
	}
	return KindBytes
}
