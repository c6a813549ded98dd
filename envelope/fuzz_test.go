package envelope

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

func addGoldenSeeds(f *testing.F) {
	for _, g := range goldenVectors(f) {
		f.Add(g.wire)
	}
	for _, s := range []string{
		`{"b": "2268656c6c6f22", "ct": "application/json"}`,
		`{"data": "hi", "headers": {"content-type": "text/plain"}}`,
		`{"id": 1}`,
		`{"b": "zz", "data": "x", "headers": {"a": 1, "a": null, "b": [true]}}`,
		"",
		magic,
	} {
		f.Add([]byte(s))
	}
	f.Add(buildEnvelope(30, []Header{{"k", "v"}, {"k", ""}}, 5, []byte("body")))
	for _, g := range pyGoldens(f) {
		f.Add(g.wire)
	}
	f.Add(buildEnvelope(18, []Header{{"éé", "\x00\x01A"}}, 0, nil))
	f.Add(buildEnvelope(18, []Header{{"k", "Zoë"}}, 3, nil))
}

func FuzzDecode(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		bm, berr := DecodeBinary(b)
		m, err := Decode(b)
		if !bytes.Equal(in, b) {
			t.Fatal("decoding modified the input")
		}
		if berr != nil {
			if !errors.Is(berr, ErrMalformed) || bm != nil {
				t.Fatalf("DecodeBinary: %v, %v", bm, berr)
			}
		} else {
			if bm.Format != FormatBinaryV1 {
				t.Fatalf("DecodeBinary format %v", bm.Format)
			}
			n := len(bm.Body)
			for _, h := range bm.Headers {
				n += 4 + len(h.Key) + len(h.Value)
			}
			if n+prefixLen > len(b) {
				t.Fatalf("decoded %d bytes of content from %d bytes", n, len(b))
			}
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) || !bytes.HasPrefix(b, []byte(magic)) {
				t.Fatalf("Decode failed on input without the magic: %v", err)
			}
			if berr == nil {
				t.Fatal("Decode failed where DecodeBinary succeeded")
			}
			return
		}
		if berr == nil {
			checkReading(t, b, bm)
		}
		if berr == nil && !reflect.DeepEqual(m, bm) {
			t.Fatalf("Decode %+v differs from DecodeBinary %+v", m, bm)
		}
		if m.Format == FormatRaw && (!bytes.Equal(m.Body, b) || m.Headers != nil) {
			t.Fatalf("raw message %+v", m)
		}
		_ = m.BodyKind()
		_ = m.CorrelationID()
		_ = m.ContentType()
	})
}

// fuzzHeaders turns fuzz bytes into headers: each is a key-length byte, key,
// value-length byte, value. Lengths are taken modulo 16 so that keys repeat
// often; key-length bytes 0xff and 0xfe stand for correlation_id and
// content-type.
func fuzzHeaders(b []byte) []Header {
	var hs []Header
	take := func() string {
		if len(b) == 0 {
			return ""
		}
		n := min(int(b[0]%16), len(b)-1)
		s := string(b[1 : 1+n])
		b = b[1+n:]
		return s
	}
	for len(b) > 0 {
		var key string
		switch b[0] {
		case 0xff:
			key, b = HeaderCorrelationID, b[1:]
		case 0xfe:
			key, b = HeaderContentType, b[1:]
		default:
			key = take()
		}
		hs = append(hs, Header{key, take()})
	}
	return hs
}

func FuzzRoundTrip(f *testing.F) {
	for _, g := range goldenVectors(f) {
		var hb []byte
		for _, h := range g.headers {
			hb = append(hb, byte(len(h.Key)))
			hb = append(hb, h.Key...)
			hb = append(hb, byte(len(h.Value)))
			hb = append(hb, h.Value...)
		}
		f.Add(g.corr, g.ct, hb, g.body)
	}
	f.Add("id", "", []byte("\x01a\x011\xfe\x04x/yz\x01a\x012\xff\x00"), []byte("ü"))
	f.Add("", "text/plain", []byte("\x00\x00\x00\x00"), []byte{})
	f.Add("é", "ç", []byte("\x02ñ\x03€"), []byte("\x89BIN\r\n\x1a\n"))

	f.Fuzz(func(t *testing.T, corr, ct string, hb, body []byte) {
		hs := fuzzHeaders(hb)
		enc, err := Encode(corr, ct, hs, body)
		if err != nil {
			if len(corr) <= maxField && len(ct) <= maxField {
				t.Fatalf("Encode rejected valid input: %v", err)
			}
			return
		}
		app, err := AppendEncode([]byte("pre"), corr, ct, hs, body)
		if err != nil || !bytes.Equal(app, append([]byte("pre"), enc...)) {
			t.Fatalf("AppendEncode differs from Encode: %v", err)
		}
		m, err := DecodeBinary(enc)
		if err != nil {
			t.Fatalf("DecodeBinary of Encode output: %v\n% x", err, enc)
		}
		want := referenceHeaders(corr, ct, hs)
		if !reflect.DeepEqual(m.Headers, want) {
			t.Fatalf("headers\n got %q\nwant %q", m.Headers, want)
		}
		if !bytes.Equal(m.Body, body) {
			t.Fatalf("body %q, want %q", m.Body, body)
		}
		if m.CorrelationID() != want[0].Value {
			t.Fatalf("correlation id %q", m.CorrelationID())
		}
		dm, err := Decode(enc)
		if err != nil || !reflect.DeepEqual(dm, m) {
			t.Fatalf("Decode differs: %v", err)
		}
	})
}

// checkReading checks which reading of the header lengths DecodeBinary used
// for b: the byte reading when it is consistent; otherwise the code-point
// reading when that is consistent; otherwise the byte reading.
func checkReading(t *testing.T, b []byte, m *Message) {
	t.Helper()
	byteHeaders := func() []Header {
		var hs []Header
		rest := b[binary.BigEndian.Uint32(b[10:])+2:]
		for range m.Headers {
			var h Header
			for _, f := range []*string{&h.Key, &h.Value} {
				l := int(binary.BigEndian.Uint16(rest))
				*f = string(rest[2 : 2+l])
				rest = rest[2+l:]
			}
			hs = append(hs, h)
		}
		return hs
	}
	hs, ds := binary.BigEndian.Uint32(b[10:]), binary.BigEndian.Uint32(b[14:])
	block, count := b[hs+2:ds], int(binary.BigEndian.Uint16(b[hs:]))
	bEnd, bValid, bErr := scanHeaders(block, count, byteLengths)
	cEnd, _, cErr := scanHeaders(block, count, codePointLengths)
	switch {
	case !bErr.failed() && bValid && bEnd == len(block):
		if !reflect.DeepEqual(m.Headers, byteHeaders()) {
			t.Fatalf("consistent byte reading not used: %q", m.Headers)
		}
	case !cErr.failed() && cEnd == len(block):
		for _, h := range m.Headers {
			if !utf8.ValidString(h.Key) || !utf8.ValidString(h.Value) {
				t.Fatalf("code-point reading gave invalid UTF-8 %q", h)
			}
		}
		n := 0
		for _, h := range m.Headers {
			n += 4 + len(h.Key) + len(h.Value)
		}
		if n != len(block) {
			t.Fatalf("code-point reading covers %d bytes of a %d-byte block", n, len(block))
		}
	case bErr.failed():
		t.Fatalf("decoded %q although neither reading is consistent and the byte reading fails: %+v", m.Headers, bErr)
	default:
		if !reflect.DeepEqual(m.Headers, byteHeaders()) {
			t.Fatalf("byte reading not kept: %q", m.Headers)
		}
	}
}

// FuzzPythonLengths: whatever the headers, an envelope laid out as the
// Python writer does (code-point counts) decodes to them, unless its byte
// reading is consistent too, in which case that reading wins.
func FuzzPythonLengths(f *testing.F) {
	for _, g := range pyGoldens(f) {
		var hb []byte
		for _, h := range g.user {
			hb = append(hb, byte(len(h.Key)))
			hb = append(hb, h.Key...)
			hb = append(hb, byte(len(h.Value)))
			hb = append(hb, h.Value...)
		}
		f.Add(g.corr, g.ct, hb, g.body)
	}
	f.Add("éé", "", []byte("\x01x\x03A\x00\x02"), []byte("ü"))
	f.Fuzz(func(t *testing.T, corr, ct string, hb, body []byte) {
		hs := fuzzHeaders(hb)
		py, ok := pyEncode(corr, ct, hs, body)
		if !ok {
			return
		}
		m, err := DecodeBinary(py)
		if err != nil {
			t.Fatalf("Python-style envelope not decoded: %v\n% x", err, py)
		}
		if !bytes.Equal(m.Body, body) {
			t.Fatalf("body %q, want %q", m.Body, body)
		}
		checkReading(t, py, m)
		want := referenceHeaders(corr, ct, hs)
		if !reflect.DeepEqual(m.Headers, want) {
			// Only a consistent byte reading may win over the intended
			// one (checkReading confirmed that it was used).
			ds := binary.BigEndian.Uint32(py[14:])
			end, valid, err := scanHeaders(py[prefixLen:ds], len(want), byteLengths)
			if err.failed() || !valid || end != int(ds)-prefixLen {
				t.Fatalf("headers\n got %q\nwant %q", m.Headers, want)
			}
		}
		dm, err := Decode(py)
		if err != nil || !reflect.DeepEqual(dm, m) {
			t.Fatalf("Decode differs: %v", err)
		}
	})
}
