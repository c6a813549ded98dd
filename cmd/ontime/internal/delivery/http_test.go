package delivery_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/delivery"
	"github.com/ontime-go/ontime/webhook"
)

// Secrets of the tests: "whsec_" and the base64 of 32 bytes.
const (
	secretNew   = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	secretOld   = "whsec_ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
	secretOther = "whsec_QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl8="
)

// receiver is a webhook endpoint: answer(w, r, n) handles call n (from 1);
// every call is recorded, and its signature checked with
// apitest.CheckStandardWebhook (the specification written independently of
// the server's signing code) when secrets are given.
type receiver struct {
	*httptest.Server
	secrets []string
	answer  func(w http.ResponseWriter, r *http.Request, n int)

	mu    sync.Mutex
	calls []call
}

type call struct {
	at     time.Time
	header http.Header
	body   []byte
	sigErr error // nil: the signature verifies
}

func newReceiver(t *testing.T, secret string, answer func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	t.Helper()
	rv := &receiver{answer: answer}
	if secret != "" {
		rv.secrets = []string{secret}
	}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		var sigErr error
		if rv.secrets != nil {
			sigErr = apitest.CheckStandardWebhook(r.Header, body, rv.secrets, at)
		}
		rv.mu.Lock()
		rv.calls = append(rv.calls, call{at: at, header: r.Header.Clone(), body: body, sigErr: sigErr})
		n := len(rv.calls)
		rv.mu.Unlock()
		rv.answer(w, r, n)
	}))
	t.Cleanup(rv.Close)
	return rv
}

func (rv *receiver) got() []call {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]call(nil), rv.calls...)
}

func status(code int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(code) }
}

// slow answers only when the request is given up (or after a minute).
func slow(w http.ResponseWriter, r *http.Request, _ int) {
	select {
	case <-r.Context().Done():
	case <-time.After(time.Minute):
	}
	w.WriteHeader(http.StatusNoContent)
}

func testMessage() *delivery.Message {
	return &delivery.Message{
		ID: "t1", Topic: "hooks", Due: time.Date(2026, 11, 22, 10, 15, 3, 0, time.UTC), Attempt: 3,
		Headers: map[string]string{
			"X-Trace": "abc", "X-Tabbed": "a\tb", "X-Utf8": "café", "traceparent": "00-4bf9-00f0-01",
			// Published by whoever could publish: never HTTP headers.
			"Authorization": "Bearer stolen", "Cookie": "session=stolen", "X-Forwarded-For": "10.0.0.1",
			"Proxy-Authorization": "Basic eA==", "Forwarded": "for=10.0.0.1", "X-Unlisted": "no",
			"Host": "evil.example", "Ontime-Id": "forged", "Webhook-Signature": "v1,forged", // the target's own
			"bad name": "x", "X-Crlf": "a\r\nInjected: yes", // not HTTP fields: refused by the API, skipped here
		},
		CorrelationID: "corr-1", ContentType: "application/json", Body: []byte(`{"order":42}`),
	}
}

func mustKeys(t *testing.T, secrets string) []webhook.Key {
	t.Helper()
	keys, err := webhook.ParseSecrets(secrets)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// forwarded lists every header testMessage carries: the allow-list of the
// tests, refused names included (they are dropped by the target too, not
// only by the configuration's check).
var forwarded = []string{"x-trace", "X-Tabbed", "X-Utf8", "Traceparent", "X-Crlf", "Authorization", "Cookie",
	"X-Forwarded-For", "Proxy-Authorization", "Forwarded", "Host", "Ontime-Id", "Webhook-Signature"}

// TestHTTPTargetAck: a 2xx acks. The request carries the Standard Webhooks
// headers, signed with both secrets of a rotation (a receiver that knows
// either one verifies it, by an implementation of the specification
// written from its text), the envelope that holds the topic, the id and
// the attempt (changing them breaks the signature), and of the timer's
// headers only the allow-listed ones: Authorization, Cookie, Proxy-*,
// Forwarded and X-Forwarded-* never, nor a header the target sets. A
// captured request replayed more than 5 minutes later is refused.
func TestHTTPTargetAck(t *testing.T) {
	t.Parallel()
	rv := newReceiver(t, secretOld, status(http.StatusAccepted))
	logs := &apitest.SyncBuffer{}
	tg := delivery.NewHTTPTarget(delivery.HTTPOptions{
		URL: rv.URL, Keys: mustKeys(t, secretNew+" "+secretOld), Forward: forwarded,
		Headers: map[string]string{"X-Static": "yes"}, Timeout: time.Second,
		Log: slog.New(slog.NewTextHandler(logs, nil)),
	})
	m := testMessage()
	if err := tg.Deliver(t.Context(), m); err != nil {
		t.Fatalf("a 202 answer: %v", err)
	}
	m.Attempt = 4
	if err := tg.Deliver(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	calls := rv.got()
	if len(calls) != 2 {
		t.Fatalf("%d calls", len(calls))
	}
	c := calls[0]
	if c.sigErr != nil {
		t.Errorf("the receiver that knows the old secret: %v (webhook-signature %q)", c.sigErr, c.header.Get("Webhook-Signature"))
	}
	now := c.at
	if err := apitest.CheckStandardWebhook(c.header, c.body, []string{secretNew}, now); err != nil {
		t.Errorf("the receiver that knows the new secret: %v", err)
	}
	if err := apitest.CheckStandardWebhook(c.header, c.body, []string{secretOther}, now); err == nil {
		t.Error("a receiver with another secret accepted the request")
	}
	if err := apitest.CheckStandardWebhook(c.header, c.body, []string{secretNew}, now.Add(5*time.Minute+2*time.Second)); err == nil {
		t.Error("the request replayed 5 minutes later was accepted")
	}
	if n := len(strings.Fields(c.header.Get("Webhook-Signature"))); n != 2 {
		t.Errorf("webhook-signature %q: want one signature per secret", c.header.Get("Webhook-Signature"))
	}
	if ts, err := strconv.ParseInt(c.header.Get("Webhook-Timestamp"), 10, 64); err != nil || ts < now.Unix()-2 || ts > now.Unix()+1 {
		t.Errorf("webhook-timestamp %q is not now (%d)", c.header.Get("Webhook-Timestamp"), now.Unix())
	}
	id := c.header.Get("Webhook-Id")
	if !strings.HasPrefix(id, "msg_") || strings.Contains(id, ".") || calls[1].header.Get("Webhook-Id") != id {
		t.Errorf("webhook-id %q, then %q: want msg_…, without '.', the same on every attempt", id, calls[1].header.Get("Webhook-Id"))
	}

	// The envelope: what the signature covers.
	var ev struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      struct {
			ID, Topic, CorrelationID string
			Attempt                  int
			DueAt                    time.Time         `json:"due_at"`
			Headers                  map[string]string `json:"headers"`
			ContentType              string            `json:"content_type"`
			Body                     json.RawMessage   `json:"body"`
		} `json:"data"`
	}
	if err := json.Unmarshal(c.body, &ev); err != nil {
		t.Fatalf("body %s: %v", c.body, err)
	}
	d := ev.Data
	if ev.Type != "ontime.timer.fired" || !ev.Timestamp.Equal(m.Due) || d.ID != "t1" || d.Topic != "hooks" || d.Attempt != 3 ||
		!d.DueAt.Equal(m.Due) || d.ContentType != "application/json" || string(d.Body) != `{"order":42}` || d.Headers["Authorization"] != "Bearer stolen" {
		t.Errorf("envelope %s", c.body)
	}
	if ct := c.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	forged := strings.Replace(string(c.body), `"topic":"hooks"`, `"topic":"payroll"`, 1)
	if forged == string(c.body) {
		t.Fatal("the test did not change the topic")
	}
	if err := apitest.CheckStandardWebhook(c.header, []byte(forged), []string{secretNew}, now); err == nil {
		t.Error("the envelope sent to another topic still verifies")
	}
	var ev2 struct {
		Data struct{ Attempt int } `json:"data"`
	}
	if err := json.Unmarshal(calls[1].body, &ev2); err != nil || ev2.Data.Attempt != 4 {
		t.Errorf("second call: attempt %d (%v), want 4", ev2.Data.Attempt, err)
	}

	for k, v := range map[string]string{
		"Ontime-Id": "t1", "Ontime-Topic": "hooks", "Ontime-Attempt": "3", "Ontime-Due-At": "2026-11-22T10:15:03Z",
		"Ontime-Correlation-Id": "corr-1", "X-Static": "yes", "X-Trace": "abc", "X-Tabbed": "a\tb", "X-Utf8": "café",
		"Traceparent": "00-4bf9-00f0-01", "User-Agent": "ontime",
	} {
		if got := c.header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"Authorization", "Cookie", "X-Forwarded-For", "Proxy-Authorization", "Forwarded",
		"X-Unlisted", "Injected", "X-Crlf", "Ontime-Signature"} {
		if v := c.header.Get(k); v != "" {
			t.Errorf("header %s = %q reached the receiver", k, v)
		}
	}
	if c.header.Get("Host") == "evil.example" || r0(c.header, "Webhook-Signature") == "v1,forged" {
		t.Errorf("a reserved timer header was sent: %v", c.header)
	}
	if !strings.Contains(logs.String(), "header=X-Crlf") {
		t.Errorf("no warning naming X-Crlf:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "header=Host") || strings.Contains(logs.String(), "header=Authorization") {
		t.Errorf("refused headers are documented, not warned about:\n%s", logs.String())
	}
}

func r0(h http.Header, k string) string {
	if v := h.Values(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

// TestHTTPTargetRaw: with payload = "raw" the body is the timer's as
// published, still signed (webhook-id binds the topic and the id:
// webhook.MessageID); legacy_signature adds the earlier Ontime-Signature,
// an HMAC of the body keyed with the first secret's bytes; no timer header
// is forwarded by default.
func TestHTTPTargetRaw(t *testing.T) {
	t.Parallel()
	rv := newReceiver(t, secretNew, status(http.StatusOK))
	tg := delivery.NewHTTPTarget(delivery.HTTPOptions{
		URL: rv.URL, Keys: mustKeys(t, secretNew), Payload: config.PayloadRaw, LegacySignature: true,
	})
	if err := tg.Deliver(t.Context(), testMessage()); err != nil {
		t.Fatal(err)
	}
	c := rv.got()[0]
	if c.sigErr != nil {
		t.Errorf("webhook-signature: %v", c.sigErr)
	}
	if string(c.body) != `{"order":42}` || c.header.Get("Content-Type") != "application/json" {
		t.Errorf("body %q, Content-Type %q", c.body, c.header.Get("Content-Type"))
	}
	if id := c.header.Get("Webhook-Id"); id != webhook.MessageID("hooks", "t1") {
		t.Errorf("webhook-id %q, want MessageID(hooks, t1)", id)
	}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secretNew, "whsec_"))
	mac := hmac.New(sha256.New, key)
	mac.Write(c.body)
	if got, want := c.header.Get("Ontime-Signature"), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("Ontime-Signature %q, want %q", got, want)
	}
	for k := range testMessage().Headers {
		if k != "Host" && c.header.Get(k) != "" && !strings.HasPrefix(k, "Ontime-") && !strings.HasPrefix(k, "Webhook-") {
			t.Errorf("timer header %s forwarded without an allow-list", k)
		}
	}
}

// TestHTTPTargetFailures: what Deliver returns for answers that are not
// 2xx. The dispatcher test below shows what the worker then does.
func TestHTTPTargetFailures(t *testing.T) {
	t.Parallel()
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		rv := newReceiver(t, "", slow)
		tg := delivery.NewHTTPTarget(delivery.HTTPOptions{URL: rv.URL, Timeout: 100 * time.Millisecond})
		start := time.Now()
		err := tg.Deliver(t.Context(), testMessage())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a receiver slower than the timeout: %v, want a deadline error", err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("Deliver took %s with a 100ms timeout", took)
		}
	})
	t.Run("redirect", func(t *testing.T) {
		t.Parallel()
		elsewhere := newReceiver(t, "", status(http.StatusNoContent))
		rv := newReceiver(t, "", func(w http.ResponseWriter, r *http.Request, _ int) {
			http.Redirect(w, r, elsewhere.URL, http.StatusFound)
		})
		tg := delivery.NewHTTPTarget(delivery.HTTPOptions{URL: rv.URL, Timeout: time.Second})
		err := tg.Deliver(t.Context(), testMessage())
		if err == nil || !strings.Contains(err.Error(), "302") {
			t.Fatalf("a 302: %v, want an error naming 302", err)
		}
		if n := len(elsewhere.got()); n != 0 {
			t.Errorf("the redirect was followed (%d calls)", n)
		}
	})
	t.Run("503 with Retry-After", func(t *testing.T) {
		t.Parallel()
		rv := newReceiver(t, "", func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "7")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		})
		tg := delivery.NewHTTPTarget(delivery.HTTPOptions{URL: rv.URL, Timeout: time.Second})
		err := tg.Deliver(t.Context(), testMessage())
		if err == nil || !strings.Contains(err.Error(), "retry after 7s") || !strings.Contains(err.Error(), "503") {
			t.Fatalf("a 503 with Retry-After: 7: %v, want a retry after 7s", err)
		}
	})
	t.Run("429 with an HTTP date", func(t *testing.T) {
		t.Parallel()
		rv := newReceiver(t, "", func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
		})
		tg := delivery.NewHTTPTarget(delivery.HTTPOptions{URL: rv.URL, Timeout: time.Second})
		err := tg.Deliver(t.Context(), testMessage())
		if err == nil || !strings.Contains(err.Error(), "retry after 59m") {
			t.Fatalf("a 429 with a Retry-After date an hour away: %v", err)
		}
	})
	t.Run("500 with Retry-After", func(t *testing.T) {
		t.Parallel()
		rv := newReceiver(t, "", func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusInternalServerError)
		})
		tg := delivery.NewHTTPTarget(delivery.HTTPOptions{URL: rv.URL, Timeout: time.Second})
		err := tg.Deliver(t.Context(), testMessage())
		if err == nil || strings.Contains(err.Error(), "retry after") || !strings.Contains(err.Error(), "500") {
			t.Fatalf("a 500 (Retry-After only counts with 429 and 503): %v", err)
		}
	})
	t.Run("no secret", func(t *testing.T) {
		t.Parallel()
		rv := newReceiver(t, "", status(http.StatusOK))
		tg := delivery.NewHTTPTarget(delivery.HTTPOptions{URL: rv.URL, Timeout: time.Second})
		if err := tg.Deliver(t.Context(), testMessage()); err != nil {
			t.Fatal(err)
		}
		h := rv.got()[0].header
		if sig := h.Get("Webhook-Signature") + h.Get("Ontime-Signature"); sig != "" {
			t.Errorf("a target without a secret sent signature %q", sig)
		}
		if h.Get("Webhook-Id") == "" || h.Get("Webhook-Timestamp") == "" {
			t.Errorf("a target without a secret sent no webhook-id or webhook-timestamp: %v", h)
		}
	})
}

// hookTopic is a topic delivered to url, retried every 50ms up to 5 times.
func hookTopic(url, secret string, timeout time.Duration) config.Topic {
	return config.Topic{
		Retry: config.Retry{
			MinDelay: config.Duration(50 * time.Millisecond), MaxDelay: config.Duration(50 * time.Millisecond), MaxAttempts: 5,
		},
		Target: &config.Target{Type: config.TargetHTTP, URL: url, Secret: secret, Timeout: config.Duration(timeout)},
	}
}

// TestHTTPTargetRetries runs each failing first answer through a real
// dispatcher and store: the timer is retried (the second call carries
// Ontime-Attempt 2), then acked by a 2xx, never dropped; a 503 with
// Retry-After waits that long although the topic's policy says 50ms.
func TestHTTPTargetRetries(t *testing.T) {
	t.Parallel()
	elsewhere := newReceiver(t, "", status(http.StatusNoContent))
	t.Cleanup(func() { // after the parallel subtests
		if n := len(elsewhere.got()); n != 0 {
			t.Errorf("a redirect was followed (%d calls)", n)
		}
	})
	for _, c := range []struct {
		name    string
		first   func(http.ResponseWriter, *http.Request, int)
		logged  string
		minGap  time.Duration
		timeout time.Duration
	}{
		{"slow", slow, "context deadline exceeded", 0, 200 * time.Millisecond},
		{"redirect", func(w http.ResponseWriter, r *http.Request, _ int) {
			http.Redirect(w, r, elsewhere.URL, http.StatusFound)
		}, "302", 0, time.Second},
		{"retry-after", func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, "retry after 1s", time.Second, time.Second},
		{"500", status(http.StatusInternalServerError), "500", 0, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rv := newReceiver(t, secretNew, func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					c.first(w, r, n)
					return
				}
				w.WriteHeader(http.StatusNoContent)
			})
			cfg := &config.Config{Topics: map[string]config.Topic{"hooks": hookTopic(rv.URL, secretNew, c.timeout)}}
			d, client, logs := newDispatcherWith(t, cfg, nil)
			if _, err := client.Publish(t.Context(), "hooks", "x", ontime.WithID("h1")); err != nil {
				t.Fatal(err)
			}
			waitCount(t, client, "hooks", 0)
			calls := rv.got()
			if len(calls) != 2 {
				t.Fatalf("%d calls, want 2 (a failure, then the ack)", len(calls))
			}
			for i, cl := range calls {
				if a := cl.header.Get("Ontime-Attempt"); a != string(rune('1'+i)) || cl.header.Get("Ontime-Id") != "h1" || cl.sigErr != nil {
					t.Errorf("call %d: attempt %q, id %q, signature: %v", i+1, a, cl.header.Get("Ontime-Id"), cl.sigErr)
				}
			}
			if gap := calls[1].at.Sub(calls[0].at); gap < c.minGap {
				t.Errorf("the retry came %s after the first call; want at least %s", gap, c.minGap)
			}
			if !strings.Contains(logs.String(), `msg="delivery failed" topic=hooks id=h1`) || !strings.Contains(logs.String(), c.logged) {
				t.Errorf("no failure naming %q logged:\n%s", c.logged, logs.String())
			}
			n, err := client.Count(t.Context(), "hooks")
			if err != nil || n.Dead != 0 {
				t.Errorf("count %+v, %v: want no dead letter", n, err)
			}
			if ct := d.Counters(); ct.Failed != 1 || ct.Delivered != 1 {
				t.Errorf("counters %+v, want 1 failed, 1 delivered", ct)
			}
		})
	}
}

// TestUnsignedTargetWarns: an http target without a secret is named in a
// warning when the dispatcher starts; one with a secret is not.
func TestUnsignedTargetWarns(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Topics: map[string]config.Topic{
		"unsigned": hookTopic("http://127.0.0.1:1/hook", "", time.Second),
		"signed":   hookTopic("http://127.0.0.1:1/hook", secretNew, time.Second),
		"logged":   {},
	}}
	_, _, logs := newDispatcherWith(t, cfg, nil)
	out := logs.String()
	if !strings.Contains(out, `level=WARN msg="http target has no secret`) || !strings.Contains(out, "topic=unsigned") {
		t.Errorf("no warning for the unsigned target:\n%s", out)
	}
	if strings.Contains(out, "topic=signed") || strings.Contains(out, "topic=logged") {
		t.Errorf("a warning for a target that signs or is not http:\n%s", out)
	}
}

// BenchmarkHTTPTarget: one signed delivery to a loopback receiver that
// answers 204, with a 1 KiB JSON body: payload = "raw" (the body signed as
// is) against "envelope" (the body wrapped in the signed JSON envelope).
//
//	go test -run '^$' -bench HTTPTarget -benchmem ./cmd/ontime/internal/delivery/
func BenchmarkHTTPTarget(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	keys, err := webhook.ParseSecrets(secretNew)
	if err != nil {
		b.Fatal(err)
	}
	m := testMessage()
	m.Body = []byte(`{"data":"` + strings.Repeat("x", 1010) + `"}`)
	for _, payload := range []string{config.PayloadRaw, config.PayloadEnvelope} {
		b.Run(payload, func(b *testing.B) {
			tg := delivery.NewHTTPTarget(delivery.HTTPOptions{URL: srv.URL, Keys: keys, Payload: payload, Log: slog.New(slog.DiscardHandler)})
			b.ReportAllocs()
			for b.Loop() {
				if err := tg.Deliver(context.Background(), m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
