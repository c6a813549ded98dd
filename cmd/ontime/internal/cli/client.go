package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/store"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wire"
)

// clientOpts are the flags of every verb that talks to a server or Redis.
type clientOpts struct {
	server      string
	token       string
	redis       string
	redisLayout string
	redisPrefix string
	redisTLS    store.RedisTLS
	json        bool
	timeout     time.Duration
}

func addClientFlags(cmd *cobra.Command, o *clientOpts) {
	f := cmd.Flags()
	f.StringVar(&o.server, "server", "", "server URL (env ONTIME_SERVER; default "+config.DefaultServer+")")
	f.StringVar(&o.token, "token", "", "bearer token (env ONTIME_TOKEN)")
	f.StringVar(&o.redis, "redis", "", "talk straight to Redis at this URL instead of a server (env ONTIME_REDIS)")
	f.StringVar(&o.redisLayout, "redis-layout", "", "with --redis: native or compat (env ONTIME_REDIS_LAYOUT)")
	f.StringVar(&o.redisPrefix, "redis-prefix", "", "with --redis: key prefix (env ONTIME_REDIS_PREFIX)")
	f.StringVar(&o.redisTLS.CAFile, "redis-tls-ca", "", "with a rediss URL: PEM CA certificates to trust (env ONTIME_REDIS_TLS_CA)")
	f.StringVar(&o.redisTLS.CertFile, "redis-tls-cert", "", "with a rediss URL: PEM client certificate (env ONTIME_REDIS_TLS_CERT)")
	f.StringVar(&o.redisTLS.KeyFile, "redis-tls-key", "", "with a rediss URL: PEM key of --redis-tls-cert (env ONTIME_REDIS_TLS_KEY)")
	f.BoolVar(&o.json, "json", false, "print JSON for scripts")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "request timeout")
}

// fill takes unset values from the environment.
func (o *clientOpts) fill(lookup func(string) (string, bool)) {
	get := func(dst *string, key string) {
		if *dst == "" {
			*dst, _ = lookup(key)
		}
	}
	get(&o.server, "ONTIME_SERVER")
	get(&o.token, "ONTIME_TOKEN")
	get(&o.redis, "ONTIME_REDIS")
	get(&o.redisLayout, "ONTIME_REDIS_LAYOUT")
	get(&o.redisPrefix, "ONTIME_REDIS_PREFIX")
	get(&o.redisTLS.CAFile, "ONTIME_REDIS_TLS_CA")
	get(&o.redisTLS.CertFile, "ONTIME_REDIS_TLS_CERT")
	get(&o.redisTLS.KeyFile, "ONTIME_REDIS_TLS_KEY")
	if o.server == "" {
		o.server = config.DefaultServer
	}
	if o.redisLayout == "" {
		o.redisLayout = "native"
	}
}

// apiClient calls the HTTP API, over the network or, with --redis, on an
// in-process API over the Redis store.
type apiClient struct {
	base  string
	token string
	hc    *http.Client
	close func()
	// st is the store in --redis mode (nil against a server).
	st     *store.Store
	client *ontime.Client
}

// connect returns a client for the flags.
func (o *clientOpts) connect(e *env) (*apiClient, error) {
	o.fill(e.lookup)
	if o.redis != "" {
		if err := config.CheckRedisURL(o.redis); err != nil {
			return nil, usageErr("--redis: %v", err)
		}
		log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		store.RouteRedisLogs(log)
		st, err := store.OpenRedis(store.RedisOptions{URL: o.redis, Layout: o.redisLayout, Prefix: o.redisPrefix, TLS: o.redisTLS}, log)
		if err != nil {
			return nil, &exitError{code: ExitUnavailable, err: err}
		}
		client, err := ontime.NewClient(st.Driver, &ontime.Config{Logger: log, MaxBodyBytes: libraryBodyLimit(config.DefaultMaxBodyBytes)})
		if err != nil {
			_ = st.Close()
			return nil, err
		}
		h := server.New(server.Options{Client: client, StoreKind: st.Kind, Logger: log})
		return &apiClient{
			base: "http://ontime.invalid", hc: &http.Client{Transport: handlerTransport{h}, Timeout: o.timeout},
			close: func() { _ = st.Close() }, st: st, client: client,
		}, nil
	}
	u, err := url.Parse(o.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErr("--server %q: want an http:// or https:// URL", o.server)
	}
	return &apiClient{
		base: strings.TrimRight(o.server, "/"), token: o.token,
		hc: &http.Client{Timeout: o.timeout}, close: func() {},
	}, nil
}

// handlerTransport serves requests with an in-process handler.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := &memResponse{header: http.Header{}}
	t.h.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		StatusCode: rec.status, Status: fmt.Sprintf("%d %s", rec.status, http.StatusText(rec.status)),
		Header: rec.header, Body: io.NopCloser(&rec.body), Request: r,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: int64(rec.body.Len()),
	}, nil
}

type memResponse struct {
	header http.Header
	body   bytes.Buffer
	status int
}

func (m *memResponse) Header() http.Header { return m.header }
func (m *memResponse) Write(b []byte) (int, error) {
	if m.status == 0 {
		m.status = http.StatusOK
	}
	return m.body.Write(b)
}
func (m *memResponse) WriteHeader(code int) {
	if m.status == 0 {
		m.status = code
	}
}

// apiErr is an error answer of the API.
type apiErr struct {
	status int
	code   string
	msg    string
}

func (e *apiErr) Error() string {
	if e.code == "" {
		return fmt.Sprintf("server answered %d: %s", e.status, e.msg)
	}
	return fmt.Sprintf("%s (%s)", e.msg, e.code)
}

// exitCode maps an API error to an exit code.
func exitCode(status int) int {
	switch {
	case status == http.StatusNotFound:
		return ExitNotFound
	case status == http.StatusConflict:
		return ExitExists
	case status == http.StatusUnauthorized:
		return ExitUnauthorized
	case status == http.StatusServiceUnavailable || status == http.StatusBadGateway || status == http.StatusGatewayTimeout:
		return ExitUnavailable
	case status >= 400 && status < 500:
		return ExitInvalid
	}
	return ExitError
}

// request builds a request for path (already escaped).
func (c *apiClient) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends a request and decodes a 2xx JSON answer into out (may be nil).
// Errors carry exit codes.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &exitError{code: ExitUnavailable, err: fmt.Errorf("cannot reach %s: %w", c.base, unwrapURLErr(err))}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return &exitError{code: ExitUnavailable, err: err}
	}
	if resp.StatusCode >= 300 {
		return &exitError{code: exitCode(resp.StatusCode), err: decodeAPIErr(resp.StatusCode, data)}
	}
	if out != nil {
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = bytes.TrimSpace(data)
			return nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("the server's answer does not decode: %w", err)
		}
	}
	return nil
}

func decodeAPIErr(status int, data []byte) *apiErr {
	var e wire.Error
	if json.Unmarshal(data, &e) == nil && e.Error.Code != "" {
		return &apiErr{status: status, code: e.Error.Code, msg: e.Error.Message}
	}
	return &apiErr{status: status, msg: strings.TrimSpace(string(data))}
}

func unwrapURLErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// topicPath is /v1/topics/{topic} with the topic escaped.
func topicPath(topic string) string { return "/v1/topics/" + url.PathEscape(topic) }

// redactURL hides a password in a URL for logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
