// Package chaos holds ontime's crash and chaos tests: real worker processes
// (the testworker program, built by the tests) SIGKILLed at random moments,
// and a real redis-server killed, restarted and paused (SIGSTOP) under
// load. The tests check the delivery guarantees of docs/guarantees.md: no
// timer whose publish returned success is lost, and every duplicate a kill
// causes is one of the deliveries the killed process had in flight (not
// yet acked by the store), as measured from the workers' delivery logs.
//
// The default `go test` run takes seconds per scenario; the long versions
// run with `-tags stress`. The tests need Linux (signals, Pdeathsig) and a
// redis-server binary.
package chaos
