package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/delivery"
	"github.com/ontime-go/ontime/cmd/ontime/internal/store"
	"github.com/ontime-go/ontime/internal/activity"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

var spec *apitest.Spec

func TestMain(m *testing.M) {
	var err error
	spec, err = apitest.Load(server.OpenAPI)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	if code == 0 && fullRun() {
		if err := checkCoverage(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: OpenAPI coverage:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is an API on a fresh store (embedded, or Redis with envOpts.redis),
// behind an httptest server.
type env struct {
	t      *testing.T
	url    string
	addr   string // host:port of the server's listener
	hc     *http.Client
	client *ontime.Client
	drv    ontimedriver.Driver
	disp   *delivery.Dispatcher // nil with envOpts.noWorkers
	tr     *apitest.Transport
	logs   *apitest.SyncBuffer // the server's log (JSON lines, level debug)
	srv    *server.Server      // the API handler, for what only it can tell (InflightBytes)
}

type envOpts struct {
	maxBody int64
	tokens  []string
	cfg     *config.Config
	// wrap, if set, wraps the store's driver (to count calls).
	wrap func(ontimedriver.Driver) ontimedriver.Driver
	// redis, if set, is the URL of the Redis store to use instead of a
	// fresh embedded one (with a fresh key prefix).
	redis string
	// layout is the Redis layout with redis ("": native; "compat").
	layout string
	// shards is the Redis store's Options.Shards with redis.
	shards map[string]int
	// noWorkers runs the API without a dispatcher, as the CLI's --redis
	// mode does.
	noWorkers bool
	// readTimeout and maxInflight set the server's Options of the same
	// names (0: the defaults).
	readTimeout time.Duration
	maxInflight int64
	// roleTokens and allowedHosts set the server's Options of the same
	// names.
	roleTokens   []server.Token
	allowedHosts []string
	// minBodyRate sets Options.MinBodyRate (0: the default; -1: none).
	minBodyRate int64
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	logs := &apitest.SyncBuffer{}
	var logTo io.Writer = logs
	if testing.Verbose() {
		logTo = io.MultiWriter(logs, os.Stderr)
	}
	log := slog.New(slog.NewJSONHandler(logTo, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var drv ontimedriver.Driver
	kind := store.KindEmbedded
	if o.redis != "" {
		prefix := fmt.Sprintf("api%d:", time.Now().UnixNano())
		if o.layout == "compat" {
			prefix = "" // fixed key names: give it a redis-server of its own
		}
		st, err := store.OpenRedis(store.RedisOptions{URL: o.redis, Prefix: prefix, Layout: o.layout, Shards: o.shards}, log)
		if err != nil {
			t.Fatal(err)
		}
		drv, kind = st.Driver, store.KindRedis
		t.Cleanup(func() { _ = st.Redis.Close() }) // after the driver's Close below
	} else {
		bolt, err := ontimebolt.Open(filepath.Join(t.TempDir(), "ontime.db"), &ontimebolt.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		drv = bolt
	}
	d := drv
	if o.wrap != nil {
		d = o.wrap(drv)
	}
	rec := activity.New()
	client, err := ontime.NewClient(d, &ontime.Config{Logger: log, MaxBodyBytes: 4 << 20, Hooks: []any{rec}})
	if err != nil {
		t.Fatal(err)
	}
	var disp *delivery.Dispatcher
	if !o.noWorkers {
		cfg := o.cfg
		if cfg == nil {
			cfg = &config.Config{}
		}
		cfg.Fill()
		cfg.DiscoverInterval = config.Duration(50 * time.Millisecond)
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		disp, err = delivery.New(delivery.Options{Client: client, Config: cfg, Logger: log, Hooks: []any{rec}})
		if err != nil {
			t.Fatal(err)
		}
		if err := disp.Start(); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	// The http.Server `ontime serve` runs, on a real loopback listener.
	opts := server.Options{
		Client: client, Dispatcher: disp.API(), StoreKind: kind, MaxBodyBytes: o.maxBody,
		Tokens: o.tokens, RoleTokens: o.roleTokens, AllowedHosts: o.allowedHosts, Logger: log, Done: done,
		ReadTimeout: o.readTimeout, MaxInflightBytes: o.maxInflight, MinBodyRate: o.minBodyRate,
	}
	if !o.noWorkers {
		opts.Activity = rec
	}
	h := server.New(opts)
	ts := httptest.NewUnstartedServer(h)
	ts.Config = server.NewHTTPServer(h, log)
	ts.Start()
	tr := &apitest.Transport{Spec: spec, T: t}
	t.Cleanup(func() {
		recordSeen(tr)
		close(done)
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if disp != nil {
			if err := disp.Shutdown(ctx); err != nil {
				t.Errorf("dispatcher shutdown: %v", err)
			}
		}
		if err := drv.Close(); err != nil {
			t.Errorf("driver close: %v", err)
		}
	})
	return &env{t: t, url: ts.URL, addr: ts.Listener.Addr().String(), hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, client: client, drv: drv, disp: disp, tr: tr, logs: logs, srv: h}
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) json(t *testing.T, v any) {
	t.Helper()
	reflect.ValueOf(v).Elem().SetZero() // no field left over from an earlier answer
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %q does not decode: %v", r.body, err)
	}
}

func (r *response) code() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// do sends a request; body is a string (sent as is) or a value (JSON);
// hdr are header names and values ("Host" sets the Host header).
func (e *env) do(method, path string, body any, hdr ...string) *response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: data}
}

// want checks the status (and the error code for errors).
func (e *env) want(r *response, status int, code string) {
	e.t.Helper()
	if r.status != status || (code != "" && r.code() != code) {
		e.t.Fatalf("got %d %s, want %d %s", r.status, r.body, status, code)
	}
}

// hook is a webhook receiver: it answers each call with status(n), n
// counting calls from 1, and records what it received.
type hook struct {
	*httptest.Server
	t      *testing.T
	status func(n int) int

	mu   sync.Mutex
	reqs []hookReq
}

type hookReq struct {
	header http.Header
	body   []byte
	status int
}

func newHook(t *testing.T, status func(n int) int) *hook {
	h := &hook{t: t, status: status}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		n := len(h.reqs) + 1
		st := h.status(n)
		h.reqs = append(h.reqs, hookReq{header: r.Header.Clone(), body: body, status: st})
		h.mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.reqs)
}

// hookConfig delivers topic to url, signed with secret, giving up after
// maxAttempts attempts spaced 50ms apart.
func hookConfig(topic, url, secret string, maxAttempts int) *config.Config {
	return &config.Config{Topics: map[string]config.Topic{
		topic: {
			Retry: config.Retry{
				MinDelay: config.Duration(50 * time.Millisecond), MaxDelay: config.Duration(50 * time.Millisecond),
				MaxAttempts: config.Attempts(maxAttempts),
			},
			Target: &config.Target{Type: config.TargetHTTP, URL: url, Secret: secret, Timeout: config.Duration(5 * time.Second)},
		},
	}}
}
