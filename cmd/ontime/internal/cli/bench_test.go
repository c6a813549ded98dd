package cli

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBenchAPIRequest: bench-api's own HTTP/1.1 client sends what net/http's
// server reads as the publish request (path, headers, body), on reused
// connections.
func TestBenchAPIRequest(t *testing.T) {
	var n, conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		switch {
		case err != nil:
			t.Errorf("reading the body: %v", err)
		case r.Method != http.MethodPost || r.URL.EscapedPath() != "/base/v1/topics/a%2Fb/timers":
			t.Errorf("request %s %s", r.Method, r.URL.EscapedPath())
		case r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Content-Type") != "application/json":
			t.Errorf("headers %v", r.Header)
		case string(body) != `{"body":"xxx","delay":"1h"}`:
			t.Errorf("body %s", body)
		}
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"x"}`+"\n")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	res, err := benchAPI(context.Background(), srv.URL+"/base/", "tok", "a/b", "1h", 3, 4, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Requests < 10 || int64(res.Requests) > n.Load() {
		t.Fatalf("result %+v, server saw %d requests", res, n.Load())
	}
	if c := conns.Load(); c > 4 {
		t.Errorf("%d connections for 4 workers: keep-alive is not used", c)
	}
}

// TestBenchAPIErrors: answers other than 201 count as errors, and a
// connection the server closes is replaced.
func TestBenchAPIErrors(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch n.Add(1) % 3 {
		case 0:
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
		case 1:
			w.WriteHeader(http.StatusCreated)
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, "no")
		}
	}))
	defer srv.Close()
	res, err := benchAPI(context.Background(), srv.URL, "", "t", "1h", 10, 2, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors == 0 || res.Requests == 0 {
		t.Fatalf("result %+v: want both successes and errors", res)
	}
}

// TestReadBenchResponse: the response framings net/http's server and others
// send: Content-Length, chunked with trailers, 1xx first, no length (the
// body ends with the connection), HTTP/1.0.
func TestReadBenchResponse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		status   int
		keep     bool
		rest     string
		wantErr  bool
	}{
		{name: "length", in: "HTTP/1.1 201 Created\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello", status: 201, keep: true},
		{name: "length then next", in: "HTTP/1.1 201 Created\r\ncontent-length:2\r\n\r\nhiHTTP/1.1", status: 201, keep: true, rest: "HTTP/1.1"},
		{name: "chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nTrailer: v\r\n\r\nNEXT", status: 200, keep: true, rest: "NEXT"},
		{name: "close", in: "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", status: 503, keep: false},
		{name: "continue", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", status: 201, keep: true},
		{name: "no length", in: "HTTP/1.1 200 OK\r\n\r\nuntil the end", status: 200, keep: false},
		{name: "http/1.0", in: "HTTP/1.0 201 Created\r\nContent-Length: 0\r\n\r\n", status: 201, keep: false},
		{name: "http/1.0 keep-alive", in: "HTTP/1.0 201 Created\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", status: 201, keep: true},
		{name: "no content", in: "HTTP/1.1 204 No Content\r\n\r\n", status: 204, keep: true},
		{name: "bad status line", in: "HTTX/1.1 201 Created\r\n\r\n", wantErr: true},
		{name: "bad status", in: "HTTP/1.1 2x1 Created\r\n\r\n", wantErr: true},
		{name: "bad header", in: "HTTP/1.1 201 Created\r\nno colon\r\n\r\n", wantErr: true},
		{name: "bad length", in: "HTTP/1.1 201 Created\r\nContent-Length: -1\r\n\r\n", wantErr: true},
		{name: "short body", in: "HTTP/1.1 201 Created\r\nContent-Length: 9\r\n\r\nabc", wantErr: true},
		{name: "gzip encoding", in: "HTTP/1.1 201 Created\r\nTransfer-Encoding: gzip\r\n\r\n", wantErr: true},
		{name: "cut short", in: "HTTP/1.1 201 Cre", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), 64)
			status, keep, err := readBenchResponse(br)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("status %d keep %v, want an error", status, keep)
				}
				return
			}
			if err != nil || status != tc.status || keep != tc.keep {
				t.Fatalf("got %d %v %v, want %d %v", status, keep, err, tc.status, tc.keep)
			}
			rest, _ := io.ReadAll(br)
			if string(rest) != tc.rest {
				t.Fatalf("left %q, want %q", rest, tc.rest)
			}
		})
	}
}
