package main_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ptyProc is the binary running with its standard output on a
// pseudo-terminal, as when a person runs it; stderr goes to a buffer.
type ptyProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	master *os.File
	done   chan struct{} // the reader saw the terminal close

	mu  sync.Mutex
	out bytes.Buffer
	err bytes.Buffer
}

// openPTY opens a pseudo-terminal pair (Linux /dev/ptmx).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// startPTY runs the binary with args, its stdout a terminal.
func startPTY(t *testing.T, args ...string) *ptyProc {
	t.Helper()
	return startPTYWith(t, false, args...)
}

// startPTYWith runs the binary with args, its stdout a terminal, and its
// stdin too with stdin set: keys written to master reach it.
func startPTYWith(t *testing.T, stdin bool, args ...string) *ptyProc {
	t.Helper()
	master, slave := openPTY(t)
	p := &ptyProc{t: t, master: master, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = baseEnv()
	childAttr(p.cmd)
	p.cmd.Stdout = slave
	if stdin {
		p.cmd.Stdin = slave
	}
	p.cmd.Stderr = &lockedBuf{mu: &p.mu, b: &p.err}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child has it; the master reads EIO once it exits
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		master.Close()
	})
	return p
}

type lockedBuf struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// wait waits for the process to exit and returns its exit code and what
// it wrote on the terminal.
func (p *ptyProc) wait() (int, string) {
	p.t.Helper()
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Fatal("the terminal did not close after the process exited")
	}
	return p.cmd.ProcessState.ExitCode(), p.output()
}

func (p *ptyProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *ptyProc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err.String()
}

// runPTY runs one CLI verb against s with its stdout a terminal.
func runPTY(t *testing.T, s *srv, args ...string) string {
	t.Helper()
	p := startPTY(t, append(args, "--server", s.URL)...)
	code, out := p.wait()
	if code != 0 {
		t.Fatalf("ontime %v: exit %d\n%s\nstderr: %s", args, code, out, p.stderr())
	}
	return out
}

// hostile is a message body that, printed raw, retitles the terminal
// (OSC 0 … BEL), recolours it (CSI 31 m), moves the cursor with a C1 CSI
// (U+009B) and reverses the line (U+202E).
const hostile = "\x1b]0;pwned\x07\x1b[31mred\u009b2J\u202eevil\x7f"

// escapedHostile is how the CLI prints it on a terminal.
const escapedHostile = `\x1b]0;pwned\x07\x1b[31mred\u009b2J\u202eevil\x7f`

// terminalUnsafe reports the bytes in s a terminal would act on: ESC, BEL,
// DEL, the UTF-8 of U+009B and U+202E.
func terminalUnsafe(s string) []string {
	var bad []string
	for _, seq := range []string{"\x1b", "\x07", "\x7f", "\u009b", "\u202e"} {
		if strings.Contains(s, seq) {
			bad = append(bad, fmt.Sprintf("%q", seq))
		}
	}
	return bad
}

// TestTerminalEscapes: `ontime get`, `ls` and `watch` write a hostile
// body (and an id with a bidirectional override) to a terminal escaped,
// so it cannot act on the terminal; with --raw, or --json, or into a pipe,
// they write its exact bytes.
func TestTerminalEscapes(t *testing.T) {
	t.Parallel()
	s := serve(t, nil, "--data-dir", t.TempDir())
	a := newAPI(t, s)
	const topic = "tty"
	id := "id\u202eevil"
	a.must(201, "POST", "/v1/topics/"+topic+"/timers", map[string]any{"id": id, "body": hostile, "delay": "1h"})

	for _, args := range [][]string{{"get", topic, id}, {"ls", topic}} {
		out := runPTY(t, s, args...)
		if bad := terminalUnsafe(out); len(bad) > 0 {
			t.Errorf("ontime %v on a terminal wrote %v raw:\n%q", args, bad, out)
		}
		if !strings.Contains(out, escapedHostile) {
			t.Errorf("ontime %v on a terminal: the escaped body is missing:\n%q", args, out)
		}
		if !strings.Contains(out, `id\u202eevil`) {
			t.Errorf("ontime %v on a terminal: the escaped id is missing:\n%q", args, out)
		}
		raw := runPTY(t, s, append(args, "--raw")...)
		if !strings.Contains(raw, "\x1b]0;pwned\x07") {
			t.Errorf("ontime %v --raw on a terminal did not keep the bytes:\n%q", args, raw)
		}
		if piped := mustCLI(t, s, nil, args...); !strings.Contains(piped, "\x1b]0;pwned\x07") {
			t.Errorf("ontime %v into a pipe did not keep the bytes:\n%q", args, piped)
		}
	}
	if out := runPTY(t, s, "get", topic, id, "--json"); !strings.Contains(out, `\u001b]0;pwned\u0007`) || strings.Contains(out, `\\x1b`) {
		t.Errorf("ontime get --json on a terminal: want the server's JSON as is:\n%q", out)
	}

	// watch: the timer is due now and printed escaped.
	a.must(204, "DELETE", "/v1/topics/"+topic+"/timers/"+url.PathEscape(id), nil)
	w := startPTY(t, "watch", topic, "--server", s.URL)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(w.stderr(), "watching "+topic) {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not start; stderr:\n%s", w.stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.must(201, "POST", "/v1/topics/"+topic+"/timers", map[string]any{"body": hostile, "delay": "0s"})
	for !strings.Contains(w.output(), "evil") {
		if time.Now().After(deadline) {
			t.Fatalf("watch printed nothing; terminal:\n%q\nstderr:\n%s", w.output(), w.stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = w.cmd.Process.Signal(syscall.SIGINT)
	code, out := w.wait()
	if code != 0 {
		t.Errorf("watch exited %d after SIGINT", code)
	}
	if bad := terminalUnsafe(out); len(bad) > 0 {
		t.Errorf("ontime watch on a terminal wrote %v raw:\n%q", bad, out)
	}
	if !strings.Contains(out, ": "+escapedHostile) {
		t.Errorf("ontime watch on a terminal: want the escaped body:\n%q", out)
	}
}
