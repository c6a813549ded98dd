package server_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
)

// These tests talk to the server over real TCP connections, byte by byte
// where it matters, against the http.Server `ontime serve` runs
// (server.NewHTTPServer, see newEnv).

// answerBound is how long a test waits for an answer the server must send
// without waiting for the client: far below the time the server would wait
// for the body if it did (read timeouts of minutes, bodies trickled over
// hours), so a pass cannot come from the slow path.
const answerBound = 20 * time.Second

// rawConn is a client connection that sends request bytes by hand.
type rawConn struct {
	t    *testing.T
	host string // the server's host:port, for the Host header
	conn net.Conn
	br   *bufio.Reader
}

func dialRaw(t *testing.T, e *env) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, host: e.addr, conn: c, br: bufio.NewReader(c)}
}

// head sends a request line and headers declaring a body of n bytes
// (n < 0: chunked), and none of the body.
func (c *rawConn) head(method, path string, n int64, extra ...string) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", method, path, c.host)
	if n >= 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", n)
	} else {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	}
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) write(s string) error {
	_, err := io.WriteString(c.conn, s)
	return err
}

// trickle sends a byte of body every 50 ms until stop is closed or the
// connection fails.
func (c *rawConn) trickle(stop <-chan struct{}) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for c.write(" ") == nil {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// answer reads one response within answerBound and returns it with its
// body and error code; key, the operation's coverage key ("POST
// /v1/topics/{topic}/timers"), records the status as seen.
func (c *rawConn) answer(key string) (*http.Response, string) {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(answerBound))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatalf("%s: no answer within %s: %v", key, answerBound, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s: reading the answer: %v", key, err)
	}
	resp.Body.Close()
	var e wire.Error
	if resp.StatusCode >= 400 {
		if err := spec.CheckSchema("Error", body); err != nil {
			c.t.Errorf("%s: %d answer: %v", key, resp.StatusCode, err)
		}
		_ = json.Unmarshal(body, &e)
	}
	recordRaw(fmt.Sprintf("%s %d", key, resp.StatusCode))
	return resp, e.Error.Code
}

// closed checks that the server closed the connection (EOF after the
// answer) within answerBound.
func (c *rawConn) closed(what string) {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(answerBound))
	if n, err := io.Copy(io.Discard, c.br); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Errorf("%s: the server kept the connection open", what)
		}
		// a reset also means closed
	} else if n != 0 {
		c.t.Errorf("%s: %d more bytes after the answer", what, n)
	}
}

// postPaths are the endpoints that read a body, with their coverage keys.
var postPaths = []struct{ path, key string }{
	{"/v1/topics/t/timers", "POST /v1/topics/{topic}/timers"},
	{"/v1/topics/t/timers:batch", "POST /v1/topics/{topic}/timers:batch"},
	{"/v1/topics/t/timers:cancel", "POST /v1/topics/{topic}/timers:cancel"},
	{"/v1/topics/t/dead:replay", "POST /v1/topics/{topic}/dead:replay"},
	{"/v1/topics/t/dead:purge", "POST /v1/topics/{topic}/dead:purge"},
	{"/v1/topics/t/watch:ack", "POST /v1/topics/{topic}/watch:ack"},
	{"/messages", "POST /messages"},
	{"/v1/topics/t/schedules", "POST /v1/topics/{topic}/schedules"},
	{"/v1/topics/t/timers/x/backfill", "POST /v1/topics/{topic}/timers/{id}/backfill"},
}

// TestSlowBodies: clients that trickle their bodies a byte at a time are
// answered 408 request_timeout once read_timeout passes and their
// connections are closed, on every endpoint that reads a body, many at
// once; nothing is stored. A well-behaved request still works afterwards.
func TestSlowBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{readTimeout: 300 * time.Millisecond, noWorkers: true})
	const perPath = 20
	type slow struct {
		c         *rawConn
		path, key string
	}
	var conns []slow
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range postPaths {
		for range perPath {
			c := dialRaw(t, e)
			// A declared 100 KB body at one byte per 50 ms: 83 minutes.
			c.head("POST", p.path, 100_000)
			conns = append(conns, slow{c, p.path, p.key})
			wg.Go(func() { c.trickle(stop) })
		}
	}
	for _, s := range conns {
		resp, code := s.c.answer(s.key)
		if resp.StatusCode != http.StatusRequestTimeout || code != "request_timeout" {
			t.Errorf("%s trickled: %d %s, want 408 request_timeout", s.path, resp.StatusCode, code)
		}
		s.c.closed(s.path + " trickled")
	}
	close(stop)
	wg.Wait()
	e.want(e.do("POST", "/v1/topics/t/timers", `{"id":"fine","delay":"1h"}`), 201, "")
	if n, err := e.client.Count(t.Context(), "t"); err != nil || n.Scheduled != 1 {
		t.Errorf("count %+v, %v: want only the well-behaved timer", n, err)
	}
}

// TestRefusedBeforeBody: auth, the declared size and the in-flight cap are
// checked before a byte of the body is read, and the answer comes at once
// (the connection is then closed, not drained), although the client never
// sends the body and the server would wait minutes for it.
func TestRefusedBeforeBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tokens: []string{"tok"}, readTimeout: 10 * time.Minute, noWorkers: true, maxBody: 64 << 10})
	for _, p := range postPaths {
		for _, auth := range []string{"", "Authorization: Bearer wrong"} {
			c := dialRaw(t, e)
			c.head("POST", p.path, 200_000, auth) // under net/http's 256 KiB drain limit
			resp, code := c.answer(p.key)
			if resp.StatusCode != http.StatusUnauthorized || code != "unauthorized" {
				t.Errorf("%s %q: %d %s, want 401 unauthorized", p.path, auth, resp.StatusCode, code)
			}
			c.closed(p.path + " unauthorized")
		}
		// With the token, a declared size over the endpoint's limit.
		c := dialRaw(t, e)
		c.head("POST", p.path, 1<<30, "Authorization: Bearer tok")
		resp, code := c.answer(p.key)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || code != "request_too_large" {
			t.Errorf("%s with 1 GiB declared: %d %s, want 413 request_too_large", p.path, resp.StatusCode, code)
		}
		c.closed(p.path + " too large")
	}
}

// TestInflightCap: request bodies in flight are capped in bytes, charged
// as they arrive. While a slow client holds 500 KiB of an 800 KiB budget
// (all of its body but a byte), another 500 KiB request answers 503
// overloaded with Retry-After before its body is read (a 100 KiB one
// fits), and once the first is done the second goes through. A chunked
// body is admitted as its endpoint's largest request.
func TestInflightCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{maxBody: 256 << 10, maxInflight: 800 << 10, readTimeout: 10 * time.Minute, minBodyRate: -1, noWorkers: true})
	const key = "POST /v1/topics/{topic}/timers"

	holder := dialRaw(t, e)
	a := paddedTimer("a", 500<<10)
	// Expect: 100-continue: the server answers "100 Continue" when the
	// handler starts reading the body.
	holder.head("POST", "/v1/topics/t/timers", int64(len(a)), "Expect: 100-continue")
	holder.continued()
	if err := holder.write(a[:len(a)-1]); err != nil {
		t.Fatal(err)
	}
	// The server holds what arrived once its handler has read it: the
	// 500 KiB request is refused from then on.
	waitHeld(t, e, int64(len(a)-1))
	refused := declare(t, e, 500<<10)
	resp, code := refused.answer(key)
	if resp.StatusCode != http.StatusServiceUnavailable || code != "overloaded" || resp.Header.Get("Retry-After") != "1" || !resp.Close {
		t.Errorf("a 500 KiB request while 500 KiB are held: %d %s, Retry-After %q, Connection: close %v; want 503 overloaded, 1, close",
			resp.StatusCode, code, resp.Header.Get("Retry-After"), resp.Close)
	}
	refused.closed("overloaded")
	chunked := dialRaw(t, e)
	chunked.head("POST", "/v1/topics/t/timers", -1) // admitted as the endpoint's limit, 576 KiB
	if resp, code := chunked.answer(key); resp.StatusCode != http.StatusServiceUnavailable || code != "overloaded" {
		t.Errorf("a chunked request while 500 KiB are held: %d %s, want 503 overloaded", resp.StatusCode, code)
	}

	small := dialRaw(t, e)
	b := paddedTimer("small", 100<<10)
	small.head("POST", "/v1/topics/t/timers", int64(len(b)))
	if err := small.write(b); err != nil {
		t.Fatal(err)
	}
	if resp, code := small.answer(key); resp.StatusCode != http.StatusCreated {
		t.Errorf("a 100 KiB request within the budget: %d %s, want 201", resp.StatusCode, code)
	}

	if err := holder.write(a[len(a)-1:]); err != nil {
		t.Fatal(err)
	}
	if resp, code := holder.answer(key); resp.StatusCode != http.StatusCreated {
		t.Fatalf("the holder's request: %d %s, want 201", resp.StatusCode, code)
	}
	again := dialRaw(t, e)
	c := paddedTimer("c", 500<<10)
	again.head("POST", "/v1/topics/t/timers", int64(len(c)))
	if err := again.write(c); err != nil {
		t.Fatal(err)
	}
	if resp, code := again.answer(key); resp.StatusCode != http.StatusCreated {
		t.Errorf("a 500 KiB request after the holder finished: %d %s, want 201", resp.StatusCode, code)
	}
	if n, err := e.client.Count(t.Context(), "t"); err != nil || n.Scheduled != 3 {
		t.Errorf("count %+v, %v: want a, small and c", n, err)
	}
}

// paddedTimer is a timer request of n bytes.
func paddedTimer(id string, n int) string {
	s := fmt.Sprintf(`{"id":%q,"delay":"1h","body":"x"}`, id)
	return s + strings.Repeat(" ", n-len(s))
}

// continued reads the "100 Continue" interim answer.
func (c *rawConn) continued() {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(answerBound))
	if line, err := c.br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		c.t.Fatalf("%q, %v; want 100 Continue", line, err)
	}
	if line, err := c.br.ReadString('\n'); err != nil || line != "\r\n" {
		c.t.Fatalf("%q, %v after 100 Continue", line, err)
	}
}

// admitted sends the headers of a size-byte timer request (Expect:
// 100-continue) on new connections until one is admitted (100 Continue:
// its declared size fits next to the bytes held), and returns it, its body
// unsent.
func admitted(t *testing.T, e *env, id string, size int64) *rawConn {
	t.Helper()
	deadline := time.Now().Add(answerBound)
	for {
		c := declare(t, e, size)
		_ = c.conn.SetReadDeadline(time.Now().Add(answerBound))
		line, err := c.br.Peek(12)
		if err != nil {
			t.Fatalf("%s: no answer: %v", id, err)
		}
		if string(line) == "HTTP/1.1 100" {
			c.continued()
			return c
		}
		_ = c.conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s: never admitted (the budget's bytes never came back)", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// declare opens a connection and sends the headers of an n-byte timer
// request with Expect: 100-continue, none of its body: the server answers
// "100 Continue" if it admits the request, 503 overloaded if it does not.
func declare(t *testing.T, e *env, n int64) *rawConn {
	t.Helper()
	c := dialRaw(t, e)
	c.head("POST", "/v1/topics/t/timers", n, "Expect: 100-continue")
	return c
}

// waitHeld waits until the server holds n bytes of request bodies
// (Server.InflightBytes): the bytes its handlers have read. A client's
// write returns once the kernel has taken its bytes, before the server
// reads them, so a test that needs bytes held waits for this.
func waitHeld(t *testing.T, e *env, n int64) {
	t.Helper()
	wait.For(t, answerBound, func() bool { return e.srv.InflightBytes() == n },
		"the server to hold %d request bytes (it holds %s); log:\n%s", n,
		func() string { return fmt.Sprint(e.srv.InflightBytes()) }, func() string { return e.logs.String() })
}

// TestBudgetChargedAsBytesArrive: a request holds what it has sent, not
// what it declared: while one declared 600 KiB of an 800 KiB budget and
// sent 100 KiB, a 500 KiB request fits. The budget stays a bound: bytes
// that arrive when others have filled it fail their request with 503
// overloaded (its connection closed, nothing stored), and the request
// that filled it goes through.
func TestBudgetChargedAsBytesArrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{maxBody: 512 << 10, maxInflight: 800 << 10, readTimeout: 10 * time.Minute, minBodyRate: -1, noWorkers: true})
	const key = "POST /v1/topics/{topic}/timers"
	// a is admitted (its declared 600 KiB checked against an empty budget)
	// and its 100 KiB held before b's headers go. Each connection has its
	// own goroutine in the server: a's headers sent first are not checked
	// first, and b's 500 KiB, charged before a's check, would have a
	// refused (600 + 500 > 800 KiB) and b's answer prove nothing.
	abody := paddedTimer("a", 600<<10)
	a := declare(t, e, int64(len(abody)))
	a.continued()
	if err := a.write(abody[:100<<10]); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, e, 100<<10)
	b := dialRaw(t, e)
	b.head("POST", "/v1/topics/t/timers", 500<<10) // declared 600 KiB + 500 KiB > 800 KiB: refused if declared sizes were reserved
	if err := b.write(paddedTimer("b", 500<<10)); err != nil {
		t.Fatal(err)
	}
	if resp, code := b.answer(key); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a 500 KiB request while another declared 600 KiB and sent 100 KiB: %d %s, want 201", resp.StatusCode, code)
	}
	// c fills the budget (a's 100 KiB + c's 650 KiB), then a's next bytes
	// no longer fit. b's bytes go back to the budget when its handler
	// returns, which its client can see after reading b's answer: c is
	// admitted (100 Continue) once they are back.
	c, cbody := admitted(t, e, "c", 700<<10), paddedTimer("c", 700<<10)
	if err := c.write(cbody[:650<<10]); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, e, 750<<10)
	probe := declare(t, e, 60<<10) // 750 + 60 > 800 KiB
	if resp, code := probe.answer(key); resp.StatusCode != http.StatusServiceUnavailable || code != "overloaded" {
		t.Fatalf("a 60 KiB request while 750 KiB are held: %d %s, want 503 overloaded", resp.StatusCode, code)
	}
	if err := a.write(abody[100<<10:]); err != nil {
		t.Fatal(err)
	}
	resp, code := a.answer(key)
	if resp.StatusCode != http.StatusServiceUnavailable || code != "overloaded" || !resp.Close {
		t.Errorf("a's bytes past the budget: %d %s, close %v; want 503 overloaded, close", resp.StatusCode, code, resp.Close)
	}
	if err := c.write(cbody[650<<10:]); err != nil {
		t.Fatal(err)
	}
	if resp, code := c.answer(key); resp.StatusCode != http.StatusCreated {
		t.Errorf("c: %d %s, want 201", resp.StatusCode, code)
	}
	if _, err := e.client.Get(t.Context(), "t", "a"); !errors.Is(err, ontime.ErrNotFound) {
		t.Errorf("a was stored (%v)", err)
	}
}

// TestSlowSendersDoNotStarve: four connections that declare the largest
// batch (16 MiB each, the whole default budget of 64 MiB) and trickle a
// byte every 50 ms hold only the bytes they sent: 20 publishes sent
// meanwhile all succeed. The tricklers are cut (408, below min_body_rate)
// after a rate window or two, long before read_timeout (10 minutes here),
// and their connections closed.
func TestSlowSendersDoNotStarve(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{readTimeout: 10 * time.Minute, noWorkers: true})
	const batchKey = "POST /v1/topics/{topic}/timers:batch"
	limit := server.BatchRequestLimit(1 << 20)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var slow []*rawConn
	started := time.Now()
	for range 4 {
		c := dialRaw(t, e)
		// The server answers "100 Continue" when the handler starts
		// reading the body: the request is admitted (with the declared
		// size reserved, before the fix) before the publishes go.
		c.head("POST", "/v1/topics/t/timers:batch", limit, "Expect: 100-continue")
		c.continued()
		slow = append(slow, c)
		wg.Go(func() { c.trickle(stop) })
	}
	var pub sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		pub.Add(1)
		go func() {
			defer pub.Done()
			r := e.do("POST", "/v1/topics/p/timers", fmt.Sprintf(`{"id":"p-%d","delay":"1h"}`, i))
			codes[i] = r.status
		}()
	}
	pub.Wait()
	for i, c := range codes {
		if c != http.StatusCreated {
			t.Errorf("publish %d while 4 clients trickle 16 MiB batches: %d, want 201", i, c)
		}
	}
	for _, c := range slow {
		resp, code := c.answer(batchKey)
		if resp.StatusCode != http.StatusRequestTimeout || code != "request_timeout" {
			t.Errorf("a trickled batch: %d %s, want 408 request_timeout", resp.StatusCode, code)
		}
		c.closed("trickled batch")
	}
	if d := time.Since(started); d > 5*time.Minute {
		t.Errorf("the tricklers were cut after %v: read_timeout, not the minimum rate", d)
	}
	close(stop)
	wg.Wait()
	if n, err := e.client.Count(t.Context(), "p"); err != nil || n.Scheduled != 20 {
		t.Errorf("count %+v, %v: want the 20 publishes", n, err)
	}
}

// TestWatchOutlivesReadTimeout: the body read timeout does not touch
// requests without a body: a watch stream open for several read timeouts
// still gets its timer.
func TestWatchOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{readTimeout: 100 * time.Millisecond})
	c := dialRaw(t, e)
	if err := c.write("GET /v1/topics/w/watch HTTP/1.1\r\nHost: " + c.host + "\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(answerBound))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch: %v %v", resp, err)
	}
	// Not resp.Body.Close: it would drain the endless stream; the
	// connection is closed at cleanup.
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, ": watching") {
		t.Fatalf("first line %q, %v", line, err)
	}
	time.Sleep(5 * 100 * time.Millisecond) // five read timeouts
	e.want(e.do("POST", "/v1/topics/w/timers", `{"id":"late","body":"still here","delay":"0s"}`), 201, "")
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before the timer: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, `"still here"`) {
				t.Errorf("event %q", line)
			}
			return
		}
	}
}
