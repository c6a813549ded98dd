package server

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// The in-flight byte budget (Options.MaxInflightBytes) bounds the memory
// request bodies take. A request is charged for its bytes as they arrive,
// so a client that declares 16 MiB and sends a byte a second holds a few
// bytes, not 16 MiB: four such clients cannot starve the others (as they
// could when the declared size was reserved up front). A body must also
// keep arriving at Options.MinBodyRate or be cut (408), which gives its
// bytes and its connection back.

// DefaultMinBodyRate is Options.MinBodyRate's default, in bytes per
// second.
const DefaultMinBodyRate = 16 << 10

// BodyRateWindow is the span over which MinBodyRate is measured: each
// window of it must bring MinBodyRate × BodyRateWindow bytes, or the rest
// of the body, the first window starting when the headers are in.
const BodyRateWindow = 2 * time.Second

// inflight counts the request body bytes held.
type inflight struct {
	mu   sync.Mutex
	used int64
	max  int64
}

// fits reports whether a request of n more bytes fits now (the admission
// check, before its body is read).
func (f *inflight) fits(n int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.used+n <= f.max
}

// charge takes n bytes that arrived, or reports false when they do not
// fit.
func (f *inflight) charge(n int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.used+n > f.max {
		return false
	}
	f.used += n
	return true
}

func (f *inflight) release(n int64) {
	f.mu.Lock()
	f.used -= n
	f.mu.Unlock()
}

// held returns the bytes charged now.
func (f *inflight) held() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.used
}

// InflightBytes returns the request body bytes the server holds now: what
// has arrived of the bodies being read, charged against
// Options.MaxInflightBytes. A request's bytes count once its handler has
// read them (bytes still in the kernel's socket buffers do not), and stop
// counting when its handler returns.
func (s *Server) InflightBytes() int64 { return s.inflight.held() }

// errBodyOverloaded is what a body's Read returns when the bytes that
// arrived do not fit in the budget.
var errBodyOverloaded = errors.New("the in-flight byte budget is full")

// trackedBody is a request body that charges its bytes to the budget as
// they arrive, enforces the read deadline (ReadTimeout from the headers,
// and the minimum rate per window), and notes when it has been read to
// its end: the deadline is then lifted (so that net/http's background
// read cannot cancel a handler that outlives it), and an answer need not
// close the connection. Only the handler's goroutine reads it.
type trackedBody struct {
	io.ReadCloser
	srv     *Server
	rec     *statusRecorder
	charged int64
	// The body's deadline (ReadTimeout) and, with a minimum rate, the end
	// of the current window and the bytes it has brought.
	deadline  time.Time
	windowEnd time.Time
	window    int64
	slow      bool // the read deadline set is the rate window's
}

// start begins tracking body for rec's request.
func (b *trackedBody) start(s *Server, rec *statusRecorder, body io.ReadCloser) {
	now := time.Now()
	*b = trackedBody{ReadCloser: body, srv: s, rec: rec, deadline: now.Add(s.o.ReadTimeout)}
	if s.o.MinBodyRate > 0 {
		b.windowEnd = now.Add(BodyRateWindow)
	}
	b.setDeadline()
}

// setDeadline sets the connection's read deadline to the earlier of the
// body's deadline and the window's end. (Not supported in-process, in the
// CLI's --redis mode: no bound is needed there.)
func (b *trackedBody) setDeadline() {
	d := b.deadline
	b.slow = !b.windowEnd.IsZero() && b.windowEnd.Before(d)
	if b.slow {
		d = b.windowEnd
	}
	_ = b.rec.rc.SetReadDeadline(d)
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if !b.srv.inflight.charge(int64(n)) {
			return 0, errBodyOverloaded
		}
		b.charged += int64(n)
		if !b.windowEnd.IsZero() {
			b.window += int64(n)
			if b.window >= b.srv.o.MinBodyRate*int64(BodyRateWindow)/int64(time.Second) {
				b.window = 0
				b.windowEnd = time.Now().Add(BodyRateWindow)
				b.setDeadline()
			}
		}
	}
	if err == io.EOF && !b.rec.bodyDone {
		b.rec.bodyDone = true
		_ = b.rec.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// release gives the body's bytes back to the budget, once the request is
// answered.
func (b *trackedBody) release() {
	b.srv.inflight.release(b.charged)
	b.charged = 0
}

// overloaded answers 503 overloaded with Retry-After.
func overloaded(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, errorf(http.StatusServiceUnavailable, "overloaded", "the server holds too many request bytes at once (max_inflight_bytes); retry later"))
}
