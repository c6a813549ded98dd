// Package server is the ontime HTTP API: schedule, cancel and inspect
// timers, dead letters, the simple /messages API, server-sent-event
// watching, health endpoints, Prometheus metrics (/metrics) and the
// OpenAPI document (openapi.json, served at /v1/openapi.json). docs/api.md
// describes it for people.
package server

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/activity"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver"
)

// OpenAPI is the API's OpenAPI 3 document.
//
//go:embed openapi.json
var OpenAPI []byte

// Options configure the API.
type Options struct {
	Client *ontime.Client
	// Dispatcher runs the delivery workers. Nil (the CLI talking straight
	// to Redis) means no watch endpoint and no worker start on publish.
	Dispatcher Dispatcher
	// Activity, when set, is the recorder hooked into Client
	// (Config.Hooks): GET /v1/topics then reports each topic's last
	// minute.
	Activity *activity.Recorder
	// StoreKind is reported by /v1/stats (embedded or redis).
	StoreKind string
	// MaxBodyBytes caps one message body. Default 1 MiB.
	MaxBodyBytes int64
	// Tokens, when not empty, turn on bearer-token auth for everything but
	// /healthz and /readyz. They have RoleAdmin (what every token could
	// do before tokens had roles).
	Tokens []string
	// RoleTokens are more tokens, each with its role (RoleRead, RoleWrite
	// or RoleAdmin). Any token, here or in Tokens, turns auth on.
	RoleTokens []Token
	// AllowedHosts are the names, besides the server's own address (and
	// the loopback names on a loopback connection), that a request's Host
	// header may give: "ontime.example.com", "*.example.com" for any
	// subdomain, "*" for any host (no check). Others answer 421
	// misdirected_host, so that a DNS-rebinding page cannot reach the
	// API (see checkHost).
	AllowedHosts []string
	// Topics are the configured topics, listed by GET /v1/topics even when
	// empty.
	Topics []string
	// Metrics, when set, answers GET /metrics (the Prometheus exposition),
	// behind the same auth as the API.
	Metrics http.Handler
	Logger  *slog.Logger
	// Done, when closed, ends every watch stream (graceful shutdown).
	Done <-chan struct{}
	// WatchPing is the keep-alive comment interval of watch streams.
	// Default 15s.
	WatchPing time.Duration
	// ReadTimeout bounds reading a request's body, from the end of its
	// headers (NewHTTPServer bounds the headers): a client that sends it
	// slower gets 408 request_timeout and its connection is closed.
	// Requests without a body (watch streams among them) have no such
	// bound. Default 30s.
	ReadTimeout time.Duration
	// MaxInflightBytes caps the bytes of request bodies held at once (read,
	// and being handled), charged as they arrive: a request holds what it
	// has sent, not what it declared. One whose declared Content-Length
	// (a chunked one: the largest its endpoint takes) does not fit next to
	// what is held answers 503 overloaded with Retry-After before its
	// body is read; one whose arriving bytes no longer fit (others filled
	// the budget meanwhile) answers the same and its connection is
	// closed. Default: four of the largest requests (BatchRequestLimit).
	MaxInflightBytes int64
	// MinBodyRate is the slowest a request body may arrive, in bytes per
	// second, over windows of BodyRateWindow: a body that brings less in a
	// window (and is not complete) is cut with 408 request_timeout and
	// its connection closed, giving back the bytes it held, so that
	// clients trickling bytes hold neither the budget nor a connection
	// for long. Default 16 KiB/s; negative: no minimum (ReadTimeout
	// alone).
	MinBodyRate int64
}

// Server is the API's http.Handler.
type Server struct {
	o        Options
	log      *slog.Logger
	mux      *http.ServeMux
	tokens   []token
	roles    map[string]Role // by ServeMux pattern
	anyHost  bool            // AllowedHosts holds "*"
	cop      *http.CrossOriginProtection
	started  time.Time
	inflight inflight
}

// NewHTTPServer returns the http.Server `ontime serve` runs h with: request
// headers must arrive within 10s, an idle keep-alive connection is closed
// after 2 minutes, and net/http's own errors go to log at level warn.
// Bodies are bounded by Options.ReadTimeout (see Server.ServeHTTP), not
// here, so that long watch streams are not cut.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: HeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// HeaderTimeout bounds the arrival of a request's headers.
const HeaderTimeout = 10 * time.Second

// MaxBatch is the most timers one batch request may hold: the number the
// library's Client.PublishBatch writes in one store call, which is atomic
// (one transaction of the embedded store, one Lua script on Redis). A batch
// of at most MaxBatch timers that share one if_absent mode is therefore
// stored all together or not at all; a larger one is refused
// (batch_too_large) rather than written in several calls, of which a later
// one could fail after an earlier one was stored.
const MaxBatch = ontime.BatchChunkSize

// MaxCancel is the most ids one cancel request (timers:cancel) may list:
// the number Client.CancelBatch deletes in one store call, which is atomic,
// so the timers of a request are deleted all together or none is. More
// are refused (too_many_ids).
const MaxCancel = ontime.CancelChunkSize

// New returns the API handler.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.WatchPing <= 0 {
		o.WatchPing = 15 * time.Second
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 30 * time.Second
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = 4 * BatchRequestLimit(o.MaxBodyBytes)
	}
	if o.MinBodyRate == 0 {
		o.MinBodyRate = DefaultMinBodyRate
	}
	s := &Server{o: o, log: o.Logger, mux: http.NewServeMux(), started: time.Now(), cop: http.NewCrossOriginProtection()}
	s.inflight.max = o.MaxInflightBytes
	for _, t := range o.Tokens {
		s.tokens = append(s.tokens, token{secret: []byte(t), role: RoleAdmin})
	}
	for _, t := range o.RoleTokens {
		s.tokens = append(s.tokens, token{secret: []byte(t.Secret), role: t.Role})
	}
	s.anyHost = slices.Contains(o.AllowedHosts, "*")
	s.routes()
	return s
}

// route is one endpoint and the role it needs.
type route struct {
	method, path string
	role         Role
	h            http.HandlerFunc
}

// routeTable lists the API's endpoints with the role each needs
// (RoleNone: open to anonymous callers), in the form ServeMux patterns
// take.
func (s *Server) routeTable() []route {
	routes := []route{
		{"POST", "/v1/topics/{topic}/timers", RoleWrite, s.createTimer},
		{"GET", "/v1/topics/{topic}/timers", RoleRead, s.listTimers},
		{"POST", "/v1/topics/{topic}/timers:batch", RoleWrite, s.createBatch},
		{"POST", "/v1/topics/{topic}/timers:cancel", RoleWrite, s.cancelTimers},
		{"GET", "/v1/topics/{topic}/timers/{id}", RoleRead, s.getTimer},
		{"DELETE", "/v1/topics/{topic}/timers/{id}", RoleWrite, s.deleteTimer},
		{"POST", "/v1/topics/{topic}/timers/{id}/fire", RoleWrite, s.fireTimer},
		{"POST", "/v1/topics/{topic}/schedules", RoleWrite, s.createSchedule},
		{"GET", "/v1/topics/{topic}/schedules", RoleRead, s.listSchedules},
		{"POST", "/v1/topics/{topic}/timers/{id}/pause", RoleWrite, s.pauseSchedule},
		{"POST", "/v1/topics/{topic}/timers/{id}/resume", RoleWrite, s.resumeSchedule},
		{"POST", "/v1/topics/{topic}/timers/{id}/backfill", RoleWrite, s.backfill},
		{"GET", "/v1/topics/{topic}/timeline", RoleRead, s.timeline},
		{"GET", "/v1/topics", RoleRead, s.listTopics},
		{"GET", "/v1/topics/{topic}", RoleRead, s.getTopic},
		{"GET", "/v1/topics/{topic}/watch", RoleRead, s.watch},
		{"POST", "/v1/topics/{topic}/watch:ack", RoleRead, s.watchAck},
		{"GET", "/v1/topics/{topic}/dead", RoleRead, s.listDead},
		{"GET", "/v1/topics/{topic}/dead/{id}", RoleRead, s.getDead},
		{"POST", "/v1/topics/{topic}/dead:replay", RoleAdmin, s.replayDead},
		{"POST", "/v1/topics/{topic}/dead:purge", RoleAdmin, s.purgeDead},
		{"GET", "/v1/stats", RoleRead, s.stats},
		{"GET", "/v1/openapi.json", RoleRead, s.openapi},
		{"POST", "/messages", RoleWrite, s.postMessage},
		{"GET", "/healthz", RoleNone, s.healthz},
		{"GET", "/readyz", RoleNone, s.readyz},
	}
	if s.o.Metrics != nil {
		routes = append(routes, route{"GET", "/metrics", RoleRead, s.o.Metrics.ServeHTTP})
	}
	return routes
}

// RouteRoles returns the role each endpoint needs (RoleNone: anonymous
// callers too), keyed "METHOD /path" as in the OpenAPI document ("GET
// /metrics" only when Options.Metrics is set).
func (s *Server) RouteRoles() map[string]Role {
	out := map[string]Role{}
	for _, r := range s.routeTable() {
		out[r.method+" "+r.path] = r.role
	}
	return out
}

func (s *Server) routes() {
	s.roles = map[string]Role{}
	allowed := map[string][]string{}
	var paths []string
	for _, r := range s.routeTable() {
		pattern := r.method + " " + r.path
		s.mux.HandleFunc(pattern, r.h)
		s.roles[pattern] = r.role
		if _, ok := allowed[r.path]; !ok {
			paths = append(paths, r.path)
		}
		allowed[r.path] = append(allowed[r.path], r.method)
	}
	for _, p := range paths {
		allow := strings.Join(allowed[p], ", ")
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, errorf(http.StatusMethodNotAllowed, "method_not_allowed", "%s is not allowed here; use %s", r.Method, allow))
		})
		s.roles[p] = RoleRead
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, "no_route", "no endpoint %s %s; see /v1/openapi.json", r.Method, r.URL.Path))
	})
}

// authorize answers 401 or 403 and reports false when r's caller may not
// call its endpoint: an anonymous caller (auth on, no token) or a wrong
// token gets 401 unauthorized everywhere but /healthz and /readyz, a
// token whose role is below the endpoint's 403 forbidden. It sets the
// caller's role on rec.
func (s *Server) authorize(rec *statusRecorder, r *http.Request) bool {
	role, ok := s.authenticate(r)
	open := r.URL.Path == "/healthz" || r.URL.Path == "/readyz"
	if !open && (!ok || role == RoleNone) {
		unauthorized(rec)
		return false
	}
	rec.role = role
	if role == RoleAdmin || open {
		return true // no endpoint needs more; spare the lookup
	}
	_, pattern := s.mux.Handler(r)
	need, known := s.roles[pattern]
	if !known {
		need = RoleRead // no_route, or a path ServeMux redirects
	}
	if role < need {
		writeError(rec, errorf(http.StatusForbidden, "forbidden", "this token's role is %s; %s %s needs %s", role, r.Method, r.URL.Path, need))
		return false
	}
	return true
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="ontime"`)
	writeError(w, errorf(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required"))
}

// ServeHTTP implements http.Handler: request id, recovery, access log,
// the request guard (Host, cross-origin, auth: guard.go), request size and
// in-flight bytes, the body's read deadline, routing. Everything that
// refuses a request does so before reading its body, and closes the
// connection instead of draining an unread body (net/http would otherwise
// read up to 256 KiB of it before sending the answer).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, req: r, rc: *http.NewResponseController(w), srv: s, rid: newRequestID()}
	w.Header()[requestIDHeader] = []string{rec.rid}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("handler panicked", "request_id", rec.rid, "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if rec.status == 0 {
				writeError(rec, errorf(http.StatusInternalServerError, "internal", "internal error"))
			}
		}
		level := slog.LevelDebug
		if rec.status >= 500 {
			level = slog.LevelWarn
		}
		// Never the Authorization header or the query (it may hold cursors
		// only, but keep logs small).
		if s.log.Enabled(r.Context(), level) {
			s.log.Log(r.Context(), level, "http", "request_id", rec.rid, "method", r.Method, "path", r.URL.Path, "status", rec.status, "dur", time.Since(start).Round(time.Microsecond))
		}
	}()
	if e := s.checkHost(r); e != nil {
		writeError(rec, e)
		return
	}
	if e := s.checkOrigin(r, r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/watch")); e != nil {
		writeError(rec, e)
		return
	}
	if !s.authorize(rec, r) {
		return
	}
	if e := badSegment(r.URL.EscapedPath()); e != nil {
		writeError(rec, e)
		return
	}
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		limit := s.requestLimit(r)
		if r.ContentLength > limit {
			writeError(rec, errorf(http.StatusRequestEntityTooLarge, "request_too_large", "the request declares %d bytes; the limit is %d", r.ContentLength, limit))
			return
		}
		n := r.ContentLength
		if n < 0 {
			n = limit // chunked: the most it may bring
		}
		if !s.inflight.fits(n) {
			overloaded(rec)
			return
		}
		rec.body.start(s, rec, r.Body)
		r.Body = &rec.body
		defer rec.body.release()
	}
	s.mux.ServeHTTP(rec, r)
}

// requestIDHeader carries every answer's request id; error answers repeat
// it in their body, and the server's log lines about the request name it
// (request_id), so that an answer leads to its log lines.
const requestIDHeader = "X-Request-Id"

// Request ids are a random prefix chosen at start and a counter: unique
// across restarts, and cheap.
var (
	ridPrefix = func() string {
		var b [6]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
	ridSeq atomic.Uint64
)

func newRequestID() string {
	b := make([]byte, 0, len(ridPrefix)+14)
	b = append(b, ridPrefix...)
	b = append(b, '-')
	return string(strconv.AppendUint(b, ridSeq.Add(1), 36))
}

// requestLimit is the most a request to r's endpoint may send.
func (s *Server) requestLimit(r *http.Request) int64 {
	p := r.URL.Path
	if strings.HasSuffix(p, ":batch") || strings.HasSuffix(p, ":cancel") || strings.HasSuffix(p, ":replay") || strings.HasSuffix(p, ":purge") {
		return s.batchLimit()
	}
	return s.singleLimit()
}

// badSegment catches empty topics and ids, and the dot segments "." and
// "..", which ServeMux would turn into a redirect to a cleaned path (so that
// a request for timer "." would read another resource).
func badSegment(p string) *apiError {
	rest, ok := strings.CutPrefix(p, "/v1/topics/")
	if !ok {
		return nil
	}
	// The first four segments and how many there are, as strings.Split
	// would give them.
	var seg [4]string
	nseg := strings.Count(rest, "/") + 1
	for i := range min(nseg, len(seg)) {
		seg[i], rest, _ = strings.Cut(rest, "/")
	}
	if seg[0] == "" && nseg > 1 {
		return errorf(http.StatusBadRequest, "invalid_topic", "topic is empty")
	}
	if isDotSegment(seg[0]) {
		return errorf(http.StatusBadRequest, "invalid_topic", "topic %q is a dot segment; topics \".\" and \"..\" are refused", unescape(seg[0]))
	}
	if (nseg == 3 || nseg == 4 && (seg[3] == "fire" || seg[3] == "pause" || seg[3] == "resume" || seg[3] == "backfill")) && seg[1] == "timers" {
		switch {
		case seg[2] == "":
			return errorf(http.StatusBadRequest, "invalid_id", "id is empty")
		case isDotSegment(seg[2]):
			return errorf(http.StatusBadRequest, "invalid_id", "id %q is a dot segment; ids \".\" and \"..\" are refused", unescape(seg[2]))
		}
	}
	return nil
}

// isDotSegment reports whether an escaped path segment is "." or ".."
// (%2E counts as a dot).
func isDotSegment(seg string) bool {
	s := unescape(seg)
	return s == "." || s == ".."
}

func unescape(seg string) string {
	if s, err := url.PathUnescape(seg); err == nil {
		return s
	}
	return seg
}

// authScheme is the scheme of Authorization this server takes.
const authScheme = "Bearer"

// bearerToken returns the token of an Authorization header of the Bearer
// scheme: the scheme is case-insensitive (RFC 9110, 11.1) and is followed
// by one or more spaces.
func bearerToken(h string) (string, bool) {
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, authScheme) {
		return "", false
	}
	tok := strings.TrimSpace(rest)
	return tok, tok != ""
}

type statusRecorder struct {
	http.ResponseWriter
	srv      *Server
	rid      string // the request id
	role     Role   // the caller's
	req      *http.Request
	rc       http.ResponseController // of the connection's ResponseWriter
	status   int
	bodyDone bool        // the request body was read to its end
	body     trackedBody // the request's body, when it has one (budget.go)
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		r.closeIfUnread()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
		r.closeIfUnread()
	}
	return r.ResponseWriter.Write(b)
}

// closeIfUnread closes the connection after an answer sent before the
// request body was read to its end (a refusal): "Connection: close" makes
// net/http send the answer at once instead of after draining up to 256 KiB
// of the body. When the handler returns, net/http still reads what is left
// of a body of up to 256 KiB (so that closing does not reset a connection
// whose client is still sending and lose the answer); the read deadline
// bounds that to drainGrace, after which the connection is closed.
func (r *statusRecorder) closeIfUnread() {
	if r.req.ContentLength != 0 && r.req.Body != nil && r.req.Body != http.NoBody && !r.bodyDone {
		r.Header().Set("Connection", "close")
		_ = r.rc.SetReadDeadline(time.Now().Add(drainGrace))
	}
}

// drainGrace is how long a refused request's unread body (up to 256 KiB)
// may still arrive before its connection is closed.
const drainGrace = time.Second

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// apiError is an error response.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// writeError answers with e, and the request id when w is the
// statusRecorder of ServeHTTP.
func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, wire.Error{Error: wire.ErrorBody{Code: e.code, Message: e.msg, RequestID: requestID(w)}})
}

// requestID returns the id ServeHTTP gave the request w answers, or "".
func requestID(w http.ResponseWriter) string {
	if rec, ok := w.(*statusRecorder); ok {
		return rec.rid
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"response does not encode"}}`)
	}
	writeBody(w, status, append(b, '\n'))
}

// The values of writeBody's headers, shared by every answer (net/http and
// this package only read header values).
var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
)

// writeBody answers with status and b, a JSON document and its newline.
func writeBody(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Cache-Control"] = headerNoStore
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// storeError maps a library or store error to a response. The store's
// own words (an address, a user name, WRONGPASS) never reach the client:
// they go to the log, under the request id the answer gives.
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error) *apiError {
	switch {
	case errors.Is(err, ontime.ErrNotFound):
		return errorf(http.StatusNotFound, "not_found", "no such timer")
	case errors.Is(err, ontime.ErrExists):
		return errorf(http.StatusConflict, "exists", "a timer with this id exists")
	case errors.Is(err, ontime.ErrInvalid):
		msg := strings.TrimPrefix(err.Error(), ontime.ErrInvalid.Error()+": ")
		return errorf(http.StatusBadRequest, "invalid_request", "%s", msg)
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return errorf(499, "canceled", "request canceled")
	case errors.Is(err, ontimedriver.ErrNotReplicated):
		rid := requestID(w)
		s.log.Warn("publish not acknowledged by enough replicas", "request_id", rid, "err", err)
		return errorf(http.StatusServiceUnavailable, "not_replicated", "written on the primary, but fewer replicas than wait_replicas acknowledged it within wait_timeout; publish it again with the same id (request id %s)", rid)
	}
	rid := requestID(w)
	s.log.Error("store error", "request_id", rid, "method", r.Method, "path", r.URL.Path, "err", err)
	return errorf(http.StatusServiceUnavailable, "store_unavailable", "the store did not answer; the server log has the details (request id %s)", rid)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.Status{Status: "ok"})
}

// readyz answers 200 {"status":"ready"} when the store answers, else 503
// {"status":"unavailable"} with the request id, the store's error going to
// the log. Only a caller with an admin token (auth on) is also told the
// error itself: an anonymous probe learns nothing about the store (its
// address, its user, its password being wrong).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	err := s.o.Client.Ping(ctx)
	if err == nil {
		writeJSON(w, http.StatusOK, s.readiness(w))
		return
	}
	rid := requestID(w)
	s.log.Error("readyz: the store is unreachable", "request_id", rid, "err", err)
	out := wire.Status{Status: "unavailable", RequestID: rid}
	if rec, ok := w.(*statusRecorder); ok && len(s.tokens) > 0 && rec.role == RoleAdmin {
		out.Error = err.Error()
	}
	writeJSON(w, http.StatusServiceUnavailable, out)
}

// readiness is /readyz's answer when the store answers: "ready", or
// "degraded" while the driver reports topics whose calls fail (a Redis
// Cluster master down, until its replica is promoted and the client knows
// it), listed for an admin token only. It stays 200: every instance of the
// server shares the store, so a load balancer that took them all out
// would refuse the topics that work too.
func (s *Server) readiness(w http.ResponseWriter) wire.Status {
	tf, ok := ontimedriver.As[ontimedriver.TopicFaults](s.o.Client.Driver())
	if !ok {
		return wire.Status{Status: "ready"}
	}
	faults := tf.UnavailableTopics()
	if len(faults) == 0 {
		return wire.Status{Status: "ready"}
	}
	out := wire.Status{Status: "degraded"}
	if rec, ok := w.(*statusRecorder); ok && len(s.tokens) > 0 && rec.role == RoleAdmin {
		for _, f := range faults {
			out.UnavailableTopics = append(out.UnavailableTopics, wire.UnavailableTopic{Topic: f.Topic, Since: f.Since.UTC(), Error: f.Err})
		}
	}
	return out
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}
