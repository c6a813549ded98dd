package ontime

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy says when a failed timer is tried again and when ontime gives
// up and dead-letters it. The zero value means the defaults.
type RetryPolicy struct {
	// MinDelay is the delay after the first failure. Default 1s.
	MinDelay time.Duration
	// MaxDelay caps the delay. Default 10m. Must be >= MinDelay.
	MaxDelay time.Duration
	// Multiplier grows the delay per attempt. Default 2.
	Multiplier float64
	// Jitter spreads each delay by ±Jitter×delay (0..1). Default 0.2; a
	// negative value means none.
	Jitter float64
	// MaxAttempts is how many deliveries a timer gets before it is
	// dead-lettered. Default 25. A negative value means retry forever.
	MaxAttempts int
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MinDelay == 0 {
		p.MinDelay = time.Second
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = 10 * time.Minute
		if p.MaxDelay < p.MinDelay {
			p.MaxDelay = p.MinDelay
		}
	}
	if p.Multiplier == 0 {
		p.Multiplier = 2
	}
	// A negative Jitter (none) stays negative, so that filling in the
	// defaults twice (TopicOptions, then Backoff) keeps it off.
	if p.Jitter == 0 {
		p.Jitter = 0.2
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 25
	}
	return p
}

// validate checks a policy with its defaults filled in.
func (p RetryPolicy) validate() error {
	switch {
	case p.MinDelay < 0:
		return invalidf("RetryPolicy.MinDelay is negative (%s)", p.MinDelay)
	case p.MaxDelay < p.MinDelay:
		return invalidf("RetryPolicy.MaxDelay (%s) is less than RetryPolicy.MinDelay (%s)", p.MaxDelay, p.MinDelay)
	case p.Multiplier < 1:
		return invalidf("RetryPolicy.Multiplier is %g; it must be >= 1", p.Multiplier)
	case p.Jitter > 1:
		return invalidf("RetryPolicy.Jitter is %g; it must be within 0..1", p.Jitter)
	}
	return nil
}

// Backoff returns the delay before the retry that follows failed attempt
// number attempt (1 for the first delivery).
func (p RetryPolicy) Backoff(attempt int) time.Duration {
	p = p.withDefaults()
	if attempt < 1 {
		attempt = 1
	}
	d := float64(p.MinDelay) * math.Pow(p.Multiplier, float64(attempt-1))
	if d > float64(p.MaxDelay) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(p.MaxDelay)
	}
	if p.Jitter > 0 {
		d *= 1 + p.Jitter*(2*rand.Float64()-1)
	}
	if d > float64(p.MaxDelay) {
		d = float64(p.MaxDelay)
	}
	if d < 0 {
		d = 0
	}
	return time.Duration(d)
}

// exhausted reports whether attempt was the last one allowed.
func (p RetryPolicy) exhausted(attempt int) bool {
	return p.MaxAttempts > 0 && attempt >= p.MaxAttempts
}
