package ontimedriver

// Wrapper is implemented by a Driver that wraps another to observe or
// decorate its calls (count them, time them, fail some in a test). Unwrap
// returns the wrapped Driver.
//
// The optional interfaces a store may implement (LegacyPayloads,
// SlowClaims, TopicIndex, TopicIndexRepairer, Recurring, RecurringLister,
// and any added later) are found through the chain of wrappers by As, as
// errors.As finds an error through errors.Unwrap: a wrapper that embeds
// Driver and implements Unwrap hides none of them, without forwarding each
// by hand.
type Wrapper interface {
	Unwrap() Driver
}

// maxWrapDepth bounds the walk of As, so that a wrapper whose Unwrap
// returns itself (a bug) ends the walk instead of hanging.
const maxWrapDepth = 100

// As finds the first Driver in d's chain of wrappers (d, then d.Unwrap(),
// and so on) that implements T, and returns it as a T. It reports false
// when none does. A wrapper that implements T answers for the Driver it
// wraps: it can decorate the capability, or hide it (a TopicIndex whose
// TopicIndexed reports false). The library looks up every optional
// interface this way, so does a caller that needs one:
//
//	if idx, ok := ontimedriver.As[ontimedriver.TopicIndex](d); ok && idx.TopicIndexed() { ... }
func As[T any](d Driver) (T, bool) {
	for range maxWrapDepth {
		if d == nil {
			break
		}
		if t, ok := d.(T); ok {
			return t, true
		}
		w, ok := d.(Wrapper)
		if !ok {
			break
		}
		d = w.Unwrap()
	}
	var zero T
	return zero, false
}

// AcceptsLegacyPayloads reports whether d, or a Driver it wraps, accepts
// payloads written by other programs (see LegacyPayloads).
func AcceptsLegacyPayloads(d Driver) bool {
	lp, ok := As[LegacyPayloads](d)
	return ok && lp.AcceptsLegacyPayloads()
}

// ClaimsAreSlow reports whether d, or a Driver it wraps, says its claims
// are slow next to a quick handler (see SlowClaims).
func ClaimsAreSlow(d Driver) bool {
	s, ok := As[SlowClaims](d)
	return ok && s.SlowClaims()
}

// IndexedTopics returns d's topic index (see TopicIndex) when d, or a
// Driver it wraps, keeps one as configured; ok is false otherwise.
func IndexedTopics(d Driver) (idx TopicIndex, ok bool) {
	idx, ok = As[TopicIndex](d)
	if !ok || !idx.TopicIndexed() {
		return nil, false
	}
	return idx, true
}
