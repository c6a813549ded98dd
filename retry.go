package ontime

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy says when a failed timer is tried again and when ontime gives
// up and dead-letters it. The zero value means the defaults; a zero field
// means that field's default.
//
// Settings that make no sense are refused when the handler is registered
// (Handle returns an error wrapping [ErrInvalid] that names the field): a
// negative MinDelay, a MaxDelay below MinDelay, a Multiplier below 1, a
// Jitter above 1 and a MaxAttempts below -1 ([RetryForever]).
type RetryPolicy struct {
	// MinDelay is the delay after the first failure. Default 1s.
	MinDelay time.Duration
	// MaxDelay caps the delay. Default 10m (or MinDelay, if that is
	// longer). Must be >= MinDelay.
	MaxDelay time.Duration
	// Multiplier grows the delay per attempt. Default 2. Must be >= 1.
	Multiplier float64
	// Jitter spreads each delay by ±Jitter×delay (0..1); the result is
	// then clamped to [MinDelay, MaxDelay], so jitter never makes a delay
	// shorter than MinDelay or longer than MaxDelay. Default 0.2; a
	// negative value means none.
	Jitter float64
	// MaxAttempts is how many deliveries a timer gets before it is
	// dead-lettered (reason "max_attempts"). Default 25. Zero means the
	// default because it is Go's zero value: a due timer is always
	// delivered at least once, so "no attempts" cannot be expressed.
	// [RetryForever] (-1) never dead-letters for attempts: a timer is
	// retried until its handler succeeds, rejects or dead-letters it; ask
	// for it by name, never by accident. Any other negative value is
	// refused. With a store that keeps no attempt counter (the
	// faststream-compatible Redis layout) every delivery is attempt 1 and
	// MaxAttempts never triggers.
	MaxAttempts int
}

// RetryForever is the [RetryPolicy.MaxAttempts] that never gives up on a
// failing timer: it is retried, with backoff capped at MaxDelay, until its
// handler succeeds, rejects it or dead-letters it.
const RetryForever = -1

// merge fills p's zero fields from def's.
func (p RetryPolicy) merge(def RetryPolicy) RetryPolicy {
	if p.MinDelay == 0 {
		p.MinDelay = def.MinDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = def.MaxDelay
	}
	if p.Multiplier == 0 {
		p.Multiplier = def.Multiplier
	}
	if p.Jitter == 0 {
		p.Jitter = def.Jitter
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = def.MaxAttempts
	}
	return p
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
	case p.MaxAttempts < RetryForever:
		return invalidf("RetryPolicy.MaxAttempts is %d; it must be >= 1, 0 (the default, 25) or RetryForever (-1)", p.MaxAttempts)
	}
	return nil
}

// Backoff returns the delay before the retry that follows failed attempt
// number attempt (1 for the first delivery): MinDelay×Multiplier^(attempt-1),
// spread by the jitter, always within [MinDelay, MaxDelay].
func (p RetryPolicy) Backoff(attempt int) time.Duration {
	p = p.withDefaults()
	if attempt < 1 {
		attempt = 1
	}
	lo, hi := float64(max(p.MinDelay, 0)), float64(max(p.MaxDelay, 0))
	d := lo * math.Pow(p.Multiplier, float64(attempt-1))
	if d > hi || math.IsInf(d, 0) || math.IsNaN(d) {
		d = hi
	}
	if p.Jitter > 0 {
		d *= 1 + p.Jitter*(2*rand.Float64()-1)
	}
	// Clamp after the jitter: MinDelay and MaxDelay are promises. (Checked
	// in this order, a policy that validate refuses, MaxDelay < MinDelay,
	// still gets MaxDelay.)
	d = max(d, lo)
	if d >= hi {
		return max(p.MaxDelay, 0) // exact, and no float overflow near MaxInt64
	}
	return time.Duration(d)
}

// exhausted reports whether attempt was the last one allowed. MaxAttempts
// is >= 1, or RetryForever, once defaults are filled in and validated.
func (p RetryPolicy) exhausted(attempt int) bool {
	return p.MaxAttempts > 0 && attempt >= p.MaxAttempts
}
