// Package wait is the one helper the project's tests use to wait for a
// condition: poll it until it holds, fail the test if it does not within a
// timeout. Tests wait for the event that proves a thing this way, never for
// a fixed sleep.
//
// It lives under the root module's internal directory, so every module of
// the tree (cmd/ontime, ontimeprom, ...) can import it from its tests; the
// exported drivertest.WaitFor is a thin wrapper of it for driver authors.
package wait

import (
	"fmt"
	"testing"
	"time"
)

// Polling starts at minPoll and doubles up to maxPoll: a condition that
// holds soon is seen soon, and a long wait on a busy machine does not
// spin.
const (
	minPoll = time.Millisecond
	maxPoll = 20 * time.Millisecond
)

// For calls cond until it returns true. If it has not within timeout, For
// fails tb with Fatalf: "timed out after <timeout> waiting for <what>",
// what formatted with args as by fmt.Sprintf. An argument that is a
// func() string is called only then, so that the message can show what
// was found instead (a counter's value, the keys there are). Call For from
// the test's goroutine, as Fatalf requires.
func For(tb testing.TB, timeout time.Duration, cond func() bool, what string, args ...any) {
	tb.Helper()
	if err := Until(timeout, cond); err != nil {
		tb.Fatalf("%v waiting for %s", err, Describe(what, args...))
	}
}

// Until calls cond until it returns true and returns nil, or returns an
// error ("timed out after <timeout>") when cond has not held within
// timeout. It is For for code that must not fail the test itself (a
// goroutine other than the test's, a check that reports with Errorf).
func Until(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	poll := minPoll
	for !cond() {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("timed out after %v", timeout)
		}
		time.Sleep(min(poll, max(time.Until(deadline), 0)+time.Millisecond))
		poll = min(2*poll, maxPoll)
	}
	return nil
}

// Describe formats what with args as For does: an argument that is a
// func() string is replaced by what it returns.
func Describe(what string, args ...any) string {
	if len(args) == 0 {
		return what
	}
	vals := make([]any, len(args))
	for i, a := range args {
		if f, ok := a.(func() string); ok {
			vals[i] = f()
		} else {
			vals[i] = a
		}
	}
	return fmt.Sprintf(what, vals...)
}
