package ontimeredis

import (
	"strconv"
	"strings"
	"testing"
)

// The decoders of what is stored in Redis (native records, dead records)
// and of paging cursors. Whatever the bytes, they return a value or report
// failure and never panic; what the scripts write decodes to what was
// written. (The scripts' encoders are Lua; these seeds follow their
// format, see lua/common.lua.)

func encodeRecord(r record) string {
	return strconv.Itoa(r.attempt) + "," + strconv.FormatInt(r.due, 10) + "," + strconv.Itoa(len(r.err)) + ":" + r.err + string(r.payload)
}

func FuzzParseRecord(f *testing.F) {
	f.Add("0,1795341524991,0:payload", 0, int64(1795341524991), "", []byte("payload"))
	f.Add("3,-5,4:boompayload", 3, int64(-5), "boom", []byte{0, 0xff})
	f.Add("not a record", 1, int64(1), "e", []byte{})
	f.Fuzz(func(t *testing.T, raw string, attempt int, due int64, errText string, payload []byte) {
		_, _ = parseRecord(raw) // must not panic
		_, _, _ = parseLease(raw)
		if attempt < 0 {
			attempt = -(attempt + 1)
		}
		in := record{attempt: attempt, due: due, err: errText, payload: payload}
		out, ok := parseRecord(encodeRecord(in))
		if !ok || out.attempt != in.attempt || out.due != in.due || out.err != in.err || string(out.payload) != string(in.payload) {
			t.Fatalf("round trip of %+v: %+v, %v", in, out, ok)
		}
	})
}

func FuzzParseDead(f *testing.F) {
	f.Add("1,1795341524991,12,4:max_attemptsboompayload")
	f.Add("junk")
	f.Add("1,2,99,99:x")
	f.Fuzz(func(t *testing.T, raw string) {
		d := parseDead(raw)
		if !d.wellFormed && string(d.payload) != raw {
			t.Fatalf("an unreadable dead record must be kept whole as the payload")
		}
	})
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor("1795341524991", "id-1"))
	f.Add(encodeCursor("1795341524.99187", "py"))
	f.Add("!!")
	f.Fuzz(func(t *testing.T, s string) {
		score, id, err := decodeCursor(s)
		if err != nil {
			return
		}
		s2, id2, err := decodeCursor(encodeCursor(score, id))
		if err != nil || s2 != score || id2 != id {
			t.Fatalf("cursor (%q, %q) does not round-trip: (%q, %q) %v", score, id, s2, id2, err)
		}
	})
}

// The reply of cancel_batch.lua and compat_cancel_batch.lua: one byte per
// id. Whatever the reply, cancelResults returns a result per id or an
// error, never a panic, and reads '1' as deleted and '0' as not found.
func FuzzCancelResults(f *testing.F) {
	f.Add("1010", 4)
	f.Add("", 0)
	f.Add("12", 2)
	f.Fuzz(func(t *testing.T, reply string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		out, err := cancelResults(reply, n)
		if err != nil {
			return
		}
		if len(out) != n || len(reply) != n {
			t.Fatalf("%d results for %q, n %d", len(out), reply, n)
		}
		for i, e := range out {
			if (reply[i] == '1') != (e == nil) {
				t.Fatalf("reply %q: result %d is %v", reply, i, e)
			}
		}
	})
}

// FuzzParseSchedEntry: a recurring timer's schedule entry decodes to what
// the scripts wrote, and anything else is refused without a panic.
func FuzzParseSchedEntry(f *testing.F) {
	f.Add("3,1795341524991,0,2,ack,every 5m", int64(3), int64(1795341524991), true, int64(2), "dead", "cron 0 9 * * MON-FRI Europe/Berlin;missed=each:3")
	f.Add("x", int64(0), int64(-1), false, int64(0), "", "a,b,c")
	f.Fuzz(func(t *testing.T, raw string, tick, at int64, paused bool, last int64, outcome, spec string) {
		_, _ = parseSchedEntry(raw) // must not panic
		p := "0"
		if paused {
			p = "1"
		}
		enc := strconv.FormatInt(tick, 10) + "," + strconv.FormatInt(at, 10) + "," + p + "," + strconv.FormatInt(last, 10) + "," + outcome + "," + spec
		e, ok := parseSchedEntry(enc)
		if strings.Contains(outcome, ",") {
			return // not what the scripts write (outcomes are ack or dead)
		}
		if !ok || e.Tick != tick || e.TickAt.UnixMilli() != at || e.Paused != paused || e.LastTick != last || e.LastOutcome != outcome || e.Spec != spec {
			t.Fatalf("parseSchedEntry(%q) = %+v, %v", enc, e, ok)
		}
	})
}
