package ontimeredis

import (
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
)

// TestCallPool: calls made one after another run on one pooled
// goroutine, a call that hangs does not hold up the next one, and close
// ends the idle goroutines. In a bubble (testing/synctest): synctest.Wait
// is the event that the pooled goroutine is back waiting, however busy the
// machine.
func TestCallPool(t *testing.T) {
	synctest.Test(t, testCallPool)
}

func testCallPool(t *testing.T) {
	var p callPool
	p.init()
	base := runtime.NumGoroutine()
	goroutines := func() string { return strconv.Itoa(runtime.NumGoroutine()) }

	// Sequential calls: the pooled goroutine is found idle again (a call
	// that comes before it is back waiting starts another, which is
	// allowed; here each call waits until it is).
	for range 200 {
		done := make(chan struct{})
		p.run(func() { close(done) })
		<-done
		synctest.Wait()
	}
	if n := p.started.Load(); n != 1 {
		t.Fatalf("200 calls one after another, each made once the last had ended, started %d goroutines; want one, reused", n)
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
