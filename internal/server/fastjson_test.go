package server

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/wire"
)

var fastTimerSeeds = []string{
	`{"body":"xxxxxxxxxx","delay":"1h"}`,
	` { "id" : "a-1" , "body" : "héllo wörld" , "delay":"90s", "headers": {"k":"v","X-Y":""}, "correlation_id":"c", "if_absent": true } `,
	`{"at":"2030-01-01T00:00:00Z","body_base64":"AP8=","if_absent":false}`,
	"{\t\"delay\":\"1s\"\r\n}\n",
	`{}`, `{"headers":{}}`, "{\"id\":\"\xe2\x80\xa8\"}",
	// Not plain: encoding/json decides.
	`{"body":"a\"b","delay":"1s"}`, `{"body":"a\u00e9","delay":"1s"}`, `{"body":"\u2028"}`,
	`{"body":{"n":1},"delay":"1s"}`, `{"body":null}`, `{"body":1}`, `{"delay":null}`,
	`{"Delay":"1s"}`, `{"DELAY":"1s"}`, `{"delay":"1s","delay":"2s"}`, `{"headers":{"a":"1","a":"2"}}`,
	`{"headers":{"a":1}}`, `{"headers":null}`, `{"if_absent":1}`, `{"if_absent":truex}`, `{"if_absent":null}`,
	`{"unknown":"x"}`, `{"delay":"1s"} {}`, `{"delay":"1s"}x`, `{"delay":"1s",}`, `{,}`, `{"delay" "1s"}`,
	`{"delay":"1s"`, `{"delay":"1s`, `[]`, `null`, `"x"`, ``, ` `, "{\"body\":\"\xff\"}", "{\"body\":\"a\x01\"}",
	"{\"delay\":\"1s\"}\x00", "\ufeff{}", `{"if_absent":true,"if_absent":false}`,
}

// TestDecodeTimerFastTakes: the requests the fast path is for are decoded
// there, and those it is not for are left to encoding/json.
func TestDecodeTimerFastTakes(t *testing.T) {
	for i, s := range fastTimerSeeds {
		var in wire.TimerIn
		got := decodeTimerFast([]byte(s), &in)
		if want := i < 7; got != want {
			t.Errorf("decodeTimerFast(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzDecodeTimerFast: whatever decodeTimerFast accepts, encoding/json
// (as decodeJSON runs it: unknown fields refused, nothing after the
// value) accepts too and decodes to the same TimerIn; and plainJSONString
// agrees with json.Unmarshal on any string it takes.
func FuzzDecodeTimerFast(f *testing.F) {
	for _, s := range fastTimerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast, slow wire.TimerIn
		ok := decodeTimerFast(data, &fast)
		e := unmarshalJSON(data, &slow)
		if ok {
			if e != nil {
				t.Fatalf("decodeTimerFast took %q, encoding/json refuses it: %v", data, e)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%q: decodeTimerFast %+v, encoding/json %+v", data, fast, slow)
			}
		}
		if s, ok := plainJSONString(data); ok {
			var want string
			if err := json.Unmarshal(data, &want); err != nil || s != want {
				t.Fatalf("plainJSONString(%q) = %q; json.Unmarshal: %q, %v", data, s, want, err)
			}
		}
		if ok && e == nil && len(slow.Body) > 0 && slow.Body[0] == '"' {
			if _, plain := plainJSONString(slow.Body); !plain {
				t.Fatalf("%q: the fast path took a body plainJSONString does not", data)
			}
		}
	})
}

// FuzzAppendCreated: appendCreated writes what json.Marshal writes for
// wire.Created.
func FuzzAppendCreated(f *testing.F) {
	f.Add("019a-id", "topic", int64(1795000000), int64(123456789))
	f.Add("a<b", "t&", int64(0), int64(0))
	f.Add("é", "t\"", int64(-62135596800), int64(1))
	f.Add("x", "y", int64(253402300800), int64(0))
	f.Add("x", "y", int64(-62135596801), int64(0))
	f.Add("id", "t", int64(1795000000), int64(100000000))
	f.Fuzz(func(t *testing.T, id, topic string, sec, nsec int64) {
		due := time.Unix(sec, nsec).UTC()
		b, ok := appendCreated(nil, id, topic, due)
		want, err := json.Marshal(wire.Created{ID: id, Topic: topic, DueAt: due})
		if !ok {
			return
		}
		if err != nil || string(b) != string(want) {
			t.Fatalf("appendCreated: %s; json.Marshal: %s, %v", b, want, err)
		}
	})
}

// TestAppendCreatedTakes: the answers the fast path is for are written
// there.
func TestAppendCreatedTakes(t *testing.T) {
	due := time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)
	if _, ok := appendCreated(nil, "019a7c3e-0000-7000-8000-000000000000", "bench-1.x_y:z", due); !ok {
		t.Error("a plain id and topic: not taken")
	}
	for _, s := range []string{"a<b", "a>b", "a&b", `a"b`, `a\b`, "é", "a\x01"} {
		if _, ok := appendCreated(nil, s, "t", due); ok {
			t.Errorf("id %q: taken", s)
		}
	}
	if _, ok := appendCreated(nil, "a", "t", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); ok {
		t.Error("year 10000: taken")
	}
}
