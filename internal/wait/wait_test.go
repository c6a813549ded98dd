package wait_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
)

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestForSeesTheCondition(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	f := &fatalTB{TB: t}
	wait.For(f, 10*time.Second, func() bool { return n.Load() == 3 }, "three")
	if f.msg != "" {
		t.Fatalf("For failed: %s", f.msg)
	}
}

func TestForFailsWithTheState(t *testing.T) {
	t.Parallel()
	f := &fatalTB{TB: t}
	calls := 0
	state := func() string { return "state read at the failure" }
	wait.For(f, 20*time.Millisecond, func() bool { calls++; return false }, "%s of %d (%s)", "nothing", 7, state)
	want := "timed out after 20ms waiting for nothing of 7 (state read at the failure)"
	if f.msg != want {
		t.Fatalf("Fatalf(%q), want %q", f.msg, want)
	}
	if calls < 2 {
		t.Errorf("cond called %d times in 20ms", calls)
	}
}

func TestUntil(t *testing.T) {
	t.Parallel()
	if err := wait.Until(time.Second, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := wait.Until(30*time.Millisecond, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "timed out after 30ms") {
		t.Fatalf("Until = %v", err)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Errorf("gave up after %v, before the timeout", el)
	}
}

func ExampleDescribe() {
	n := 2
	fmt.Println(wait.Describe("%d timers, found %s", 3, func() string { return fmt.Sprint(n) }))
	// Output: 3 timers, found 2
}
