package ontimeredis

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/ontime-go/ontime/internal/redistest"
)

// The claim script checks each record's header with header() in
// lua/common.lua and hands Go only records it accepts; Go then reads them
// with parseRecord, and a record parseRecord refused would fail the whole
// claim. So whatever header() accepts, parseRecord must parse, to the same
// fields. luaHeader mirrors header() in Go; TestLuaHeaderMirror checks the
// mirror against the real script in Redis, and FuzzParseRecordAcceptsLuaHeader
// checks parseRecord against the mirror.

// luaHeader mirrors header() of lua/common.lua:
//
//	string.find(rec, '^%d+(),%-?%d+(),%d+:'), then at most 9 attempt, 17 due
//	and 10 error-length digits, and e + el <= #rec
//
// (%d is an ASCII digit in Redis's C locale). It returns the header's end
// (Lua's e: the byte after the colon, 0-based), the attempt and due texts
// and the error length.
func luaHeader(rec string) (end int, attempt, due string, errLen int, ok bool) {
	i := 0
	digits := func() string {
		j := i
		for i < len(rec) && '0' <= rec[i] && rec[i] <= '9' {
			i++
		}
		return rec[j:i]
	}
	sep := func(c byte) bool {
		if i < len(rec) && rec[i] == c {
			i++
			return true
		}
		return false
	}
	attempt = digits()
	if attempt == "" || !sep(',') {
		return 0, "", "", 0, false
	}
	start := i
	sep('-')
	if digits() == "" {
		return 0, "", "", 0, false
	}
	due = rec[start:i]
	if !sep(',') {
		return 0, "", "", 0, false
	}
	el := digits()
	if el == "" || !sep(':') {
		return 0, "", "", 0, false
	}
	if len(attempt) > 9 || len(due) > 17 || len(el) > 10 {
		return 0, "", "", 0, false
	}
	n, err := strconv.ParseInt(el, 10, 64) // at most 10 digits: fits
	if err != nil || int64(i)+n > int64(len(rec)) {
		return 0, "", "", 0, false
	}
	return i, attempt, due, int(n), true
}

// checkParseRecordAgrees fails t if the mirror accepts rec and parseRecord
// does not read it to the same fields Lua's parse() would.
func checkParseRecordAgrees(t *testing.T, rec string) {
	t.Helper()
	end, a, due, el, ok := luaHeader(rec)
	if !ok {
		return
	}
	r, ok := parseRecord(rec)
	if !ok {
		t.Fatalf("header() accepts %q, parseRecord refuses it", rec)
	}
	wantA, _ := strconv.Atoi(a)
	wantDue, _ := strconv.ParseInt(due, 10, 64)
	if r.attempt != wantA || r.due != wantDue || r.err != rec[end:end+el] || string(r.payload) != rec[end+el:] {
		t.Fatalf("%q: parseRecord read attempt %d due %d err %q payload %q; header() reads %s, %s, %q, %q",
			rec, r.attempt, r.due, r.err, r.payload, a, due, rec[end:end+el], rec[end+el:])
	}
}

// headerEdgeCases are records at and around every limit of header().
func headerEdgeCases() []string {
	nines := func(n int) string { return strings.Repeat("9", n) }
	return []string{
		"", ":", ",,:", "0,0,0:", "0,1,0:payload", "3,-5,4:boompayload",
		"1,2,3:ab", "1,2,3:abc", "1,2,3:abcd",
		nines(9) + ",1,0:", nines(10) + ",1,0:",
		"0," + nines(17) + ",0:", "0," + nines(18) + ",0:",
		"0,-" + nines(16) + ",0:", "0,-" + nines(17) + ",0:",
		"0,1," + strings.Repeat("0", 10) + ":", "0,1," + strings.Repeat("0", 11) + ":",
		"0,1,0000000003:abc", "0,1," + nines(10) + ":x",
		"+1,2,0:", "1,+2,0:", "1,2,+0:", "-1,2,0:", "1,--2,0:", "1,-,0:", "1,2,-0:",
		" 1,2,0:", "1 ,2,0:", "1,2,0 :", "1,2:", "1,2,3", "1,2,3,4:", "1,2,3:,4:",
		"\xb2,1,0:", "1,\xb2,0:", "1,2,\xb9:", "١,2,0:",
		"007,-0,00:x", "1,2,0::", "1,2,1::",
	}
}

// randomRecords returns records built from digit runs and separators, with
// lengths around the limits, so that near misses are common.
func randomRecords(rng *rand.Rand, n int) []string {
	pieces := []string{",", ",", ",", ":", ":", "-", "+", " ", "x", "\xb2", "\xff"}
	out := make([]string, 0, n)
	for range n {
		var b strings.Builder
		for k := rng.IntN(8); k >= 0; k-- {
			if rng.IntN(3) > 0 {
				for d := rng.IntN(20); d >= 0; d-- {
					b.WriteByte(byte('0' + rng.IntN(10)))
				}
			} else {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			}
		}
		out = append(out, b.String())
		// And a well-shaped header with random field widths and body.
		digits := func(max int) string {
			s := strconv.FormatUint(rng.Uint64(), 10) + strconv.FormatUint(rng.Uint64(), 10)
			return s[:rng.IntN(min(max, len(s)))+1]
		}
		due := digits(19)
		if rng.IntN(2) == 0 {
			due = "-" + due
		}
		body := strings.Repeat("b", rng.IntN(12))
		out = append(out, digits(11)+","+due+","+strconv.Itoa(rng.IntN(14))+":"+body)
	}
	return out
}

// luaHarness runs header() and parse() of lua/common.lua on every ARGV:
// the attempt and due texts are cut at the commas header() found, and the
// attempt header() read as a number follows parse()'s fields.
const luaHarness = `
local out = {}
for i, rec in ipairs(ARGV) do
  local e, a, el, c1, c2 = header(rec)
  if e then
    local p = parse(rec)
    out[i] = {1, e, string.sub(rec, 1, c1 - 1), string.sub(rec, c1 + 1, c2 - 1), el, p.err, p.payload, a, p.attempt}
  else
    out[i] = {0}
  end
end
return out
`

// TestLuaHeaderMirror: on edge cases and thousands of random records, the
// Go mirror accepts exactly what header() in Redis accepts, with the same
// fields, and parseRecord parses every record header() accepts to the
// fields Lua's parse() gives.
func TestLuaHeaderMirror(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.NewClient(t)
	var src strings.Builder
	for _, f := range []string{"shared", "common"} {
		b, err := luaFS.ReadFile("lua/" + f + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
		src.WriteByte('\n')
	}
	src.WriteString(luaHarness)
	recs := append(headerEdgeCases(), randomRecords(rand.New(rand.NewPCG(1, 2)), 2500)...)
	accepted := 0
	for start := 0; start < len(recs); start += 500 {
		chunk := recs[start:min(start+500, len(recs))]
		args := make([]any, len(chunk))
		for i, r := range chunk {
			args[i] = r
		}
		res, err := rdb.Eval(ctx, src.String(), nil, args...).Result()
		if err != nil {
			t.Fatal(err)
		}
		rows, ok := res.([]any)
		if !ok || len(rows) != len(chunk) {
			t.Fatalf("harness returned %T of %d rows for %d records", res, len(rows), len(chunk))
		}
		for i, row := range rows {
			rec := chunk[i]
			r := row.([]any)
			end, a, due, el, ok := luaHeader(rec)
			if luaOK := r[0].(int64) == 1; luaOK != ok {
				t.Fatalf("%q: header() accepts: %v, the mirror: %v", rec, luaOK, ok)
			}
			if !ok {
				continue
			}
			accepted++
			if int(r[1].(int64)) != end || r[2].(string) != a || r[3].(string) != due || int(r[4].(int64)) != el {
				t.Fatalf("%q: header() returns %v, the mirror %d %s %s %d", rec, r[1:5], end, a, due, el)
			}
			if n, _ := strconv.Atoi(a); r[7].(int64) != int64(n) || r[8].(int64) != int64(n) {
				t.Fatalf("%q: header() and parse() read attempt %v and %v, the mirror %s", rec, r[7], r[8], a)
			}
			checkParseRecordAgrees(t, rec)
			p, _ := parseRecord(rec)
			if p.err != r[5].(string) || string(p.payload) != r[6].(string) {
				t.Fatalf("%q: parse() gives err %q payload %q, parseRecord %q %q", rec, r[5], r[6], p.err, p.payload)
			}
		}
	}
	// The corpus must exercise both answers, or it proves little.
	if accepted < 100 || accepted > len(recs)-100 {
		t.Fatalf("%d of %d records accepted: the corpus does not exercise both sides", accepted, len(recs))
	}
	t.Logf("%d of %d records accepted by header()", accepted, len(recs))
}

// FuzzParseRecordAcceptsLuaHeader: parseRecord parses, to the same fields,
// every record the mirror of header() accepts.
func FuzzParseRecordAcceptsLuaHeader(f *testing.F) {
	for _, s := range headerEdgeCases() {
		f.Add(s)
	}
	for _, s := range randomRecords(rand.New(rand.NewPCG(3, 4)), 20) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rec string) {
		checkParseRecordAgrees(t, rec)
	})
}
