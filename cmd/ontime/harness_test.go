package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/internal/server"
)

// bin is the ontime binary the tests run, built once by TestMain.
var (
	bin  string
	spec *apitest.Spec
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	var err error
	if spec, err = apitest.Load(server.OpenAPI); err != nil {
		fmt.Fprintln(os.Stderr, "openapi.json:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "ontime-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "ontime")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool(), append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ontime:", err)
		return 1
	}
	return m.Run()
}

func goTool() string {
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// baseEnv is the test's environment without ONTIME_* variables, so that a
// developer's settings do not leak into the tests.
func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ONTIME_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "GORACE=halt_on_error=1 exitcode=66"), extra...)
}

// line is one line a process printed, with the instant the test read it.
type line struct {
	at   time.Time
	text string
}

// proc is a running ontime process. It is killed at test cleanup if the
// test did not stop it.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	cond   *sync.Cond
	out    []line // stdout lines
	errBuf bytes.Buffer
	closed bool // stdout reached EOF
}

// start runs the binary with args; env adds variables.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: strings.Join(args, " "), done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = baseEnv(env...)
	childAttr(p.cmd)
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.errBuf, cond: p.cond}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			now := time.Now()
			p.mu.Lock()
			p.out = append(p.out, line{at: now, text: sc.Text()})
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		p.mu.Lock()
		p.closed = true
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	go func() {
		<-readDone
		_ = p.cmd.Wait()
		close(p.done)
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	t.Cleanup(func() {
		p.kill()
		if strings.Contains(p.stderr(), "WARNING: DATA RACE") {
			t.Errorf("%s: data race:\n%s", p.name, p.stderr())
		}
	})
	return p
}

type lockedWriter struct {
	mu   *sync.Mutex
	w    io.Writer
	cond *sync.Cond
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.cond.Broadcast()
	return l.w.Write(b)
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errBuf.String()
}

func (p *proc) lines() []line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]line(nil), p.out...)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitFor waits until cond (called with p.mu held) holds, the process
// exits, or the timeout passes; it reports whether cond held.
func (p *proc) waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	stop := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stop.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || p.closed && p.exited() {
			return false
		}
		p.cond.Wait()
	}
}

// waitStderr waits for text on stderr.
func (p *proc) waitStderr(timeout time.Duration, text string) {
	p.t.Helper()
	if !p.waitFor(timeout, func() bool { return strings.Contains(p.errBuf.String(), text) }) {
		p.t.Fatalf("%s: no %q on stderr within %s (exited: %v); stderr:\n%s", p.name, text, timeout, p.exited(), p.stderr())
	}
}

// waitLines waits until stdout has n lines.
func (p *proc) waitLines(timeout time.Duration, n int) []line {
	p.t.Helper()
	if !p.waitFor(timeout, func() bool { return len(p.out) >= n }) {
		p.t.Fatalf("%s: %d lines within %s, want %d (exited: %v):\n%s\nstderr:\n%s", p.name, len(p.lines()), timeout, n, p.exited(), dump(p.lines()), p.stderr())
	}
	return p.lines()
}

func dump(ls []line) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "  [%s] %s\n", l.at.UTC().Format("15:04:05.000"), l.text)
	}
	return b.String()
}

// stop sends sig and waits for the exit; it returns the exit code.
func (p *proc) stop(sig syscall.Signal) int {
	p.t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.kill()
		p.t.Fatalf("%s did not stop within 20s after %v; stderr:\n%s", p.name, sig, p.stderr())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// srv is a running `ontime serve`.
type srv struct {
	*proc
	URL string
}

// servingAddr finds the listen address in the start line, text or JSON.
var servingAddr = regexp.MustCompile(`msg="ontime serving" addr=(\S+)|"msg":"ontime serving","addr":"([^"]+)"`)

// serve starts `ontime serve` on a free port with args and waits until it
// listens.
func serve(t *testing.T, env []string, args ...string) *srv {
	t.Helper()
	p := start(t, env, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	var addr string
	ok := p.waitFor(60*time.Second, func() bool {
		m := servingAddr.FindStringSubmatch(p.errBuf.String())
		if m != nil {
			addr = m[1] + m[2]
		}
		return m != nil
	})
	if !ok {
		t.Fatalf("ontime serve did not start (exited: %v); stderr:\n%s", p.exited(), p.stderr())
	}
	return &srv{proc: p, URL: "http://" + addr}
}

// cli runs one CLI verb against s (if not nil) and returns its output and
// exit code.
func cli(t *testing.T, s *srv, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if s != nil {
		args = append(args, "--server", s.URL)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = baseEnv(env...)
	childAttr(cmd)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("ontime %v: %v", args, err)
	}
	if strings.Contains(e.String(), "WARNING: DATA RACE") {
		t.Errorf("ontime %v: data race:\n%s", args, e.String())
	}
	return o.String(), e.String(), code
}

// mustCLI runs a verb that must succeed.
func mustCLI(t *testing.T, s *srv, env []string, args ...string) string {
	t.Helper()
	out, errOut, code := cli(t, s, env, args...)
	if code != 0 {
		t.Fatalf("ontime %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

// api calls the HTTP API of a server; every answer is checked against
// openapi.json.
type api struct {
	t     *testing.T
	base  string
	hc    *http.Client
	token string
}

func newAPI(t *testing.T, s *srv) *api {
	return &api{t: t, base: s.URL, hc: &http.Client{Transport: &apitest.Transport{Spec: spec, T: t}, Timeout: 30 * time.Second}}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a *answer) code() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code
}

func (a *answer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("answer %s does not decode: %v", a.body, err)
	}
}

// do sends body (a string sent as is, or a value sent as JSON; nil: none).
func (a *api) do(method, path string, body any) *answer {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: data}
}

// must sends a request that must answer status.
func (a *api) must(status int, method, path string, body any) *answer {
	a.t.Helper()
	r := a.do(method, path, body)
	if r.status != status {
		a.t.Fatalf("%s %s: got %d %s, want %d", method, path, r.status, r.body, status)
	}
	return r
}
