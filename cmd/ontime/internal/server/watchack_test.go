package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWatchAckOverloaded: confirmations share the in-flight byte budget of
// request bodies: while a slow client holds most of it, a chunked
// watch:ack (counted as its endpoint's largest request) answers 503
// overloaded before its body is read.
func TestWatchAckOverloaded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{maxBody: 256 << 10, maxInflight: 800 << 10, readTimeout: 10 * time.Minute})
	holder := dialRaw(t, e)
	a := `{"delay":"1h","body":"x"}` + strings.Repeat(" ", 500<<10)
	holder.head("POST", "/v1/topics/t/timers", int64(len(a)), "Expect: 100-continue")
	_ = holder.conn.SetReadDeadline(time.Now().Add(answerBound))
	if line, err := holder.br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("holder: %q, %v; want 100 Continue", line, err)
	}
	ack := dialRaw(t, e)
	ack.head("POST", "/v1/topics/t/watch:ack", -1)
	if resp, code := ack.answer("POST /v1/topics/{topic}/watch:ack"); resp.StatusCode != http.StatusServiceUnavailable || code != "overloaded" {
		t.Errorf("a chunked watch:ack while 500 KiB are held: %d %s, want 503 overloaded", resp.StatusCode, code)
	}
}
