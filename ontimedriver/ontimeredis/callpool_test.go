package ontimeredis

import (
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
)

// TestCallPool: calls made one after another run on one pooled
// goroutine, a call that hangs does not hold up the next one, and close
// ends the idle goroutines.
func TestCallPool(t *testing.T) {
	var p callPool
	p.init()
	base := runtime.NumGoroutine()
	goroutines := func() string { return strconv.Itoa(runtime.NumGoroutine()) }

	// Sequential calls: the pooled goroutine is found idle again (a call
	// that comes before it is back waiting starts another, which is
	// allowed; with a pause between calls that is rare).
	for range 200 {
		done := make(chan struct{})
		p.run(func() { close(done) })
		<-done
		time.Sleep(100 * time.Microsecond)
	}
	if n := p.started.Load(); n > 20 {
		t.Fatalf("200 calls one after another started %d goroutines; want them reused", n)
	}

	// A hanging call holds its own goroutine only.
	release := make(chan struct{})
	var hung sync.WaitGroup
	hung.Add(1)
	p.run(func() { defer hung.Done(); <-release })
	ran := make(chan struct{})
	p.run(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a call waited for a hanging one")
	}
	close(release)
	hung.Wait()

	// close ends the idle goroutines.
	p.close()
	wait.For(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= base }, "the pool's goroutines to end (%d before, %s now)", base, goroutines)
	// A call after close still runs.
	after := make(chan struct{})
	p.run(func() { close(after) })
	select {
	case <-after:
	case <-time.After(5 * time.Second):
		t.Fatal("a call after close did not run")
	}
	wait.For(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= base }, "the pool's goroutines to end (%d before, %s now)", base, goroutines)
}
