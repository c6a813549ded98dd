package delivery

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/webhook"
)

// Headers of a webhook request, besides the Standard Webhooks ones
// (webhook-id, webhook-timestamp, webhook-signature: package webhook).
// They repeat what the envelope holds, for receivers of raw bodies; only
// the envelope is signed.
const (
	HeaderID            = "Ontime-Id"
	HeaderTopic         = "Ontime-Topic"
	HeaderAttempt       = "Ontime-Attempt"
	HeaderDueAt         = "Ontime-Due-At"
	HeaderCorrelationID = "Ontime-Correlation-Id"
	// HeaderLegacySignature is the earlier signature, sent only with
	// target.legacy_signature: "sha256=" and the hex HMAC-SHA256 of the
	// request body keyed with the first secret's bytes.
	HeaderLegacySignature = "Ontime-Signature"
)

// HTTPOptions configure an HTTPTarget.
type HTTPOptions struct {
	URL string
	// Keys sign each request (webhook-signature); none: unsigned.
	Keys []webhook.Key
	// Payload is config.PayloadEnvelope ("" too) or config.PayloadRaw.
	Payload string
	// Forward lists the timer headers sent as HTTP headers; those
	// config.ForwardRefusal refuses are never sent.
	Forward []string
	// LegacySignature also sends Ontime-Signature.
	LegacySignature bool
	// Headers are added to every request.
	Headers map[string]string
	// Timeout bounds one request; 0 means 10s.
	Timeout time.Duration
	// Log (nil: slog.Default) gets a warning for each listed timer header
	// whose value cannot be sent.
	Log *slog.Logger
	// Now is the clock of webhook-timestamp; nil: time.Now.
	Now func() time.Time
}

// HTTPTarget POSTs each fired timer to a URL, signed by the Standard
// Webhooks specification. A 2xx answer acks the timer; anything else
// (other statuses, redirects, network errors, timeouts) is a failed
// attempt. A 429 or 503 with Retry-After retries after that delay.
type HTTPTarget struct {
	o       HTTPOptions
	forward map[string]bool // canonical names of Forward
	client  *http.Client
}

// NewHTTPTarget returns a webhook target.
func NewHTTPTarget(o HTTPOptions) *HTTPTarget {
	if o.Timeout <= 0 {
		o.Timeout = config.DefaultHTTPTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	t := &HTTPTarget{
		o: o, forward: map[string]bool{},
		client: &http.Client{
			// A redirected POST turns into a GET; treat 3xx as a failure.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	for _, h := range o.Forward {
		if config.ForwardRefusal(h) == "" {
			t.forward[textproto.CanonicalMIMEHeaderKey(h)] = true
		}
	}
	return t
}

// Kind implements Target.
func (t *HTTPTarget) Kind() string { return config.TargetHTTP }

// legacySign returns the Ontime-Signature value of body.
func legacySign(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// body returns the request body and its content type.
func (t *HTTPTarget) body(m *Message) ([]byte, string, error) {
	if t.o.Payload == config.PayloadRaw {
		ct := m.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		return m.Body, ct, nil
	}
	ev := webhook.Event{
		Type: webhook.EventType, Timestamp: m.Due.UTC(),
		Data: wire.NewEvent(m.ID, m.Topic, m.Due, m.Attempt, m.Headers, m.CorrelationID, m.ContentType, m.Body),
	}
	b, err := json.Marshal(ev)
	return b, "application/json", err
}

// Deliver implements Target.
func (t *HTTPTarget) Deliver(ctx context.Context, m *Message) error {
	ctx, cancel := context.WithTimeout(ctx, t.o.Timeout)
	defer cancel()
	body, ct, err := t.body(m)
	if err != nil {
		return ontime.DeadLetter(fmt.Errorf("webhook body: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.o.URL, bytes.NewReader(body))
	if err != nil {
		return ontime.DeadLetter(fmt.Errorf("webhook request: %w", err))
	}
	h := req.Header
	for k, v := range m.Headers {
		if !t.forward[textproto.CanonicalMIMEHeaderKey(k)] {
			continue // documented: only the listed ones
		}
		if !wire.ValidHeaderName(k) || wire.HeaderValueCTL(v) >= 0 {
			// The API refuses such headers; they come from other
			// publishers (the Go library, the compat layout).
			t.o.Log.Warn("timer header is not a valid HTTP field; not sent", "topic", m.Topic, "id", m.ID, "header", k)
			continue
		}
		h.Set(k, v)
	}
	for k, v := range t.o.Headers {
		h.Set(k, v)
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
	id, now := webhook.MessageID(m.Topic, m.ID), t.o.Now()
	if len(t.o.Keys) > 0 {
		webhook.SetHeaders(h, t.o.Keys, id, now, body)
		if t.o.LegacySignature {
			h.Set(HeaderLegacySignature, legacySign(t.o.Keys[0].Bytes(), body))
		}
	} else {
		h.Set(webhook.HeaderID, id)
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
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
