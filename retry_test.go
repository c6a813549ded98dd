package ontime

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

// TestBackoffBounds checks every backoff against the exact range the
// policy promises: base×(1±Jitter), clamped to [MinDelay, MaxDelay].
func TestBackoffBounds(t *testing.T) {
	const minD, maxD = 100 * time.Millisecond, time.Second
	p := RetryPolicy{MinDelay: minD, MaxDelay: maxD, Jitter: 0.2}
	var atMin, atMax, between int
	for attempt := 1; attempt <= 40; attempt++ {
		base := minD << min(attempt-1, 20)
		if base > maxD {
			base = maxD
		}
		// The jitter's own range, then the clamp; 1ns of slack for the
		// float rounding of base×0.8 and base×1.2.
		lo := max(time.Duration(float64(base)*0.8)-1, minD)
		hi := min(time.Duration(float64(base)*1.2)+1, maxD)
		for range 200 {
			d := p.Backoff(attempt)
			if d < minD || d > maxD {
				t.Fatalf("attempt %d: backoff %s outside [MinDelay %s, MaxDelay %s]", attempt, d, minD, maxD)
			}
			if d < lo || d > hi {
				t.Fatalf("attempt %d: backoff %s outside the jitter range [%s, %s]", attempt, d, lo, hi)
			}
			switch d {
			case minD:
				atMin++
			case maxD:
				atMax++
			default:
				between++
			}
		}
	}
	// Attempt 1 jitters around MinDelay: the lower half is clamped to it.
	// Late attempts jitter around MaxDelay: the upper half is clamped.
	if atMin == 0 || atMax == 0 || between == 0 {
		t.Fatalf("backoffs at MinDelay %d, at MaxDelay %d, between %d; want some of each", atMin, atMax, between)
	}

	exact := RetryPolicy{MinDelay: time.Second, MaxDelay: time.Hour, Jitter: -1}
	if got := exact.Backoff(3); got != 4*time.Second {
		t.Fatalf("no-jitter backoff(3) = %s, want 4s", got)
	}
	// Huge values neither overflow nor go negative.
	huge := RetryPolicy{MinDelay: time.Hour, MaxDelay: math.MaxInt64, Jitter: 1}
	for _, attempt := range []int{1, 30, 1 << 20} {
		if got := huge.Backoff(attempt); got < time.Hour {
			t.Fatalf("huge policy, attempt %d: backoff %s", attempt, got)
		}
	}
	huge.Jitter = -1
	if got := huge.Backoff(1 << 20); got != math.MaxInt64 {
		t.Fatalf("huge policy, attempt 2^20: backoff %d, want MaxDelay %d", got, int64(math.MaxInt64))
	}
}

func TestRetryPolicyValidation(t *testing.T) {
	cases := []struct {
		p     RetryPolicy
		field string
	}{
		{RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Second}, "MaxDelay"},
		{RetryPolicy{MinDelay: -time.Second}, "MinDelay"},
		{RetryPolicy{Multiplier: 0.5}, "Multiplier"},
		{RetryPolicy{Jitter: 2}, "Jitter"},
		{RetryPolicy{MaxAttempts: -2}, "MaxAttempts"},
	}
	for _, c := range cases {
		err := c.p.withDefaults().validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: err = %v, want ErrInvalid naming %s", c.p, err, c.field)
		}
	}
	if err := (RetryPolicy{}).withDefaults().validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	// MaxAttempts 0 is the default, 25; 1 means a single delivery.
	if got := (RetryPolicy{}).withDefaults().MaxAttempts; got != 25 {
		t.Fatalf("default MaxAttempts = %d, want 25", got)
	}
	one := RetryPolicy{MaxAttempts: 1}.withDefaults()
	if err := one.validate(); err != nil || !one.exhausted(1) {
		t.Fatalf("MaxAttempts 1: validate %v, exhausted(1) %v; want valid and exhausted", err, one.exhausted(1))
	}
	if (RetryPolicy{MaxAttempts: 3}).exhausted(2) || !(RetryPolicy{MaxAttempts: 3}).exhausted(3) {
		t.Fatal("MaxAttempts 3: want exhausted at attempt 3, not 2")
	}
	// RetryForever is accepted and never exhausted.
	forever := RetryPolicy{MaxAttempts: RetryForever}.withDefaults()
	if err := forever.validate(); err != nil || forever.exhausted(1) || forever.exhausted(1<<30) {
		t.Fatalf("RetryForever: validate %v, exhausted %v", err, forever.exhausted(1<<30))
	}
}

func TestTopicOptionsValidation(t *testing.T) {
	for _, o := range []TopicOptions{
		{MaxConcurrency: -1},
		{Lease: time.Millisecond},
		{PollInterval: time.Microsecond},
		{Retry: RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Second}},
		{Retry: RetryPolicy{MaxAttempts: -2}},
	} {
		if err := o.withDefaults().validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err = %v", o, err)
		}
	}
}

// TestHandleRefusesNegativeMaxAttempts: the refusal happens when the
// handler is registered, for the topic's own policy and for a worker-wide
// default policy alike, and names the field.
func TestHandleRefusesNegativeMaxAttempts(t *testing.T) {
	c, err := NewClient(nopDriver{}, &Config{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *Message[string]) error { return nil }
	bad := RetryPolicy{MaxAttempts: -2}
	for name, w := range map[string]*Worker{
		"topic policy":   NewWorker(c, nil),
		"worker default": NewWorker(c, &WorkerConfig{Defaults: TopicOptions{Retry: bad}}),
	} {
		var opts *TopicOptions
		if name == "topic policy" {
			opts = &TopicOptions{Retry: bad}
		}
		err := Handle(w, "t", h, opts)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "RetryPolicy.MaxAttempts") {
			t.Errorf("%s: Handle = %v, want ErrInvalid naming RetryPolicy.MaxAttempts", name, err)
		}
		if err := w.Run(context.Background()); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Run after the refused Handle = %v, want ErrInvalid (no handler registered)", name, err)
		}
	}
}

// TestHealthLogsOncePerChange: the health tracker logs a change of state,
// never a repeated failure or success, and keeps the store's reachability
// and the wake-up subscriptions apart.
func TestHealthLogsOncePerChange(t *testing.T) {
	var buf bytes.Buffer
	var tr healthTracker
	tr.init(slog.New(slog.NewTextHandler(&buf, nil)))
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }
	const n = 50
	boom := errors.New("connection refused")
	for range n {
		tr.fail("claim", boom)
	}
	if h := tr.get(); h.Healthy || h.LastError != boom.Error() || h.Degraded {
		t.Fatalf("after %d failures: %+v; want unhealthy with the error, not degraded", n, h)
	}
	for range n {
		tr.ok()
	}
	if h := tr.get(); !h.Healthy || h.LastError != "" {
		t.Fatalf("after %d successes: %+v; want healthy, no error", n, h)
	}
	if l := lines(); len(l) != 2 || !strings.Contains(l[0], "store unreachable") || !strings.Contains(l[1], "store reachable again") {
		t.Fatalf("%d failures then %d successes logged %d lines, want 2 (unreachable, reachable again):\n%s", n, n, len(l), buf.String())
	}

	// Subscriptions: two topics fail, over and over; successful claims in
	// between leave Healthy alone and log nothing.
	buf.Reset()
	for range n {
		tr.subscribeFailed("a", boom)
		tr.subscribeFailed("b", boom)
		tr.ok()
	}
	h := tr.get()
	if !h.Healthy || !h.Degraded || !strings.Contains(h.DegradedError, boom.Error()) {
		t.Fatalf("subscribe failures: %+v; want healthy and degraded with the error", h)
	}
	for range n {
		tr.subscribed("a")
	}
	if !tr.get().Degraded {
		t.Fatal("one topic of two subscribed again: no longer degraded, want degraded until both are")
	}
	for range n {
		tr.subscribed("b")
	}
	if h := tr.get(); !h.Healthy || h.Degraded || h.DegradedError != "" {
		t.Fatalf("every topic subscribed: %+v; want healthy, not degraded", h)
	}
	if l := lines(); len(l) != 2 || !strings.Contains(l[0], "cannot subscribe") || !strings.Contains(l[1], "wake-up notifications restored") {
		t.Fatalf("%d subscribe failures then successes logged %d lines, want 2:\n%s", n, len(l), buf.String())
	}
}

func TestEncodeBody(t *testing.T) {
	type inv struct {
		URL string `json:"url"`
		N   int    `json:"n"`
	}
	cases := []struct {
		in       any
		body, ct string
	}{
		{"hello", "hello", "text/plain"},
		{[]byte{0, 0xff}, "\x00\xff", ""},
		{nil, "", ""},
		{inv{"a<b>&c", 1}, `{"url":"a<b>&c","n":1}`, "application/json"},
		{map[string]any{"é": "ü"}, `{"é":"ü"}`, "application/json"},
	}
	for _, c := range cases {
		b, ct, err := encodeBody(c.in)
		if err != nil || string(b) != c.body || ct != c.ct {
			t.Errorf("encodeBody(%#v) = %q, %q, %v; want %q, %q", c.in, b, ct, err, c.body, c.ct)
		}
	}
	if _, _, err := encodeBody(func() {}); !errors.Is(err, ErrInvalid) {
		t.Errorf("func body: %v", err)
	}
}
