package envelope

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Golden vectors from INTEROP.md, produced by the Python encoder.
const (
	goldenAHex = "89 42 49 4e 0d 0a 1a 0a 00 01 00 00 00 12 00 00 00 43 00 02 00 0e 63 6f 72 72 65 6c 61 74 69 6f 6e 5f 69 64 00 03 61 62 63 00 0c 63 6f 6e 74 65 6e 74 2d 74 79 70 65 00 0a 74 65 78 74 2f 70 6c 61 69 6e 68 65 6c 6c 6f"
	goldenBHex = "89 42 49 4e 0d 0a 1a 0a 00 01 00 00 00 12 00 00 00 63 00 03 00 0e 63 6f 72 72 65 6c 61 74 69 6f 6e 5f 69 64 00 0d 74 72 61 63 65 2d 61 62 63 2d 31 32 33 00 0c 63 6f 6e 74 65 6e 74 2d 74 79 70 65 00 10 61 70 70 6c 69 63 61 74 69 6f 6e 2f 6a 73 6f 6e 00 08 78 2d 74 65 6e 61 6e 74 00 04 61 63 6d 65 7b 22 6f 72 64 65 72 5f 69 64 22 3a 34 32 2c 22 73 74 61 74 75 73 22 3a 22 64 75 65 22 7d"
	goldenCHex = "89 42 49 4e 0d 0a 1a 0a 00 01 00 00 00 12 00 00 00 28 00 01 00 0e 63 6f 72 72 65 6c 61 74 69 6f 6e 5f 69 64 00 02 74 31 00 ff"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type golden struct {
	name        string
	wire        []byte
	corr, ct    string
	headers     []Header // user headers passed to Encode
	body        []byte
	wantHeaders []Header // decoded, in wire order
	kind        BodyKind
}

func goldenVectors(t testing.TB) []golden {
	c := unhex(t, goldenCHex)
	return []golden{
		{
			name: "A text", wire: unhex(t, goldenAHex),
			corr: "abc", ct: ContentTypeText, body: []byte("hello"),
			wantHeaders: []Header{{"correlation_id", "abc"}, {"content-type", "text/plain"}},
			kind:        KindText,
		},
		{
			name: "B json", wire: unhex(t, goldenBHex),
			corr: "trace-abc-123", ct: ContentTypeJSON, headers: []Header{{"x-tenant", "acme"}},
			body: []byte(`{"order_id":42,"status":"due"}`),
			wantHeaders: []Header{
				{"correlation_id", "trace-abc-123"}, {"content-type", "application/json"}, {"x-tenant", "acme"},
			},
			kind: KindJSON,
		},
		{
			name: "C raw bytes", wire: c,
			corr: "t1", body: []byte{0x00, 0xff},
			wantHeaders: []Header{{"correlation_id", "t1"}},
			kind:        KindBytes,
		},
		{
			name: "D no body", wire: c[:40],
			corr: "t1", body: nil,
			wantHeaders: []Header{{"correlation_id", "t1"}},
			kind:        KindBytes,
		},
	}
}

func TestGoldenVectorsLengths(t *testing.T) {
	want := map[string]int{"A text": 72, "B json": 129, "C raw bytes": 42, "D no body": 40}
	for _, g := range goldenVectors(t) {
		if len(g.wire) != want[g.name] {
			t.Errorf("%s: vector is %d bytes, INTEROP.md says %d", g.name, len(g.wire), want[g.name])
		}
	}
}

func TestEncodeGolden(t *testing.T) {
	for _, g := range goldenVectors(t) {
		t.Run(g.name, func(t *testing.T) {
			got, err := Encode(g.corr, g.ct, g.headers, g.body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, g.wire) {
				t.Fatalf("Encode mismatch\n got % x\nwant % x", got, g.wire)
			}
			prefix := []byte("prefix")
			got, err = AppendEncode(prefix, g.corr, g.ct, g.headers, g.body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, append([]byte("prefix"), g.wire...)) {
				t.Fatalf("AppendEncode mismatch\n got % x", got)
			}
		})
	}
}

func TestDecodeGolden(t *testing.T) {
	for _, g := range goldenVectors(t) {
		t.Run(g.name, func(t *testing.T) {
			for _, dec := range []struct {
				name string
				fn   func([]byte) (*Message, error)
			}{{"DecodeBinary", DecodeBinary}, {"Decode", Decode}} {
				m, err := dec.fn(g.wire)
				if err != nil {
					t.Fatalf("%s: %v", dec.name, err)
				}
				if m.Format != FormatBinaryV1 {
					t.Errorf("%s: format %v", dec.name, m.Format)
				}
				if !reflect.DeepEqual(m.Headers, g.wantHeaders) {
					t.Errorf("%s: headers %q, want %q", dec.name, m.Headers, g.wantHeaders)
				}
				if !bytes.Equal(m.Body, g.body) {
					t.Errorf("%s: body % x, want % x", dec.name, m.Body, g.body)
				}
				if m.CorrelationID() != g.corr {
					t.Errorf("%s: correlation id %q, want %q", dec.name, m.CorrelationID(), g.corr)
				}
				if m.ContentType() != g.ct {
					t.Errorf("%s: content type %q, want %q", dec.name, m.ContentType(), g.ct)
				}
				if k := m.BodyKind(); k != g.kind {
					t.Errorf("%s: body kind %v, want %v", dec.name, k, g.kind)
				}
			}
		})
	}
}

func TestDecodeLegacy(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		format  Format
		body    string
		headers []Header
		kind    BodyKind
	}{
		// The three inputs listed in INTEROP.md.
		{
			name: "hex json", in: `{"b": "2268656c6c6f22", "ct": "application/json"}`,
			format: FormatLegacyHex, body: `"hello"`,
			headers: []Header{{"content-type", "application/json"}}, kind: KindJSON,
		},
		{
			name: "data", in: `{"data": "hi", "headers": {"content-type": "text/plain"}}`,
			format: FormatLegacyData, body: "hi",
			headers: []Header{{"content-type", "text/plain"}}, kind: KindText,
		},
		{
			name: "other json object", in: `{"id": 1}`,
			format: FormatRaw, body: `{"id": 1}`, kind: KindJSON,
		},
		// Further cases.
		{
			name: "hex null ct", in: `{"b": "00ff", "ct": null}`,
			format: FormatLegacyHex, body: "\x00\xff", kind: KindBytes,
		},
		{
			name: "hex no ct uppercase", in: `{"b":"7B7D"}`,
			format: FormatLegacyHex, body: "{}", kind: KindJSON,
		},
		{
			name: "hex empty body", in: `{"b": "", "ct": "text/plain"}`,
			format: FormatLegacyHex, body: "", headers: []Header{{"content-type", "text/plain"}}, kind: KindText,
		},
		{
			name: "bad hex falls through to data", in: `{"b": "zz", "data": "x"}`,
			format: FormatLegacyData, body: "x", kind: KindBytes,
		},
		{
			name: "odd hex falls through to raw", in: `{"b": "abc"}`,
			format: FormatRaw, body: `{"b": "abc"}`, kind: KindJSON,
		},
		{
			name: "non-string b falls through", in: `{"b": 12}`,
			format: FormatRaw, body: `{"b": 12}`, kind: KindJSON,
		},
		{
			name: "non-string ct falls through", in: `{"b": "00", "ct": 5}`,
			format: FormatRaw, body: `{"b": "00", "ct": 5}`, kind: KindJSON,
		},
		{
			name:   "data keeps json order and replaces in place",
			in:     `{"headers": {"z": "1", "correlation_id": "c", "a": 2, "n": null, "z": "3", "o": {"k": [1, 2]}}, "data": "héllo"}`,
			format: FormatLegacyData, body: "héllo",
			headers: []Header{{"z", "3"}, {"correlation_id", "c"}, {"a", "2"}, {"o", `{"k":[1,2]}`}},
			kind:    KindBytes,
		},
		{
			name: "data null headers", in: `{"data": "5", "headers": null}`,
			format: FormatLegacyData, body: "5", kind: KindJSON,
		},
		{
			name: "data headers not object", in: `{"data": "5", "headers": [1]}`,
			format: FormatRaw, body: `{"data": "5", "headers": [1]}`, kind: KindJSON,
		},
		{
			name: "data not string", in: `{"data": 5}`,
			format: FormatRaw, body: `{"data": 5}`, kind: KindJSON,
		},
		{
			name: "invalid json", in: `{"b": "00"`,
			format: FormatRaw, body: `{"b": "00"`, kind: KindBytes,
		},
		{
			name: "leading space is raw", in: ` {"b": "00"}`,
			format: FormatRaw, body: ` {"b": "00"}`, kind: KindJSON,
		},
		{
			name: "plain text", in: "hello",
			format: FormatRaw, body: "hello", kind: KindBytes,
		},
		{
			name: "empty", in: "",
			format: FormatRaw, body: "", kind: KindBytes,
		},
		{
			name: "magic prefix only", in: magic[:5],
			format: FormatRaw, body: magic[:5], kind: KindBytes,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if m.Format != tt.format {
				t.Errorf("format %v, want %v", m.Format, tt.format)
			}
			if string(m.Body) != tt.body {
				t.Errorf("body %q, want %q", m.Body, tt.body)
			}
			if !reflect.DeepEqual(m.Headers, tt.headers) {
				t.Errorf("headers %q, want %q", m.Headers, tt.headers)
			}
			if k := m.BodyKind(); k != tt.kind {
				t.Errorf("kind %v, want %v", k, tt.kind)
			}
			if _, err := DecodeBinary([]byte(tt.in)); !errors.Is(err, ErrMalformed) {
				t.Errorf("DecodeBinary accepted a non-binary envelope (err %v)", err)
			}
		})
	}
}

func TestLegacyDataManyHeaders(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"data": "", "headers": {`)
	const n = 100
	for i := 0; i < n; i++ {
		sb.WriteString(`"k` + strconv.Itoa(i) + `": "v` + strconv.Itoa(i) + `", `)
	}
	sb.WriteString(`"k7": "last", "k99": "again"}}`)
	m, err := Decode([]byte(sb.String()))
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != FormatLegacyData || len(m.Headers) != n {
		t.Fatalf("format %v, %d headers", m.Format, len(m.Headers))
	}
	for i, h := range m.Headers {
		want := "v" + strconv.Itoa(i)
		switch i {
		case 7:
			want = "last"
		case 99:
			want = "again"
		}
		if h.Key != "k"+strconv.Itoa(i) || h.Value != want {
			t.Errorf("header %d = %q", i, h)
		}
	}
}

func TestEncodeReplacesInPlace(t *testing.T) {
	got, err := Encode("corr", "text/plain", []Header{
		{"x-a", "1"},
		{"content-type", "application/octet-stream"},
		{"x-b", "2"},
		{"correlation_id", "override"},
		{"x-a", "3"},
	}, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeBinary(got)
	if err != nil {
		t.Fatal(err)
	}
	want := []Header{
		{"correlation_id", "override"},
		{"content-type", "application/octet-stream"},
		{"x-a", "3"},
		{"x-b", "2"},
	}
	if !reflect.DeepEqual(m.Headers, want) {
		t.Fatalf("headers %q, want %q", m.Headers, want)
	}
	if m.BodyKind() != KindBytes {
		t.Errorf("kind %v", m.BodyKind())
	}

	// Without a content type argument, a user content-type header is a
	// plain user header at its own position.
	got, err = Encode("c", "", []Header{{"x", "1"}, {"content-type", "text/plain"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err = DecodeBinary(got)
	if err != nil {
		t.Fatal(err)
	}
	want = []Header{{"correlation_id", "c"}, {"x", "1"}, {"content-type", "text/plain"}}
	if !reflect.DeepEqual(m.Headers, want) {
		t.Fatalf("headers %q, want %q", m.Headers, want)
	}
}

func TestEncodeManyHeaders(t *testing.T) {
	// More headers than the scanning path handles: the map path must give
	// the same result as the reference model.
	var hs []Header
	for i := 0; i < 200; i++ {
		hs = append(hs, Header{"k" + strconv.Itoa(i%70), "v" + strconv.Itoa(i)})
	}
	hs = append(hs, Header{"content-type", "x/y"}, Header{"correlation_id", "z"})
	got, err := Encode("c", "text/plain", hs, []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeBinary(got)
	if err != nil {
		t.Fatal(err)
	}
	want := referenceHeaders("c", "text/plain", hs)
	if !reflect.DeepEqual(m.Headers, want) {
		t.Fatalf("headers\n got %q\nwant %q", m.Headers, want)
	}
	if len(want) != 72 || want[0].Value != "z" || want[1].Value != "x/y" {
		t.Fatalf("unexpected reference result %q", want[:2])
	}
}

// referenceHeaders is a deliberately simple model of the Python writer's
// header order, used to check Encode.
func referenceHeaders(corr, ct string, user []Header) []Header {
	all := []Header{{"correlation_id", corr}}
	if ct != "" {
		all = append(all, Header{"content-type", ct})
	}
	all = append(all, user...)
	var out []Header
next:
	for _, h := range all {
		for i := range out {
			if out[i].Key == h.Key {
				out[i].Value = h.Value
				continue next
			}
		}
		out = append(out, h)
	}
	return out
}

func TestNonASCIIRoundTrip(t *testing.T) {
	hs := []Header{{"x-name", "Zoë 🚀"}, {"ключ", "значение"}}
	got, err := Encode("id-é", "text/plain; charset=utf-8", hs, []byte("привет"))
	if err != nil {
		t.Fatal(err)
	}
	// The correlation id length field holds the byte length (5), not the
	// code-point count (4) the Python writer would store.
	if l := binary.BigEndian.Uint16(got[20+2+len("correlation_id"):]); l != 5 {
		t.Fatalf("correlation id length field = %d, want 5 bytes", l)
	}
	m, err := DecodeBinary(got)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]Header{{"correlation_id", "id-é"}, {"content-type", "text/plain; charset=utf-8"}}, hs...)
	if !reflect.DeepEqual(m.Headers, want) {
		t.Fatalf("headers %q, want %q", m.Headers, want)
	}
	if string(m.Body) != "привет" || m.BodyKind() != KindText {
		t.Fatalf("body %q kind %v", m.Body, m.BodyKind())
	}
}

// buildEnvelope writes a binary envelope by hand with the header block at
// headersStart, gap bytes of filler between the block and the body.
func buildEnvelope(headersStart int, headers []Header, gap int, body []byte) []byte {
	b := []byte(magic)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(headersStart))
	b = binary.BigEndian.AppendUint32(b, 0) // data_start, patched below
	for len(b) < headersStart {
		b = append(b, 0xEE) // filler a reader must skip
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(headers)))
	for _, h := range headers {
		b = binary.BigEndian.AppendUint16(b, uint16(len(h.Key)))
		b = append(b, h.Key...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(h.Value)))
		b = append(b, h.Value...)
	}
	for i := 0; i < gap; i++ {
		b = append(b, 0xDD)
	}
	binary.BigEndian.PutUint32(b[14:], uint32(len(b)))
	return append(b, body...)
}

func TestDecodeSeeksByOffsets(t *testing.T) {
	hs := []Header{{"correlation_id", "abc"}, {"k", "v"}, {"k", "w"}}
	for _, tc := range []struct{ start, gap int }{{18, 0}, {25, 0}, {40, 3}, {18, 7}} {
		b := buildEnvelope(tc.start, hs, tc.gap, []byte("payload"))
		for _, dec := range []func([]byte) (*Message, error){DecodeBinary, Decode} {
			m, err := dec(b)
			if err != nil {
				t.Fatalf("start %d gap %d: %v", tc.start, tc.gap, err)
			}
			if !reflect.DeepEqual(m.Headers, hs) || string(m.Body) != "payload" {
				t.Fatalf("start %d gap %d: headers %q body %q", tc.start, tc.gap, m.Headers, m.Body)
			}
			if v, _ := m.Get("k"); v != "w" {
				t.Errorf("Get returned %q, want the last value", v)
			}
			if m.CorrelationID() != "abc" {
				t.Errorf("correlation id %q", m.CorrelationID())
			}
		}
	}
}

func TestDecodeBinaryMalformed(t *testing.T) {
	a := unhex(t, goldenAHex)
	patch := func(off int, v uint32, size int) []byte {
		b := bytes.Clone(a)
		if size == 2 {
			binary.BigEndian.PutUint16(b[off:], uint16(v))
		} else {
			binary.BigEndian.PutUint32(b[off:], v)
		}
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"magic only", []byte(magic), "too short"},
		{"17 bytes", a[:17], "too short"},
		{"bad magic", append([]byte("\x89BIM"), a[4:]...), "bad magic"},
		{"version 2", patch(8, 2, 2), "unsupported version 2"},
		{"version 0", patch(8, 0, 2), "unsupported version 0"},
		{"headers_start inside prefix", patch(10, 4, 4), "header block out of range"},
		{"headers_start past end", patch(10, 1000, 4), "header block out of range"},
		{"headers_start huge", patch(10, math.MaxUint32, 4), "header block out of range"},
		{"data_start past end", patch(14, 73, 4), "data start out of range"},
		{"data_start huge", patch(14, math.MaxUint32, 4), "data start out of range"},
		{"data_start before count", patch(14, 19, 4), "header block out of range"},
		{"data_start inside headers", patch(14, 40, 4), "header 0 of 2: value of 3 bytes runs past the header block (ends at data_start 40)"},
		{"data_start cuts key length", patch(14, 42, 4), "header 1 of 2: key length runs past"},
		{"count too large", patch(18, 3, 2), "header 2 of 3"},
		{"count huge", patch(18, 65535, 2), "header 2 of 65535"},
		{"key length too large", patch(20, 200, 2), "header 0 of 2: key of 200 bytes runs past"},
		{"value length too large", patch(36, 60, 2), "header 0 of 2: value of 60 bytes runs past"},
		{"truncated at 18", a[:18], "header block out of range"},
		{"truncated in headers", a[:30], "data start out of range"},
		{"truncated body", a[:66], "data start out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeBinary(tt.in)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, message %v; want ErrMalformed", err, m)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if m != nil {
				t.Errorf("message returned with error")
			}
			if bytes.HasPrefix(tt.in, []byte(magic)) {
				if _, derr := Decode(tt.in); !errors.Is(derr, ErrMalformed) {
					t.Errorf("Decode of magic-prefixed malformed input: err %v", derr)
				}
			}
		})
	}
}

func TestDecodeBinaryDoesNotOverallocate(t *testing.T) {
	// A claimed count of 65535 with an empty block must fail before any
	// allocation proportional to the count.
	b := buildEnvelope(18, nil, 0, nil)
	binary.BigEndian.PutUint16(b[18:], 65535)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 100
	for i := 0; i < runs; i++ {
		if _, err := DecodeBinary(b); err == nil {
			t.Fatal("no error")
		}
	}
	runtime.ReadMemStats(&after)
	if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > 1024 {
		t.Errorf("%d bytes allocated per rejected envelope", perRun)
	}
}

func TestBodyAliasesAndIsClipped(t *testing.T) {
	a := append(unhex(t, goldenAHex), "spare capacity"...)
	a = a[:72]
	m, err := DecodeBinary(a)
	if err != nil {
		t.Fatal(err)
	}
	if &m.Body[0] != &a[67] {
		t.Error("body does not alias the input")
	}
	_ = append(m.Body, '!')
	if string(a[:cap(a)][72:73]) != "s" {
		t.Error("appending to Body wrote into the input's spare capacity")
	}
}

func TestEncodeLimits(t *testing.T) {
	big := strings.Repeat("x", maxField+1)
	ok := strings.Repeat("x", maxField)
	cases := []struct {
		name     string
		corr, ct string
		hs       []Header
		wantErr  string
	}{
		{"corr too long", big, "", nil, "correlation id is 65536 bytes"},
		{"ct too long", "c", big, nil, "content type is 65536 bytes"},
		{"key too long", "c", "", []Header{{big, "v"}}, "header 0: key is 65536 bytes"},
		{"value too long", "c", "", []Header{{"a", "v"}, {"k", big}}, `header 1 ("k"): value is 65536 bytes`},
		{"replaced value too long", "c", "", []Header{{"k", big}, {"k", "v"}}, "value is 65536 bytes"},
		{"max sizes ok", ok, ok, []Header{{ok, ok}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := AppendEncode(dst, c.corr, c.ct, c.hs, nil)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				m, err := DecodeBinary(out[4:])
				if err != nil || len(m.Headers) != 3 || m.Headers[2].Value != ok {
					t.Fatalf("round trip failed: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want %q", err, c.wantErr)
			}
			if string(out) != "keep" {
				t.Errorf("dst changed on error: %q", out)
			}
		})
	}

	t.Run("header count", func(t *testing.T) {
		hs := make([]Header, maxField) // plus correlation_id: 65536 headers
		for i := range hs {
			hs[i] = Header{Key: strconv.Itoa(i)}
		}
		if _, err := Encode("c", "", hs, nil); err == nil || !strings.Contains(err.Error(), "65536 headers") {
			t.Fatalf("err = %v", err)
		}
		// Duplicates collapse, so the written count is what matters.
		hs[len(hs)-1].Key = "0"
		b, err := Encode("c", "", hs, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeBinary(b)
		if err != nil || len(m.Headers) != maxField {
			t.Fatalf("decoded %v headers, err %v", len(m.Headers), err)
		}
	})

	t.Run("total size", func(t *testing.T) {
		// A body of 4 GiB is impractical in a test, so check the arithmetic.
		if n, err := encodedSize(prefixLen, math.MaxUint32-prefixLen); err != nil || n != math.MaxUint32 {
			t.Errorf("largest envelope: %d, %v", n, err)
		}
		if _, err := encodedSize(prefixLen, math.MaxUint32-prefixLen+1); err == nil ||
			!strings.Contains(err.Error(), "encoded size 4294967296 exceeds") {
			t.Errorf("err = %v", err)
		}
		// Maximal headers alone stay below the limit only with few of them.
		if _, err := encodedSize(prefixLen+65535*(4+2*65535), 0); err == nil {
			t.Error("65535 maximal headers accepted")
		}
	})
}

func TestStrings(t *testing.T) {
	for f, want := range map[Format]string{
		FormatBinaryV1: "binary-v1", FormatLegacyHex: "legacy-hex", FormatLegacyData: "legacy-data",
		FormatRaw: "raw", 0: "Format(0)",
	} {
		if f.String() != want {
			t.Errorf("%d: %q", int(f), f.String())
		}
	}
	for k, want := range map[BodyKind]string{KindBytes: "bytes", KindText: "text", KindJSON: "json", 9: "BodyKind(9)"} {
		if k.String() != want {
			t.Errorf("%d: %q", int(k), k.String())
		}
	}
}

func TestBodyKind(t *testing.T) {
	tests := []struct {
		ct   *string
		body string
		want BodyKind
	}{
		{nil, `{"a":1}`, KindJSON},
		{nil, `42`, KindJSON},
		{nil, `"s"`, KindJSON},
		{nil, `hello`, KindBytes},
		{nil, ``, KindBytes},
		{nil, "\x00\xff", KindBytes},
		{ptr("text/plain"), `{"a":1}`, KindText},
		{ptr("text/plain; charset=utf-8"), `x`, KindText},
		{ptr(" Text/Plain "), `x`, KindText},
		{ptr("text/plainx"), `x`, KindBytes},
		{ptr("application/json"), `not json`, KindJSON},
		{ptr("application/json; charset=utf-8"), `1`, KindJSON},
		{ptr("APPLICATION/JSON"), `1`, KindJSON},
		{ptr("application/octet-stream"), `{"a":1}`, KindBytes},
		{ptr("application/xml"), `<a/>`, KindBytes},
		{ptr(""), `{"a":1}`, KindBytes},
	}
	for _, tt := range tests {
		m := &Message{Body: []byte(tt.body)}
		if tt.ct != nil {
			m.Headers = []Header{{"content-type", *tt.ct}}
		}
		if got := m.BodyKind(); got != tt.want {
			ct := "<none>"
			if tt.ct != nil {
				ct = *tt.ct
			}
			t.Errorf("content type %q body %q: %v, want %v", ct, tt.body, got, tt.want)
		}
	}
}

func ptr(s string) *string { return &s }

func TestGet(t *testing.T) {
	m := &Message{Headers: []Header{{"a", "1"}, {"A", "2"}, {"a", "3"}, {"e", ""}}}
	for key, want := range map[string]struct {
		v  string
		ok bool
	}{"a": {"3", true}, "A": {"2", true}, "e": {"", true}, "x": {"", false}} {
		if v, ok := m.Get(key); v != want.v || ok != want.ok {
			t.Errorf("Get(%q) = %q, %v", key, v, ok)
		}
	}
	if m.CorrelationID() != "" || m.ContentType() != "" {
		t.Error("missing headers should read as empty")
	}
}

func TestAppendEncodeNoAllocs(t *testing.T) {
	hs := benchHeaders()
	body := bytes.Repeat([]byte("x"), 100)
	buf := make([]byte, 0, 512)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		buf, err = AppendEncode(buf[:0], "trace-abc-123", ContentTypeJSON, hs, body)
		if err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendEncode allocated %.0f times with enough capacity", allocs)
	}
}

func benchHeaders() []Header {
	return []Header{{"x-tenant", "acme"}, {"x-request-id", "7f1c2a9e"}, {"x-attempt", "1"}}
}

func BenchmarkEncode(b *testing.B) {
	hs := benchHeaders()
	body := bytes.Repeat([]byte("x"), 100)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode("trace-abc-123", ContentTypeJSON, hs, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendEncode(b *testing.B) {
	hs := benchHeaders()
	body := bytes.Repeat([]byte("x"), 100)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendEncode(buf[:0], "trace-abc-123", ContentTypeJSON, hs, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBinary(b *testing.B) {
	enc, err := Encode("trace-abc-123", ContentTypeJSON, benchHeaders(), bytes.Repeat([]byte("x"), 100))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeBinary(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// Split: the well-known headers apart, the last of a repeated key wins (as
// Get), and no user headers is a nil map.
func TestSplit(t *testing.T) {
	m := &Message{Headers: []Header{
		{HeaderCorrelationID, "a"}, {HeaderContentType, "text/plain"}, {"k", "1"}, {HeaderCorrelationID, "b"}, {"k", "2"}, {"x", ""},
	}}
	corr, ct, user := m.Split()
	if corr != "b" || ct != "text/plain" || len(user) != 2 || user["k"] != "2" || user["x"] != "" {
		t.Errorf("Split: %q %q %v", corr, ct, user)
	}
	if corr, ct, user := (&Message{Body: []byte("raw")}).Split(); corr != "" || ct != "" || user != nil {
		t.Errorf("no headers: %q %q %v, want empty and a nil map", corr, ct, user)
	}
}
