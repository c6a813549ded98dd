package envelope

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// DecodeBinary decodes a BinaryMessageFormatV1 envelope and nothing else.
//
// It reads the header count at headers_start and the body from data_start,
// as the two offset fields say, rather than assuming the layout Encode
// writes. The header block must start after the fixed 18-byte prefix and end
// at or before data_start; bytes between its end and data_start are ignored.
//
// Header lengths are read as byte counts first. If that reading fails, does
// not end exactly at data_start, or yields a key or value that is not valid
// UTF-8, the block is read again with each length as a count of UTF-8 code
// points, which is what the Python writer stores (see the package
// documentation). That second reading is used only if it is consistent:
// every key and value valid UTF-8 and the last one ending exactly at
// data_start. Otherwise the byte reading stands: its headers if it
// succeeded (a gap before data_start is ignored and header bytes that are not
// UTF-8 are kept as they are, so anything [Encode] writes round-trips), or its
// error if it failed.
//
// Every problem (short buffer, wrong magic, unsupported version, an offset or
// length pointing outside the buffer under both readings) is reported as an
// error wrapping [ErrMalformed] that says what is wrong.
//
// The returned Body aliases b; header strings are copies.
func DecodeBinary(b []byte) (*Message, error) {
	n := uint64(len(b))
	if n < fixedLen {
		return nil, malformed("too short: %d bytes, need at least %d", n, fixedLen)
	}
	if string(b[:len(magic)]) != magic {
		return nil, malformed("bad magic % x", b[:len(magic)])
	}
	if v := binary.BigEndian.Uint16(b[8:]); v != formatVersion {
		return nil, malformed("unsupported version %d", v)
	}
	hs := uint64(binary.BigEndian.Uint32(b[10:]))
	ds := uint64(binary.BigEndian.Uint32(b[14:]))
	if hs < fixedLen || hs+2 > n {
		return nil, malformed("header block out of range: headers_start %d in a %d-byte buffer", hs, n)
	}
	if ds > n {
		return nil, malformed("data start out of range: data_start %d in a %d-byte buffer", ds, n)
	}
	if ds < hs+2 {
		return nil, malformed("header block out of range: data_start %d before the end of the header count at %d", ds, hs+2)
	}
	count := int(binary.BigEndian.Uint16(b[hs:]))
	block := b[hs+2 : ds]

	// First pass (once per reading of the lengths): check that all headers
	// fit inside the block and find where they end, so that nothing but the
	// error is allocated for a corrupt envelope and allocations never exceed
	// the buffer's size.
	unit := byteLengths
	end, valid, fault := scanHeaders(block, count, byteLengths)
	if fault.failed() || end != len(block) || !valid {
		// Perhaps written by Python, with code-point counts.
		cpEnd, _, cpFault := scanHeaders(block, count, codePointLengths)
		switch {
		case !cpFault.failed() && cpEnd == len(block):
			unit, end = codePointLengths, cpEnd
		case fault.failed():
			if !cpFault.failed() {
				cpFault = scanFault{kind: endsEarly, at: cpEnd}
			}
			msg := fault.appendTo(make([]byte, 0, 256), count, hs, ds)
			msg = append(msg, "; read as code-point counts (the Python writer's lengths): "...)
			msg = cpFault.appendTo(msg, count, hs, ds)
			return nil, &malformedError{msg}
		}
	}

	// Second pass: one string holds all keys and values.
	var headers []Header
	if count > 0 {
		headers = make([]Header, count)
		s := string(block[:end])
		p := 0
		field := func() string {
			l := fieldBytes(block[p+2:], int(binary.BigEndian.Uint16(block[p:])), unit)
			v := s[p+2 : p+2+l]
			p += 2 + l
			return v
		}
		for i := range headers {
			headers[i].Key = field()
			headers[i].Value = field()
		}
	}
	return &Message{Headers: headers, Body: b[ds:n:n], Format: FormatBinaryV1}, nil
}

// lengthUnit is what a header length field counts.
type lengthUnit int

const (
	// byteLengths: the length is a byte count (the format; what Encode writes).
	byteLengths lengthUnit = iota
	// codePointLengths: the length is a count of UTF-8 code points (what
	// the Python writer stores).
	codePointLengths
)

// scanHeaders walks count headers through block, reading each length in
// unit, and returns the byte offset where the last one ends and whether
// every key and value is valid UTF-8 (always true when unit is
// codePointLengths and the scan succeeds), or what went wrong. It allocates
// nothing.
func scanHeaders(block []byte, count int, unit lengthUnit) (end int, valid bool, f scanFault) {
	valid = true
	for i := 0; i < count; i++ {
		for _, field := range [2]string{"key", "value"} {
			if len(block)-end < 2 {
				return 0, false, scanFault{kind: lengthPastEnd, header: i, field: field}
			}
			l := int(binary.BigEndian.Uint16(block[end:]))
			end += 2
			if unit == byteLengths {
				if len(block)-end < l {
					return 0, false, scanFault{kind: bytesPastEnd, header: i, field: field, n: l}
				}
				valid = valid && utf8.Valid(block[end:end+l])
				end += l
				continue
			}
			start := end
			for k := 0; k < l; k++ {
				if end == len(block) {
					return 0, false, scanFault{kind: codePointsPastEnd, header: i, field: field, n: l}
				}
				r, size := utf8.DecodeRune(block[end:])
				if r == utf8.RuneError && size == 1 {
					return 0, false, scanFault{kind: notUTF8, header: i, field: field, at: end - start}
				}
				end += size
			}
		}
	}
	return end, valid, scanFault{}
}

// faultKind is what scanHeaders found wrong.
type faultKind int

const (
	noFault faultKind = iota
	lengthPastEnd
	bytesPastEnd
	codePointsPastEnd
	notUTF8
	endsEarly // the headers end before data_start (set by the caller)
)

// scanFault describes why a reading of the header block failed, without
// allocating.
type scanFault struct {
	kind   faultKind
	header int    // index of the header
	field  string // "key" or "value"
	n      int    // the length read
	at     int    // notUTF8: offset in the field; endsEarly: offset in the block
}

func (f scanFault) failed() bool { return f.kind != noFault }

// appendTo appends a description of f to b. count is the header count, hs
// and ds are headers_start and data_start.
func (f scanFault) appendTo(b []byte, count int, hs, ds uint64) []byte {
	if f.kind == endsEarly {
		b = append(b, "headers end at byte "...)
		b = strconv.AppendUint(b, hs+2+uint64(f.at), 10)
		b = append(b, ", before data_start "...)
		return strconv.AppendUint(b, ds, 10)
	}
	b = append(b, "header "...)
	b = strconv.AppendInt(b, int64(f.header), 10)
	b = append(b, " of "...)
	b = strconv.AppendInt(b, int64(count), 10)
	b = append(b, ": "...)
	b = append(b, f.field...)
	switch f.kind {
	case lengthPastEnd:
		b = append(b, " length"...)
	case bytesPastEnd, codePointsPastEnd:
		b = append(b, " of "...)
		b = strconv.AppendInt(b, int64(f.n), 10)
		if f.kind == bytesPastEnd {
			b = append(b, " bytes"...)
		} else {
			b = append(b, " code points"...)
		}
	case notUTF8:
		b = append(b, " is not valid UTF-8 at byte "...)
		b = strconv.AppendInt(b, int64(f.at), 10)
		return append(b, " of it"...)
	}
	b = append(b, " runs past the header block (ends at data_start "...)
	b = strconv.AppendUint(b, ds, 10)
	return append(b, ')')
}

// malformedError describes a malformed envelope with a message built without
// fmt (the header-scan path keeps its allocations small); it wraps
// [ErrMalformed].
type malformedError struct{ msg []byte }

func (e *malformedError) Error() string { return ErrMalformed.Error() + ": " + string(e.msg) }

func (e *malformedError) Unwrap() error { return ErrMalformed }

// fieldBytes returns the byte length of a field of l units at the start of
// b, which scanHeaders has checked.
func fieldBytes(b []byte, l int, unit lengthUnit) int {
	if unit == byteLengths {
		return l
	}
	p := 0
	for k := 0; k < l; k++ {
		_, size := utf8.DecodeRune(b[p:])
		p += size
	}
	return p
}

// Decode is the lenient reader for stored payloads. It tries, in the order
// the Python reader does:
//
//  1. legacy JSON {"b": "<hex body>", "ct": <content type or null>}: the input
//     starts with '{', is a JSON object, "b" is a string of valid hex (either
//     case, no spaces) and "ct" is a string, null or absent. Body is the
//     decoded hex; a non-null "ct" becomes a content-type header (even if
//     empty). Anything else falls through to the next rule.
//  2. BinaryMessageFormatV1, if the input starts with its magic. A buffer
//     that starts with the magic but is malformed is an error wrapping
//     [ErrMalformed]; it is not treated as a raw body.
//  3. older JSON {"data": "<text>", "headers": {...}}: the input starts with
//     '{', is a JSON object and "data" is a string. Body is the UTF-8 of
//     "data". "headers" may be absent or null; otherwise it must be an object.
//     Its members become headers in their JSON order, a repeated key
//     replacing the earlier value in place. String values are used as they
//     are, null values are skipped and other values are kept as their compact
//     JSON text.
//  4. anything else is the body itself, with no headers and Format
//     [FormatRaw]. Such a message has no correlation id; by convention the
//     timer id stands in for it.
//
// Bodies of binary and raw messages alias b; legacy bodies are copies.
func Decode(b []byte) (*Message, error) {
	if len(b) > 0 && b[0] == '{' {
		// Rules 1 and 3 need a JSON object and rule 2 needs the magic, so
		// for such input the binary rule never applies.
		if m := decodeLegacy(b); m != nil {
			return m, nil
		}
	} else if bytes.HasPrefix(b, []byte(magic)) {
		return DecodeBinary(b)
	}
	return &Message{Body: b[:len(b):len(b)], Format: FormatRaw}, nil
}

// decodeLegacy applies rules 1 and 3 of Decode; nil means neither matched.
func decodeLegacy(b []byte) *Message {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return nil
	}
	if m := decodeLegacyHex(obj); m != nil {
		return m
	}
	return decodeLegacyData(obj)
}

func decodeLegacyHex(obj map[string]json.RawMessage) *Message {
	raw, ok := obj["b"]
	if !ok {
		return nil
	}
	var hexBody string
	if json.Unmarshal(raw, &hexBody) != nil || isNull(raw) {
		return nil
	}
	body, err := hex.DecodeString(hexBody)
	if err != nil {
		return nil
	}
	m := &Message{Body: body, Format: FormatLegacyHex}
	if raw, ok := obj["ct"]; ok && !isNull(raw) {
		var ct string
		if json.Unmarshal(raw, &ct) != nil {
			return nil
		}
		m.Headers = []Header{{HeaderContentType, ct}}
	}
	return m
}

func decodeLegacyData(obj map[string]json.RawMessage) *Message {
	raw, ok := obj["data"]
	if !ok || isNull(raw) {
		return nil
	}
	var data string
	if json.Unmarshal(raw, &data) != nil {
		return nil
	}
	m := &Message{Body: []byte(data), Format: FormatLegacyData}
	if raw, ok := obj["headers"]; ok && !isNull(raw) {
		headers, ok := orderedHeaders(raw)
		if !ok {
			return nil
		}
		m.Headers = headers
	}
	return m
}

// orderedHeaders reads a JSON object's members in document order.
func orderedHeaders(raw json.RawMessage) ([]Header, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var (
		headers []Header
		pos     map[string]int // key -> index, once there are many headers
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, ok := tok.(string)
		if !ok {
			return nil, false
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return nil, false
		}
		if isNull(v) {
			continue
		}
		var value string
		if json.Unmarshal(v, &value) != nil {
			// Not a string: keep the value's JSON text.
			var buf bytes.Buffer
			if json.Compact(&buf, v) != nil {
				return nil, false
			}
			value = buf.String()
		}
		// A repeated key replaces the earlier value in place.
		if pos == nil && len(headers) >= smallHeaders {
			pos = make(map[string]int, 2*len(headers))
			for i, h := range headers {
				pos[h.Key] = i
			}
		}
		i := -1
		if pos != nil {
			if p, ok := pos[key]; ok {
				i = p
			} else {
				pos[key] = len(headers)
			}
		} else {
			for j := range headers {
				if headers[j].Key == key {
					i = j
					break
				}
			}
		}
		if i >= 0 {
			headers[i].Value = value
		} else {
			headers = append(headers, Header{key, value})
		}
	}
	return headers, true
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}
