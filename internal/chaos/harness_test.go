//go:build linux

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial of its pool; the outages make many.
	redis.SetLogger(quietLogger{})
	redistest.Main(m)
}

// readmeClient returns a client of the server at addr built exactly as the
// README builds one: no timeouts set, no ContextTimeoutEnabled. The chaos
// tests use it so that what they measure is what a user who copied the
// README gets: every bound on a store call is ontime's own. It is closed
// when t ends.
func readmeClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// buildWorker compiles ./testworker into a temporary directory.
func buildWorker(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "testworker")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/ontime-go/ontime/internal/chaos/testworker")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build testworker: %v\n%s", err, out)
	}
	return bin
}

// proc is one worker process.
type proc struct {
	cmd    *exec.Cmd
	pid    int
	conc   int // its MaxConcurrency
	stderr *os.File
	done   chan struct{} // closed when Wait returned
	killed bool          // SIGKILLed by the test
}

// fleet starts, kills and stops worker processes. Every process it starts
// is killed when the test ends, however it ends; on Linux the kernel also
// kills them if the test binary dies (Pdeathsig).
type fleet struct {
	t    *testing.T
	bin  string
	args []string
	conc int
	dir  string

	mu    sync.Mutex
	procs []*proc
}

func newFleet(t *testing.T, bin string, conc int, args ...string) *fleet {
	f := &fleet{t: t, bin: bin, conc: conc, args: args, dir: t.TempDir()}
	t.Cleanup(f.killAll)
	return f
}

func (f *fleet) start() *proc {
	f.t.Helper()
	args := append([]string{"-concurrency", strconv.Itoa(f.conc)}, f.args...)
	cmd := exec.CommandContext(f.t.Context(), f.bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	errf, err := os.CreateTemp(f.dir, "worker-*.stderr")
	if err != nil {
		f.t.Fatal(err)
	}
	cmd.Stderr = errf
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		errf.Close()
		f.t.Fatalf("start worker: %v", err)
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, conc: f.conc, stderr: errf, done: make(chan struct{})}
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.mu.Unlock()
	// Wait for "ready" (the worker has set up its SIGTERM handler), then
	// drain stdout until it closes, and reap the process.
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		for sc.Scan() {
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	select {
	case ok := <-ready:
		if !ok {
			<-p.done
			f.t.Fatalf("worker %d did not start (%v):\n%s", p.pid, cmd.ProcessState, f.stderrOf(p))
		}
	case <-time.After(30 * time.Second):
		f.t.Fatalf("worker %d did not report ready within 30s", p.pid)
	}
	return p
}

// alive returns the processes that have not exited.
func (f *fleet) alive() []*proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*proc
	for _, p := range f.procs {
		select {
		case <-p.done:
		default:
			out = append(out, p)
		}
	}
	return out
}

// kill SIGKILLs p and waits for it.
func (f *fleet) kill(p *proc) {
	f.mu.Lock()
	p.killed = true
	f.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stopAll stops the live processes gracefully (SIGTERM) and fails the test
// if one does not exit cleanly in time.
func (f *fleet) stopAll(timeout time.Duration) {
	f.t.Helper()
	ps := f.alive()
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(timeout)
	for _, p := range ps {
		select {
		case <-p.done:
			if !p.cmd.ProcessState.Success() {
				f.t.Errorf("worker %d did not stop cleanly on SIGTERM (%v):\n%s", p.pid, p.cmd.ProcessState, f.stderrOf(p))
			}
		case <-deadline:
			f.t.Errorf("worker %d did not stop within %v of SIGTERM", p.pid, timeout)
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
}

func (f *fleet) killAll() {
	for _, p := range f.alive() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		p.stderr.Close()
	}
}

func (f *fleet) stderrOf(p *proc) string {
	b, _ := os.ReadFile(p.stderr.Name())
	if len(b) > 4000 {
		b = append([]byte("...\n"), b[len(b)-4000:]...)
	}
	return string(b)
}

// logStderr logs what the workers wrote to stderr (warnings and errors).
func (f *fleet) logStderr() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		if s := f.stderrOf(p); s != "" {
			f.t.Logf("worker %d (killed %v) stderr:\n%s", p.pid, p.killed, s)
		}
	}
}

func (f *fleet) all() []*proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*proc(nil), f.procs...)
}

// logEntry is one line of the delivery log (see the testworker's package
// documentation for the kinds).
type logEntry struct {
	kind    byte // 'D', 'F', 'A', 'L', 'S', 'R', 'E' or 'X'
	id      string
	attempt int
	pid     int
	extra   string // the rest of the line (S: the settle kind; R, E, L: the error)
}

func readLog(t *testing.T, path string) []logEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read delivery log: %v", err)
	}
	var out []logEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || len(f[0]) != 1 {
			t.Fatalf("delivery log line %d is malformed: %q", n, sc.Text())
		}
		a, err1 := strconv.Atoi(f[2])
		p, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			t.Fatalf("delivery log line %d is malformed: %q", n, sc.Text())
		}
		out = append(out, logEntry{kind: f[0][0], id: f[1], attempt: a, pid: p, extra: strings.Join(f[4:], " ")})
	}
	return out
}

// newStoreClient returns an ontime client (and its driver) on rdb, for the
// test process itself, logging to log (nil: nowhere).
func newStoreClient(t *testing.T, rdb redis.UniversalClient, prefix string, log *slog.Logger) (*ontime.Client, *ontimeredis.Driver) {
	t.Helper()
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: prefix, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	c, err := ontime.NewClient(d, &ontime.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return c, d
}

// waitEmpty waits until topic holds no scheduled or leased timer.
func waitEmpty(t *testing.T, c *ontime.Client, topic string, timeout time.Duration) ontime.Counts {
	t.Helper()
	var last ontime.Counts
	var lastErr error
	wait.For(t, timeout, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		last, lastErr = c.Count(ctx, topic)
		return lastErr == nil && last.Scheduled == 0 && last.Leased == 0
	}, "the store to hold no timer: %s", func() string { return fmt.Sprintf("%+v (err %v)", last, lastErr) })
	return last
}

func fmtDur(d time.Duration) string { return fmt.Sprint(d.Round(time.Millisecond)) }
