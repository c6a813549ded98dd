package delivery_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/delivery"
)

// receiver is a webhook endpoint: answer(w, r, n) handles call n (from 1);
// every call is recorded with whether its signature verifies with secret.
type receiver struct {
	*httptest.Server
	secret string
	answer func(w http.ResponseWriter, r *http.Request, n int)

	mu    sync.Mutex
	calls []call
}

type call struct {
	at     time.Time
	header http.Header
	body   []byte
	sigOK  bool
}

func newReceiver(t *testing.T, secret string, answer func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	t.Helper()
	rv := &receiver{secret: secret, answer: answer}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte(rv.secret))
		mac.Write(body)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		rv.mu.Lock()
		rv.calls = append(rv.calls, call{at: at, header: r.Header.Clone(), body: body,
			sigOK: hmac.Equal([]byte(r.Header.Get("Ontime-Signature")), []byte(want))})
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
			"X-Trace": "abc", "X-Tabbed": "a\tb", "X-Utf8": "café",
			"Host": "evil.example", "Ontime-Id": "forged", // reserved: the target's own
			"bad name": "x", "X-Crlf": "a\r\nInjected: yes", // not HTTP fields: refused by the API, skipped here
		},
		CorrelationID: "corr-1", ContentType: "application/json", Body: []byte(`{"order":42}`),
	}
}

// TestHTTPTargetAck: a 2xx acks; the request carries the body, the
// target's and the timer's headers, and a signature the receiver verifies
// with its own HMAC. Headers that are not HTTP fields are skipped with a
// warning naming them; reserved ones are not taken from the timer.
func TestHTTPTargetAck(t *testing.T) {
	t.Parallel()
	rv := newReceiver(t, "s3cret", status(http.StatusAccepted))
	logs := &apitest.SyncBuffer{}
	tg := delivery.NewHTTPTarget(rv.URL, []byte("s3cret"), map[string]string{"X-Static": "yes"}, time.Second,
		slog.New(slog.NewTextHandler(logs, nil)))
	if err := tg.Deliver(t.Context(), testMessage()); err != nil {
		t.Fatalf("a 202 answer: %v", err)
	}
	calls := rv.got()
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	c := calls[0]
	if !c.sigOK {
		t.Errorf("signature %q does not verify", c.header.Get("Ontime-Signature"))
	}
	if got, want := c.header.Get("Ontime-Signature"), delivery.Sign([]byte("s3cret"), []byte(`{"order":42}`)); got != want {
		t.Errorf("signature %q, Sign gives %q", got, want)
	}
	if string(c.body) != `{"order":42}` {
		t.Errorf("body %q", c.body)
	}
	for k, v := range map[string]string{
		"Ontime-Id": "t1", "Ontime-Topic": "hooks", "Ontime-Attempt": "3", "Ontime-Due-At": "2026-11-22T10:15:03Z",
		"Ontime-Correlation-Id": "corr-1", "Content-Type": "application/json",
		"X-Static": "yes", "X-Trace": "abc", "X-Tabbed": "a\tb", "X-Utf8": "café",
	} {
		if got := c.header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if h := c.header.Get("Injected"); h != "" || c.header.Get("X-Crlf") != "" || c.header.Get("Host") == "evil.example" {
		t.Errorf("a bad or reserved timer header was sent: %v", c.header)
	}
	for _, name := range []string{`header="bad name"`, "header=X-Crlf"} {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("no warning naming %s:\n%s", name, logs.String())
		}
	}
	if strings.Contains(logs.String(), "header=Host") || strings.Contains(logs.String(), "header=Ontime-Id") {
		t.Errorf("reserved headers are documented, not warned about:\n%s", logs.String())
	}
}

// TestHTTPTargetFailures: what Deliver returns for answers that are not
// 2xx. The dispatcher test below shows what the worker then does.
func TestHTTPTargetFailures(t *testing.T) {
	t.Parallel()
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		rv := newReceiver(t, "", slow)
		tg := delivery.NewHTTPTarget(rv.URL, nil, nil, 100*time.Millisecond, nil)
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
		tg := delivery.NewHTTPTarget(rv.URL, nil, nil, time.Second, nil)
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
		tg := delivery.NewHTTPTarget(rv.URL, nil, nil, time.Second, nil)
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
		tg := delivery.NewHTTPTarget(rv.URL, nil, nil, time.Second, nil)
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
		tg := delivery.NewHTTPTarget(rv.URL, nil, nil, time.Second, nil)
		err := tg.Deliver(t.Context(), testMessage())
		if err == nil || strings.Contains(err.Error(), "retry after") || !strings.Contains(err.Error(), "500") {
			t.Fatalf("a 500 (Retry-After only counts with 429 and 503): %v", err)
		}
	})
	t.Run("no secret", func(t *testing.T) {
		t.Parallel()
		rv := newReceiver(t, "", status(http.StatusOK))
		tg := delivery.NewHTTPTarget(rv.URL, nil, nil, time.Second, nil)
		if err := tg.Deliver(t.Context(), testMessage()); err != nil {
			t.Fatal(err)
		}
		if sig := rv.got()[0].header.Get("Ontime-Signature"); sig != "" {
			t.Errorf("a target without a secret sent signature %q", sig)
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
			rv := newReceiver(t, "k", func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					c.first(w, r, n)
					return
				}
				w.WriteHeader(http.StatusNoContent)
			})
			cfg := &config.Config{Topics: map[string]config.Topic{"hooks": hookTopic(rv.URL, "k", c.timeout)}}
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
				if a := cl.header.Get("Ontime-Attempt"); a != string(rune('1'+i)) || cl.header.Get("Ontime-Id") != "h1" || !cl.sigOK {
					t.Errorf("call %d: attempt %q, id %q, signature ok %v", i+1, a, cl.header.Get("Ontime-Id"), cl.sigOK)
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
		"signed":   hookTopic("http://127.0.0.1:1/hook", "k", time.Second),
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
