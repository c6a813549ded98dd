package server

import (
	"bytes"
	"time"
	"unicode/utf8"

	"github.com/ontime-go/ontime/internal/wire"
)

// The single-timer endpoint's common requests, such as
// {"body":"…","delay":"1h"}, are decoded and answered here without
// reflection; everything else goes through encoding/json, which also words
// every error. FuzzFastTimerJSON checks that what the fast paths accept
// and write is what encoding/json decodes and encodes.

// Fields of wire.TimerIn, as bits of the set of keys seen.
const (
	fID = 1 << iota
	fBody
	fBodyBase64
	fDelay
	fAt
	fHeaders
	fCorrelationID
	fIfAbsent
)

// decodeTimerFast decodes data into in when it is a JSON object in the
// plain form below, and reports false, leaving in to be reset, for anything
// else (the caller then decodes with encoding/json): keys spelled exactly
// as wire.TimerIn's JSON names, each at most once; string values with no
// escape sequence and no control character, in valid UTF-8; body such a
// string; headers an object of such strings with distinct names; if_absent
// true or false; JSON whitespace anywhere between tokens and nothing after
// the object. What it accepts, encoding/json (DisallowUnknownFields, as
// decodeJSON) decodes to the same TimerIn.
func decodeTimerFast(data []byte, in *wire.TimerIn) bool {
	p := fastParser{data: data}
	if !p.byte('{') {
		return false
	}
	seen := 0
	if !p.byte('}') {
		for {
			key, ok := p.str()
			if !ok || !p.byte(':') {
				return false
			}
			var bit int
			switch string(key) {
			case "id":
				bit = fID
			case "body":
				bit = fBody
			case "body_base64":
				bit = fBodyBase64
			case "delay":
				bit = fDelay
			case "at":
				bit = fAt
			case "headers":
				bit = fHeaders
			case "correlation_id":
				bit = fCorrelationID
			case "if_absent":
				bit = fIfAbsent
			default:
				return false
			}
			if seen&bit != 0 {
				return false
			}
			seen |= bit
			switch bit {
			case fBody:
				p.space()
				start := p.i
				if _, ok := p.str(); !ok {
					return false
				}
				in.Body = data[start:p.i]
			case fHeaders:
				if !p.headers(in) {
					return false
				}
			case fIfAbsent:
				p.space()
				switch {
				case bytes.HasPrefix(data[p.i:], []byte("true")):
					in.IfAbsent = true
					p.i += 4
				case bytes.HasPrefix(data[p.i:], []byte("false")):
					p.i += 5
				default:
					return false
				}
			default:
				v, ok := p.str()
				if !ok {
					return false
				}
				s := string(v)
				switch bit {
				case fID:
					in.ID = s
				case fBodyBase64:
					in.BodyBase64 = &s
				case fDelay:
					in.Delay = &s
				case fAt:
					in.At = &s
				case fCorrelationID:
					in.CorrelationID = s
				}
			}
			if p.byte(',') {
				continue
			}
			if p.byte('}') {
				break
			}
			return false
		}
	}
	p.space()
	return p.i == len(data)
}

// fastParser reads the plain JSON of decodeTimerFast.
type fastParser struct {
	data []byte
	i    int
}

// space skips JSON whitespace.
func (p *fastParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte skips whitespace and then c, if c is next.
func (p *fastParser) byte(c byte) bool {
	p.space()
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a plain string (plainJSONString) and returns its contents.
func (p *fastParser) str() ([]byte, bool) {
	p.space()
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		return nil, false
	}
	end := bytes.IndexByte(p.data[p.i+1:], '"')
	if end < 0 {
		return nil, false
	}
	s := p.data[p.i+1 : p.i+1+end]
	if !plainString(s) {
		return nil, false
	}
	p.i += end + 2
	return s, true
}

// headers reads an object of plain strings into in.Headers.
func (p *fastParser) headers(in *wire.TimerIn) bool {
	if !p.byte('{') {
		return false
	}
	h := map[string]string{}
	in.Headers = h
	if p.byte('}') {
		return true
	}
	for {
		k, ok := p.str()
		if !ok || !p.byte(':') {
			return false
		}
		v, ok := p.str()
		if !ok {
			return false
		}
		if _, dup := h[string(k)]; dup {
			return false
		}
		h[string(k)] = string(v)
		if p.byte(',') {
			continue
		}
		return p.byte('}')
	}
}

// plainString reports whether s, the contents of a JSON string, holds no
// escape sequence, no quote, no control character and only valid UTF-8:
// then the string it encodes is s itself.
func plainString(s []byte) bool {
	ascii := true
	for _, c := range s {
		switch {
		case c < 0x20 || c == '"' || c == '\\':
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return ascii || utf8.Valid(s)
}

// plainJSONString returns the string a JSON string token encodes, when
// the token is plain (plainString); ok is false otherwise.
func plainJSONString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || !plainString(raw[1:len(raw)-1]) {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

// appendCreated appends the JSON of wire.Created as encoding/json writes
// it, when its strings need no escaping (safeString) and due is within the
// years 0 to 9999; ok is false otherwise.
func appendCreated(b []byte, id, topic string, due time.Time) ([]byte, bool) {
	if !safeString(id) || !safeString(topic) {
		return b, false
	}
	if y := due.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","topic":"`...)
	b = append(b, topic...)
	b = append(b, `","due_at":"`...)
	b = due.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...), true
}

// safeString reports whether encoding/json writes s as it is between
// quotes: printable ASCII other than the quote, the backslash and the
// characters it escapes for HTML (<, >, &).
func safeString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= utf8.RuneSelf, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
