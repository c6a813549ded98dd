package ontimeredis

import (
	"sync"
	"sync/atomic"
	"time"
)

// callPoolIdle is how long a goroutine of the call pool waits for its next
// call before it ends.
const callPoolIdle = 5 * time.Second

// callPool runs the calls that bounded cannot run on the caller's
// goroutine (a client without ContextTimeoutEnabled, go-redis's default)
// on goroutines kept between calls. A fresh goroutine per call grows its
// stack through go-redis's call path every time: stack copying was 8.5 %
// of the worker process's CPU in the end-to-end benchmark (bench/harness
// BenchmarkE2E/ontime), and the pool took 3-22 % off that process's CPU
// in three interleaved pairs. A call finds an idle goroutine or starts
// one; an idle one ends after callPoolIdle, or when the driver closes. A
// call that hangs holds only its own goroutine.
type callPool struct {
	jobs chan func()   // unbuffered: a send succeeds only to an idle goroutine
	done chan struct{} // closed by close: idle goroutines end
	once sync.Once
	// started counts the goroutines started (tests check the reuse).
	started atomic.Int64
}

func (p *callPool) init() {
	p.jobs = make(chan func())
	p.done = make(chan struct{})
}

// run runs f on an idle goroutine of the pool, or on a new one.
func (p *callPool) run(f func()) {
	select {
	case p.jobs <- f:
	default:
		p.started.Add(1)
		go p.work(f)
	}
}

// work runs f, then the calls handed to it until it has been idle for
// callPoolIdle or the pool is closed.
func (p *callPool) work(f func()) {
	f()
	idle := time.NewTimer(callPoolIdle)
	defer idle.Stop()
	for {
		select {
		case f = <-p.jobs:
			f()
			idle.Reset(callPoolIdle)
		case <-idle.C:
			return
		case <-p.done:
			return
		}
	}
}

// close ends the idle goroutines; calls under way finish first. A call
// made afterwards still runs (on a goroutine that ends after it).
func (p *callPool) close() { p.once.Do(func() { close(p.done) }) }
