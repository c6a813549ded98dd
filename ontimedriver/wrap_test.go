package ontimedriver

import "testing"

// store is a Driver (the interface, unimplemented: As never calls it)
// with optional interfaces of its own.
type store struct{ Driver }

func (store) SlowClaims() bool            { return true }
func (store) AcceptsLegacyPayloads() bool { return true }

// wrapper wraps a Driver and unwraps to it.
type wrapper struct{ Driver }

func (w wrapper) Unwrap() Driver { return w.Driver }

// hider wraps a Driver and answers SlowClaims itself: false.
type hider struct{ Driver }

func (h hider) Unwrap() Driver { return h.Driver }
func (hider) SlowClaims() bool { return false }

// loop is a broken wrapper whose Unwrap returns itself.
type loop struct{ Driver }

func (l *loop) Unwrap() Driver { return l }

// nilWrapper unwraps to nothing.
type nilWrapper struct{ Driver }

func (nilWrapper) Unwrap() Driver { return nil }

func TestAs(t *testing.T) {
	s := store{}
	deep := wrapper{wrapper{wrapper{s}}}
	if !ClaimsAreSlow(deep) || !AcceptsLegacyPayloads(deep) {
		t.Error("an optional interface three wrappers down is not found")
	}
	if _, ok := As[TopicIndex](deep); ok {
		t.Error("As found a TopicIndex that nothing in the chain implements")
	}
	if _, ok := IndexedTopics(deep); ok {
		t.Error("IndexedTopics found an index that nothing in the chain keeps")
	}
	// The first in the chain answers: a wrapper can hide a capability.
	if ClaimsAreSlow(wrapper{hider{s}}) {
		t.Error("a wrapper that answers SlowClaims false was passed over")
	}
	if !AcceptsLegacyPayloads(wrapper{hider{s}}) {
		t.Error("a wrapper that answers one interface hid another")
	}
	if ClaimsAreSlow(nil) || ClaimsAreSlow(nilWrapper{}) {
		t.Error("nil, or a wrapper of nil, claims slowly")
	}
	l := &loop{}
	if _, ok := As[SlowClaims](l); ok {
		t.Error("a wrapper that unwraps to itself has no SlowClaims")
	}
}
