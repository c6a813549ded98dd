package server_test

import (
	"net/http"
	"testing"
	"time"
)

// TestWatchAckOverloaded: confirmations share the in-flight byte budget of
// request bodies: while a slow client holds most of it (bytes it sent and
// the server read), a chunked watch:ack (admitted as its endpoint's
// largest request) answers 503 overloaded before its body is read.
func TestWatchAckOverloaded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{maxBody: 256 << 10, maxInflight: 800 << 10, readTimeout: 10 * time.Minute, minBodyRate: -1})
	holder := dialRaw(t, e)
	a := paddedTimer("a", 500<<10)
	holder.head("POST", "/v1/topics/t/timers", int64(len(a)), "Expect: 100-continue")
	holder.continued()
	if err := holder.write(a[:len(a)-1]); err != nil {
		t.Fatal(err)
	}
	// The held bytes count once the holder's handler has read them.
	waitHeld(t, e, int64(len(a)-1))
	refused := declare(t, e, 500<<10)
	if resp, code := refused.answer("POST /v1/topics/{topic}/timers"); resp.StatusCode != http.StatusServiceUnavailable || code != "overloaded" {
		t.Fatalf("a 500 KiB request while 500 KiB are held: %d %s, want 503 overloaded", resp.StatusCode, code)
	}
	refused.closed("overloaded")
	ack := dialRaw(t, e)
	ack.head("POST", "/v1/topics/t/watch:ack", -1)
	if resp, code := ack.answer("POST /v1/topics/{topic}/watch:ack"); resp.StatusCode != http.StatusServiceUnavailable || code != "overloaded" {
		t.Errorf("a chunked watch:ack while 500 KiB are held: %d %s, want 503 overloaded", resp.StatusCode, code)
	}
	if err := holder.write(a[len(a)-1:]); err != nil {
		t.Fatal(err)
	}
	if resp, code := holder.answer("POST /v1/topics/{topic}/timers"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("the holder's request: %d %s, want 201", resp.StatusCode, code)
	}
}
