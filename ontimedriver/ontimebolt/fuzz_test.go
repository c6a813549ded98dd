package ontimebolt

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// The decoders of what is stored on disk: a record, a dead record and a
// paging cursor. Whatever the bytes, they return a value or an error and
// never panic; what the encoders write decodes to what was encoded.

func FuzzDecodeRecord(f *testing.F) {
	f.Add("id", []byte{}, int64(0), uint64(0), int64(0), uint64(0), "", []byte("payload"))
	r := record{due: 1795341524991000, token: 7, leaseUntil: 1795341554991000, attempt: 3, lastError: "boom", payload: []byte("p")}
	f.Add("x", r.encode([]byte("x")), r.due, r.token, r.leaseUntil, r.attempt, r.lastError, r.payload)
	f.Fuzz(func(t *testing.T, id string, raw []byte, due int64, token uint64, lease int64, attempt uint64, lastErr string, payload []byte) {
		key := []byte(id)
		_, _ = decodeRecord(key, raw) // must not panic
		in := record{due: due, token: token, leaseUntil: lease, attempt: attempt, lastError: lastErr, payload: payload}
		if token == 0 {
			in.leaseUntil = 0
		}
		out, err := decodeRecord(key, in.encode(key))
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", in, err)
		}
		if out.due != in.due || out.token != in.token || out.leaseUntil != in.leaseUntil || out.attempt != in.attempt || out.lastError != in.lastError || !bytes.Equal(out.payload, in.payload) {
			t.Fatalf("round trip: %+v, want %+v", out, in)
		}
		if len(id) > 0 {
			if _, err := decodeRecord([]byte(id+"x"), in.encode(key)); err == nil {
				t.Fatal("a record decoded under another key (the checksum covers the key)")
			}
		}
	})
}

func FuzzDecodeDead(f *testing.F) {
	d := deadRecord{due: 1, diedAt: 2, attempt: 25, reason: "max_attempts", errText: "boom", payload: []byte("p")}
	f.Add("x", d.encode([]byte("x")), d.due, d.diedAt, d.attempt, d.reason, d.errText, d.payload)
	f.Fuzz(func(t *testing.T, id string, raw []byte, due, died int64, attempt uint64, reason, errText string, payload []byte) {
		key := []byte(id)
		_, _ = decodeDead(key, raw)
		in := deadRecord{due: due, diedAt: died, attempt: attempt, reason: reason, errText: errText, payload: payload}
		out, err := decodeDead(key, in.encode(key))
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", in, err)
		}
		if out.due != in.due || out.diedAt != in.diedAt || out.attempt != in.attempt || out.reason != in.reason || out.errText != in.errText || !bytes.Equal(out.payload, in.payload) {
			t.Fatalf("round trip: %+v, want %+v", out, in)
		}
	})
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add("")
	f.Add(encodeCursor(make([]byte, 20)))
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, s string) {
		key, err := decodeCursor(s)
		if err == nil && s != "" && encodeCursor(key) != s {
			// base64 has one canonical form per key only when decoding was
			// strict; accept a different spelling but not a different key
			if k2, err2 := decodeCursor(encodeCursor(key)); err2 != nil || !bytes.Equal(k2, key) {
				t.Fatalf("cursor %q: key %x does not round-trip", s, key)
			}
		}
	})
}

func FuzzDecodeCounts(f *testing.F) {
	f.Add(encodeCounts(3, 4))
	f.Add([]byte{1})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, d, err := decodeCounts(b)
		if err != nil {
			return
		}
		if n < 0 || d < 0 {
			t.Fatalf("counts %d, %d from %x", n, d, b)
		}
		if n2, d2, err := decodeCounts(encodeCounts(n, d)); err != nil || n2 != n || d2 != d {
			t.Fatalf("round trip of %d, %d: %d, %d, %v", n, d, n2, d2, err)
		}
	})
}

// The keys: a topic's prefix and a timer's key split back into what made
// them, whatever the bytes, and no topic's prefix is a prefix of another's.
func FuzzKeys(f *testing.F) {
	f.Add("orders", "0190a4c2-7d1e-7cc4-9f43-5c1b6b8a0c11", "orders2", []byte{})
	f.Add("", "", "a", []byte{0x05, 'a'})
	f.Fuzz(func(t *testing.T, topic, id, other string, raw []byte) {
		_, _, _ = splitTopic(raw)
		_, _, _ = splitTimerKey(raw)
		_, _, _ = splitKey(raw)
		_ = prefixEnd(raw)
		p := topicPrefix(topic)
		k := indexKey(p, 42, id)
		gotTopic, rest, ok := splitTopic(k)
		if !ok || string(gotTopic) != topic {
			t.Fatalf("splitTopic(%x) = %q, %v", k, gotTopic, ok)
		}
		if us, gotID, ok := splitKey(rest); len(id) > 0 && (!ok || us != 42 || string(gotID) != id) {
			t.Fatalf("splitKey(%x) = %d, %q, %v", rest, us, gotID, ok)
		}
		gotID, gotTopic, ok := splitTimerKey(timerKey(topic, id))
		if !ok || string(gotID) != id || string(gotTopic) != topic {
			t.Fatalf("splitTimerKey = %q, %q, %v", gotID, gotTopic, ok)
		}
		if other != topic && bytes.HasPrefix(indexKey(topicPrefix(other), 42, id), p) {
			t.Fatalf("topic %q's keys start with topic %q's prefix", other, topic)
		}
		if end := prefixEnd(p); end == nil || bytes.Compare(end, k) <= 0 {
			t.Fatalf("prefixEnd(%x) = %x, not after %x", p, end, k)
		}
	})
}

// resealV1 turns whatever bytes format 1 held into a format 2 record that
// decodes as the original did, or keeps them as they were.
func FuzzResealV1(f *testing.F) {
	body := []byte{2, 0, 0, 0}
	v1 := make([]byte, headerLen+len(body))
	copy(v1[headerLen:], body)
	v1[0] = recordVersionV1
	binary.LittleEndian.PutUint32(v1[1:headerLen], checksum([]byte("id"), body))
	f.Add([]byte("id"), v1)
	f.Fuzz(func(t *testing.T, id, raw []byte) {
		key := timerKey("topic", string(id))
		out := resealV1(id, key, raw)
		old, err := open(recordVersionV1, id, raw)
		if err != nil {
			if !bytes.Equal(out, raw) {
				t.Fatalf("a damaged record was changed: %x -> %x", raw, out)
			}
			return
		}
		got, err := open(recordVersion, key, out)
		if err != nil || !bytes.Equal(got, old) {
			t.Fatalf("resealed %x: body %x, %v; want %x", raw, got, err, old)
		}
	})
}

// FuzzDecodeSched: a schedule entry decodes to what was encoded under its
// key; damaged bytes are refused without a panic.
func FuzzDecodeSched(f *testing.F) {
	f.Add([]byte("k"), []byte{2, 0, 0, 0, 0, '1'}, int64(3), int64(1795341524991000), true, int64(2), "ack", int64(7), "every 5m;jitter=1s")
	f.Fuzz(func(t *testing.T, key, raw []byte, tick, at int64, paused bool, last int64, outcome string, held int64, spec string) {
		_, _ = decodeSched(key, raw) // must not panic
		if strings.Contains(outcome, ",") {
			return // not what the driver writes (outcomes are ack or dead)
		}
		in := schedEntry{tick: tick, tickAt: at, paused: paused, lastTick: last, lastOutcome: outcome, heldDue: held, spec: spec}
		out, err := decodeSched(key, in.encode(key))
		if err != nil || out != in {
			t.Fatalf("round trip of %+v: %+v, %v", in, out, err)
		}
		if len(key) > 0 {
			other := append([]byte{key[0] ^ 1}, key[1:]...)
			if _, err := decodeSched(other, in.encode(key)); err == nil {
				t.Fatalf("an entry decoded under another key")
			}
		}
	})
}
