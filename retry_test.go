package ontime

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBackoffBounds(t *testing.T) {
	p := RetryPolicy{MinDelay: 100 * time.Millisecond, MaxDelay: time.Second, Jitter: 0.2}
	for attempt := 1; attempt <= 40; attempt++ {
		base := 100 * time.Millisecond << min(attempt-1, 20)
		if base > time.Second {
			base = time.Second
		}
		for range 50 {
			d := p.Backoff(attempt)
			lo := time.Duration(float64(base) * 0.8)
			if d < lo || d > time.Second {
				t.Fatalf("attempt %d: backoff %s outside [%s, 1s]", attempt, d, lo)
			}
		}
	}
	exact := RetryPolicy{MinDelay: time.Second, MaxDelay: time.Hour, Jitter: -1}
	if got := exact.Backoff(3); got != 4*time.Second {
		t.Fatalf("no-jitter backoff(3) = %s, want 4s", got)
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
	if !(RetryPolicy{MaxAttempts: 3}).exhausted(3) || (RetryPolicy{MaxAttempts: -1}).exhausted(1000) {
		t.Fatal("exhausted")
	}
}

func TestTopicOptionsValidation(t *testing.T) {
	for _, o := range []TopicOptions{
		{MaxConcurrency: -1},
		{Lease: time.Millisecond},
		{PollInterval: time.Microsecond},
		{Retry: RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Second}},
	} {
		if err := o.withDefaults().validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err = %v", o, err)
		}
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
