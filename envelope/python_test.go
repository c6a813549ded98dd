package envelope

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// Envelopes as the Python writer lays them out when a header is not ASCII:
// each u16 length holds the code-point count of the key or value while the
// bytes are UTF-8, and data_start is the real byte offset of the body.
// Built by hand from the rules in INTEROP.md (TestPythonGoldenLayout checks
// them field by field).
const (
	// correlation_id "abc", content-type text/plain, x-name "Zoë" (3 code
	// points, 4 bytes: non-ASCII in the last header), body "hello".
	pyLastHex = "89 42 49 4e 0d 0a 1a 0a 00 01 00 00 00 12 00 00 00 51 00 03" +
		" 00 0e 63 6f 72 72 65 6c 61 74 69 6f 6e 5f 69 64 00 03 61 62 63" +
		" 00 0c 63 6f 6e 74 65 6e 74 2d 74 79 70 65 00 0a 74 65 78 74 2f 70 6c 61 69 6e" +
		" 00 06 78 2d 6e 61 6d 65 00 03 5a 6f c3 ab" +
		" 68 65 6c 6c 6f"
	// correlation_id "trace-1", content-type application/json, x-city
	// "Zürich 🚀" (8 code points, 12 bytes: non-ASCII in a middle header),
	// x-tenant "acme", body {"a":1}.
	pyMiddleHex = "89 42 49 4e 0d 0a 1a 0a 00 01 00 00 00 12 00 00 00 73 00 04" +
		" 00 0e 63 6f 72 72 65 6c 61 74 69 6f 6e 5f 69 64 00 07 74 72 61 63 65 2d 31" +
		" 00 0c 63 6f 6e 74 65 6e 74 2d 74 79 70 65 00 10 61 70 70 6c 69 63 61 74 69 6f 6e 2f 6a 73 6f 6e" +
		" 00 06 78 2d 63 69 74 79 00 08 5a c3 bc 72 69 63 68 20 f0 9f 9a 80" +
		" 00 08 78 2d 74 65 6e 61 6e 74 00 04 61 63 6d 65" +
		" 7b 22 61 22 3a 31 7d"
	// correlation_id "id-é" (4 code points, 5 bytes), a Cyrillic key and
	// value "ключ": "значение", no content type, raw body 00 ff.
	pyKeyHex = "89 42 49 4e 0d 0a 1a 0a 00 01 00 00 00 12 00 00 00 47 00 02" +
		" 00 0e 63 6f 72 72 65 6c 61 74 69 6f 6e 5f 69 64 00 04 69 64 2d c3 a9" +
		" 00 04 d0 ba d0 bb d1 8e d1 87 00 08 d0 b7 d0 bd d0 b0 d1 87 d0 b5 d0 bd d0 b8 d0 b5" +
		" 00 ff"
)

type pyGolden struct {
	name     string
	wire     []byte
	corr, ct string
	user     []Header
	body     []byte
	headers  []Header // decoded, in wire order
	kind     BodyKind
}

func pyGoldens(t testing.TB) []pyGolden {
	return []pyGolden{
		{
			name: "last header", wire: unhex(t, pyLastHex),
			corr: "abc", ct: ContentTypeText, user: []Header{{"x-name", "Zoë"}}, body: []byte("hello"),
			headers: []Header{{"correlation_id", "abc"}, {"content-type", "text/plain"}, {"x-name", "Zoë"}},
			kind:    KindText,
		},
		{
			name: "middle header", wire: unhex(t, pyMiddleHex),
			corr: "trace-1", ct: ContentTypeJSON, user: []Header{{"x-city", "Zürich 🚀"}, {"x-tenant", "acme"}}, body: []byte(`{"a":1}`),
			headers: []Header{{"correlation_id", "trace-1"}, {"content-type", "application/json"}, {"x-city", "Zürich 🚀"}, {"x-tenant", "acme"}},
			kind:    KindJSON,
		},
		{
			name: "key and correlation id", wire: unhex(t, pyKeyHex),
			corr: "id-é", user: []Header{{"ключ", "значение"}}, body: []byte{0x00, 0xff},
			headers: []Header{{"correlation_id", "id-é"}, {"ключ", "значение"}},
			kind:    KindBytes,
		},
	}
}

// pyEncode lays an envelope out the way the Python writer does: Encode's
// header order, code-point counts in the length fields, data_start the real
// byte offset. It reports false if a key or value is not valid UTF-8 or has
// more than 65535 code points (the Python writer cannot produce those).
func pyEncode(corr, ct string, user []Header, body []byte) ([]byte, bool) {
	hs := referenceHeaders(corr, ct, user)
	if len(hs) > maxField {
		return nil, false
	}
	var block []byte
	for _, h := range hs {
		for _, s := range [2]string{h.Key, h.Value} {
			n := utf8.RuneCountInString(s)
			if !utf8.ValidString(s) || n > maxField {
				return nil, false
			}
			block = binary.BigEndian.AppendUint16(block, uint16(n))
			block = append(block, s...)
		}
	}
	b := []byte(magic)
	b = binary.BigEndian.AppendUint16(b, formatVersion)
	b = binary.BigEndian.AppendUint32(b, fixedLen)
	b = binary.BigEndian.AppendUint32(b, uint32(prefixLen+len(block)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(hs)))
	b = append(b, block...)
	return append(b, body...), true
}

// TestPythonGoldenLayout: the hand-built vectors are what the Python layout
// rules give (pyEncode), and differ from ontime's byte-length encoding only
// in the length fields of non-ASCII text.
func TestPythonGoldenLayout(t *testing.T) {
	for _, g := range pyGoldens(t) {
		t.Run(g.name, func(t *testing.T) {
			py, ok := pyEncode(g.corr, g.ct, g.user, g.body)
			if !ok || !bytes.Equal(py, g.wire) {
				t.Fatalf("pyEncode differs from the vector\n got % x\nwant % x", py, g.wire)
			}
			own, err := Encode(g.corr, g.ct, g.user, g.body)
			if err != nil {
				t.Fatal(err)
			}
			if len(own) != len(g.wire) || bytes.Equal(own, g.wire) {
				t.Fatalf("Encode gives % x\nwant the same size as the vector and different length fields", own)
			}
			if binary.BigEndian.Uint32(g.wire[14:]) != uint32(len(g.wire)-len(g.body)) {
				t.Fatal("data_start of the vector is not the body's byte offset")
			}
		})
	}
}

// TestDecodePythonCodePointLengths: envelopes whose header lengths are
// code-point counts decode to the headers Python meant, with the body
// from data_start, through both decoders; the envelope with the same content
// and byte lengths (Encode's) decodes to the same message.
func TestDecodePythonCodePointLengths(t *testing.T) {
	for _, g := range pyGoldens(t) {
		t.Run(g.name, func(t *testing.T) {
			own, err := Encode(g.corr, g.ct, g.user, g.body)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range []struct {
				name string
				wire []byte
			}{{"python", g.wire}, {"byte lengths", own}} {
				for _, dec := range []struct {
					name string
					fn   func([]byte) (*Message, error)
				}{{"DecodeBinary", DecodeBinary}, {"Decode", Decode}} {
					m, err := dec.fn(in.wire)
					if err != nil {
						t.Fatalf("%s of %s: %v", dec.name, in.name, err)
					}
					if !reflect.DeepEqual(m.Headers, g.headers) {
						t.Errorf("%s of %s: headers %q, want %q", dec.name, in.name, m.Headers, g.headers)
					}
					if !bytes.Equal(m.Body, g.body) || m.Format != FormatBinaryV1 {
						t.Errorf("%s of %s: body %q format %v, want %q binary-v1", dec.name, in.name, m.Body, m.Format, g.body)
					}
					if m.CorrelationID() != g.corr || m.ContentType() != g.ct || m.BodyKind() != g.kind {
						t.Errorf("%s of %s: correlation id %q content type %q kind %v", dec.name, in.name, m.CorrelationID(), m.ContentType(), m.BodyKind())
					}
				}
			}
		})
	}
}

// TestPythonLastHeaderNotCutOff: read with byte lengths alone, the vector
// whose last header is non-ASCII yields the value cut inside a character
// ("Zo\xc3") and stops short of data_start. That reading is rejected for the
// code-point one.
func TestPythonLastHeaderNotCutOff(t *testing.T) {
	b := unhex(t, pyLastHex)
	block := b[prefixLen:binary.BigEndian.Uint32(b[14:])]
	end, valid, fault := scanHeaders(block, 3, byteLengths)
	if fault.failed() || valid || end != len(block)-1 {
		t.Fatalf("byte reading: end %d of %d, valid %v, fault %+v; want a cut-off, invalid reading", end, len(block), valid, fault)
	}
	m, err := DecodeBinary(b)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := m.Get("x-name"); v != "Zoë" {
		t.Fatalf("x-name = %q, want Zoë", v)
	}
	for _, h := range m.Headers {
		if !utf8.ValidString(h.Key) || !utf8.ValidString(h.Value) {
			t.Errorf("header %q is not valid UTF-8", h)
		}
	}
}

// TestDecodePrefersConsistentByteLengths: when both readings are consistent
// the byte reading (the format's own) wins. The block below reads as
// {"éé": "\x00\x01A"} with byte lengths and as {"éé\x00\x03": "A"} with
// code-point counts; both end at data_start with valid UTF-8.
func TestDecodePrefersConsistentByteLengths(t *testing.T) {
	b := buildEnvelope(18, []Header{{"éé", "\x00\x01A"}}, 0, []byte("body"))
	block := b[prefixLen:binary.BigEndian.Uint32(b[14:])]
	if end, _, err := scanHeaders(block, 1, codePointLengths); err.failed() || end != len(block) {
		t.Fatalf("the code-point reading is not consistent (end %d of %d, %+v): the test proves nothing", end, len(block), err)
	}
	m, err := DecodeBinary(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Header{{"éé", "\x00\x01A"}}; !reflect.DeepEqual(m.Headers, want) || string(m.Body) != "body" {
		t.Fatalf("headers %q body %q, want %q body", m.Headers, m.Body, want)
	}
}

// TestDecodeKeepsByteReadingWhenCodePointsFail: a byte reading that parses
// but is not consistent (a gap before data_start, bytes that are not UTF-8)
// still stands when the code-point reading fails: such envelopes decoded
// before and still do.
func TestDecodeKeepsByteReadingWhenCodePointsFail(t *testing.T) {
	for _, c := range []struct {
		name string
		hs   []Header
		gap  int
	}{
		{"gap", []Header{{"k", "Zoë"}}, 3},
		{"not UTF-8", []Header{{"k", "\xff\xfe"}, {"\xc3", "v"}}, 0},
		{"not UTF-8 and a gap", []Header{{"k\x80", "v"}}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := buildEnvelope(18, c.hs, c.gap, []byte("payload"))
			m, err := DecodeBinary(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m.Headers, c.hs) || string(m.Body) != "payload" {
				t.Fatalf("headers %q body %q", m.Headers, m.Body)
			}
		})
	}
}

// TestDecodePythonStyleBroken: a magic-prefixed envelope that reads
// consistently neither way is malformed (the worker dead-letters it as
// undecodable), and the error reports both readings.
func TestDecodePythonStyleBroken(t *testing.T) {
	mid := unhex(t, pyMiddleHex)
	cases := []struct {
		name string
		in   []byte
		want []string
	}{
		{"data_start one byte early", func() []byte {
			b := bytes.Clone(mid)
			binary.BigEndian.PutUint32(b[14:], binary.BigEndian.Uint32(b[14:])-1)
			return b
		}(), []string{"header 3 of 4: key of 61599 bytes runs past", "code-point counts", "header 3 of 4: value of 4 code points runs past"}},
		{"data_start one byte late", func() []byte {
			b := bytes.Clone(mid)
			binary.BigEndian.PutUint32(b[14:], binary.BigEndian.Uint32(b[14:])+1)
			return b
		}(), []string{"header 3 of 4: key of 61599 bytes runs past", "code-point counts", "headers end at byte 115, before data_start 116"}},
		{"count one too many", func() []byte {
			b := bytes.Clone(mid)
			b[19]++
			return b
		}(), []string{"header 3 of 5: key of 61599 bytes runs past", "code-point counts", "header 4 of 5: key length runs past"}},
		{"invalid UTF-8 in a value", func() []byte {
			b := bytes.Clone(mid)
			i := bytes.Index(b, []byte("Z\xc3\xbc")) + 1
			b[i] = 0xff
			return b
		}(), []string{"header 3 of 4: key of 61599 bytes runs past", "code-point counts", "header 2 of 4: value is not valid UTF-8 at byte 1 of it"}},
		{"truncated body and headers", mid[:60], []string{"data start out of range"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, dec := range []func([]byte) (*Message, error){DecodeBinary, Decode} {
				m, err := dec(c.in)
				if !errors.Is(err, ErrMalformed) || m != nil {
					t.Fatalf("got %+v, %v; want ErrMalformed", m, err)
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
			}
		})
	}
}
