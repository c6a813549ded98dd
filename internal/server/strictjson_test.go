package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ontime-go/ontime/internal/wire"
)

var strictSeeds = []string{
	`{"delay":"1s","delay":"2s"}`, `{"DELAY":"1s"}`, `{"delay":"1s","Delay":"2s"}`, `{"id":"\ud800","delay":"1s"}`,
	`{"id":"\ud83d\ude00"}`, `{"id":"\udc00\ud800"}`, `{"body":"\ud800\\u0041"}`, `{"headers":{"a":"1","a":"2"}}`,
	`{"body":{"a":1,"a":2}}`, `{"body":{"a":1,"A":2}}`, "{\"id\":\"\xed\xa0\x80\"}", `{"id":"\ufffd"}`, "{\"id\":\"\uFFFD\"}",
	`{"all":true,"ids":["="],"ids":null}`, `{"ids":["a"],"IDS":["b"]}`, `{"ids":["\udfff"]}`, `[{"delay":"1s"}]`,
	`{"id":"a\\\\ud800"}`, `{"id":"\\"}`,
}

// topMembers counts the members of data's top-level object (data is
// valid JSON): the commas at depth one of its compact form, plus one.
func topMembers(t *testing.T, data []byte) int {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		t.Fatalf("compact %q: %v", data, err)
	}
	b := buf.Bytes()
	if bytes.Equal(b, []byte("{}")) {
		return 0
	}
	n, depth, in := 1, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ',' && depth == 1:
			n++
		}
	}
	return n
}

// fffdIn counts U+FFFD in raw JSON text: the character itself and its
// escape \ufffd in any case.
func fffdIn(raw []byte) int {
	return bytes.Count(raw, []byte("\uFFFD")) + strings.Count(strings.ToLower(string(raw)), `\ufffd`)
}

// checkOracle fails when data, accepted into v, is not strict by an
// oracle independent of checkStrict: encoding/json's last-wins map holds
// as many keys as the object has members (no duplicates), every key is a
// field name spelled exactly, and decoding invented no U+FFFD (the mark
// of invalid UTF-8 or a lone surrogate replaced).
func checkOracle(t *testing.T, data []byte, v any, names []string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return // not an object: nothing to compare
	}
	if got := topMembers(t, data); got != len(m) {
		t.Fatalf("%q accepted with %d members but %d distinct keys", data, got, len(m))
	}
	for k := range m {
		found := false
		for _, n := range names {
			found = found || n == k
		}
		if !found {
			t.Fatalf("%q accepted with key %q, not a field name as spelled", data, k)
		}
	}
	if h, ok := m["headers"]; ok && len(h) > 0 && h[0] == '{' {
		var hm map[string]json.RawMessage
		if json.Unmarshal(h, &hm) == nil && topMembers(t, h) != len(hm) {
			t.Fatalf("%q accepted with a duplicate header", data)
		}
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(data) || fffdIn(enc) > fffdIn(data) {
		t.Fatalf("%q accepted, decoded as %s: U+FFFD invented (invalid UTF-8 or a lone surrogate)", data, enc)
	}
}

// FuzzStrictJSON: whatever the single-timer fast path or encoding/json
// with checkStrict accepts (a TimerIn, a DeadSelect, a MessageIn) has no
// duplicate key, no key in another case, no invalid UTF-8 and no lone
// surrogate, by checkOracle; and the fast path never accepts what the
// strict slow path refuses.
func FuzzStrictJSON(f *testing.F) {
	for _, s := range append(strictSeeds, fastTimerSeeds...) {
		f.Add([]byte(s))
	}
	timerNames := []string{"id", "body", "body_base64", "delay", "at", "headers", "correlation_id", "if_absent"}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast, slow wire.TimerIn
		fastOK := decodeTimerFast(data, &fast)
		slowErr := unmarshalJSON(data, &slow)
		if fastOK {
			if slowErr != nil {
				t.Fatalf("the fast path took %q, the strict path refuses it: %v", data, slowErr)
			}
			checkOracle(t, data, &fast, timerNames)
		}
		if slowErr == nil {
			checkOracle(t, data, &slow, timerNames)
		}
		var ds wire.DeadSelect
		if unmarshalJSON(data, &ds) == nil {
			checkOracle(t, data, &ds, []string{"ids", "all"})
		}
		var mi wire.MessageIn
		if unmarshalJSON(data, &mi) == nil {
			checkOracle(t, data, &mi, jsonNames(reflect.TypeFor[wire.MessageIn]()))
		}
	})
}

func jsonNames(t reflect.Type) []string {
	var out []string
	for k := range jsonFields(t) {
		out = append(out, k)
	}
	return out
}

// TestStrictSeeds: the seeds the fuzz target starts from are refused or
// taken as the rules say.
func TestStrictSeeds(t *testing.T) {
	refused := map[string]string{
		`{"delay":"1s","delay":"2s"}`: "duplicate_field", `{"DELAY":"1s"}`: "unknown_field",
		`{"delay":"1s","Delay":"2s"}`: "unknown_field", `{"id":"\ud800","delay":"1s"}`: "malformed_json",
		`{"id":"\udc00\ud800"}`: "malformed_json", `{"body":"\ud800\\u0041"}`: "malformed_json",
		`{"headers":{"a":"1","a":"2"}}`: "duplicate_field", `{"body":{"a":1,"a":2}}`: "duplicate_field",
		"{\"id\":\"\xed\xa0\x80\"}": "malformed_json",
	}
	for s, code := range refused {
		var in wire.TimerIn
		if e := unmarshalJSON([]byte(s), &in); e == nil || e.code != code {
			t.Errorf("%s: %v, want %s", s, e, code)
		}
	}
	for _, s := range []string{`{"id":"\ud83d\ude00"}`, `{"body":{"a":1,"A":2}}`, `{"id":"\ufffd"}`, `{"id":"a\\\\ud800"}`} {
		var in wire.TimerIn
		if e := unmarshalJSON([]byte(s), &in); e != nil {
			t.Errorf("%s: refused: %v", s, e)
		}
	}
}
