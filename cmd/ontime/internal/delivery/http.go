package delivery

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/wire"
)

// Headers of a webhook request.
const (
	HeaderID            = "Ontime-Id"
	HeaderTopic         = "Ontime-Topic"
	HeaderAttempt       = "Ontime-Attempt"
	HeaderDueAt         = "Ontime-Due-At"
	HeaderCorrelationID = "Ontime-Correlation-Id"
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256 of the request
	// body keyed with the target's secret.
	HeaderSignature = "Ontime-Signature"
)

// HTTPTarget POSTs each message body to a URL. A 2xx answer acks the
// timer; anything else (other statuses, redirects, network errors,
// timeouts) is a failed attempt. A 429 or 503 with Retry-After retries
// after that delay.
type HTTPTarget struct {
	url     string
	secret  []byte
	headers map[string]string
	timeout time.Duration
	client  *http.Client
	log     *slog.Logger
}

// NewHTTPTarget returns a webhook target. timeout 0 means 10s; an empty
// secret sends no signature. log (nil: slog.Default) gets a warning for
// each timer header that cannot be sent as an HTTP header.
func NewHTTPTarget(url string, secret []byte, headers map[string]string, timeout time.Duration, log *slog.Logger) *HTTPTarget {
	if timeout <= 0 {
		timeout = config.DefaultHTTPTimeout
	}
	if log == nil {
		log = slog.Default()
	}
	return &HTTPTarget{
		url: url, secret: secret, headers: headers, timeout: timeout, log: log,
		client: &http.Client{
			// A redirected POST turns into a GET; treat 3xx as a failure.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// Kind implements Target.
func (t *HTTPTarget) Kind() string { return config.TargetHTTP }

// Sign returns the signature header value for body.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Deliver implements Target.
func (t *HTTPTarget) Deliver(ctx context.Context, m *Message) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(m.Body))
	if err != nil {
		return ontime.DeadLetter(fmt.Errorf("webhook request: %w", err))
	}
	h := req.Header
	for k, v := range m.Headers {
		switch {
		case !wire.ValidHeaderName(k) || wire.HeaderValueCTL(v) >= 0:
			// The API refuses such headers; they come from other
			// publishers (the Go library, the compat layout).
			t.log.Warn("timer header is not a valid HTTP field; not sent", "topic", m.Topic, "id", m.ID, "header", k)
		case reserved[textproto.CanonicalMIMEHeaderKey(k)] || strings.HasPrefix(textproto.CanonicalMIMEHeaderKey(k), "Ontime-"):
			// Documented: hop-by-hop and framing headers, and Ontime-*,
			// are the target's own.
		default:
			h.Set(k, v)
		}
	}
	for k, v := range t.headers {
		h.Set(k, v)
	}
	ct := m.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("User-Agent", "ontime")
	h.Set(HeaderID, headerSafe(m.ID))
	h.Set(HeaderTopic, m.Topic)
	h.Set(HeaderAttempt, strconv.Itoa(m.Attempt))
	h.Set(HeaderDueAt, m.Due.UTC().Format(time.RFC3339Nano))
	if m.CorrelationID != "" {
		h.Set(HeaderCorrelationID, headerSafe(m.CorrelationID))
	}
	if len(t.secret) > 0 {
		h.Set(HeaderSignature, Sign(t.secret, m.Body))
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("webhook answered %s: %s", resp.Status, strings.TrimSpace(string(snippet)))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if d, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
			return ontime.RetryAfter(d, err)
		}
	}
	return err
}

// retryAfter parses a Retry-After header (seconds or an HTTP date), capped
// at one day.
func retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		d = time.Duration(n) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = max(time.Until(at), 0)
	} else {
		return 0, false
	}
	return min(d, 24*time.Hour), true
}

// reserved headers are never taken from a message.
var reserved = map[string]bool{
	"Host": true, "Content-Length": true, "Content-Type": true, "Transfer-Encoding": true,
	"Connection": true, "Keep-Alive": true, "Upgrade": true, "Te": true, "Trailer": true,
	"Proxy-Authorization": true, "Proxy-Connection": true, "Expect": true,
}

// headerSafe keeps an id usable as a header value: ids are UTF-8 without
// control characters; non-ASCII ids are percent-encoded.
func headerSafe(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			var b strings.Builder
			for j := 0; j < len(s); j++ {
				if c := s[j]; c >= utf8.RuneSelf || c == '%' {
					fmt.Fprintf(&b, "%%%02X", c)
				} else {
					b.WriteByte(c)
				}
			}
			return b.String()
		}
	}
	return s
}
