package envelope

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
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
