package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process owned by a test.
type Server struct {
	// Addr is 127.0.0.1:port. It stays the same across Restart.
	Addr string

	cfg  serverConfig
	port int
	dir  string // working directory (dump and AOF files)
	own  bool   // dir was created by us

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	log    *lockedBuffer
	paused bool
}

// ServerOption configures StartServer.
type ServerOption func(*serverConfig)

type serverConfig struct {
	appendOnly bool
	args       []string
	// conf, if set, is written to redis.conf in the server's directory,
	// which redis-server is started with (and may rewrite).
	conf *string
	// tls, if set, makes the port a TLS port (WithTLS).
	tls *TLSFiles
}

// AppendOnly turns on the append-only file with fsync on every write, so
// Kill and Restart keep every acknowledged write.
func AppendOnly() ServerOption {
	return func(c *serverConfig) { c.appendOnly = true }
}

// Args adds redis-server command-line arguments, such as "--maxmemory",
// "10mb".
func Args(args ...string) ServerOption {
	return func(c *serverConfig) { c.args = append(c.args, args...) }
}

// ConfigFile writes text to redis.conf in the server's directory and starts
// redis-server with that file (before the other arguments, which override
// it). redis-server may rewrite the file: Sentinel and Cluster do.
func ConfigFile(text string) ServerOption {
	return func(c *serverConfig) { c.conf = &text }
}

// StartServer starts a dedicated redis-server for tb, which tb may stop,
// kill, restart or pause. It is stopped when tb ends. StartServer fails tb
// if redis-server cannot be started; it ignores ONTIME_TEST_REDIS_URL.
func StartServer(tb testing.TB, opts ...ServerOption) *Server {
	tb.Helper()
	var cfg serverConfig
	for _, o := range opts {
		o(&cfg)
	}
	s, err := startServer(cfg)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(s.shutdown)
	return s
}

func startServer(cfg serverConfig) (*Server, error) {
	if _, err := lookPath(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s := &Server{cfg: cfg, dir: dir, own: true}
	if cfg.conf != nil {
		if err := os.WriteFile(filepath.Join(dir, "redis.conf"), []byte(*cfg.conf), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("redistest: %w", err)
		}
	}
	// A free port can be taken by someone else between our probe and the
	// server's bind; try a few.
	for range 5 {
		s.port, err = freePort()
		if err != nil {
			break
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) args() []string {
	var a []string
	if s.cfg.conf != nil {
		a = append(a, filepath.Join(s.dir, "redis.conf"))
	}
	a = append(a,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--dir", s.dir,
		"--protected-mode", "no",
		"--loglevel", "warning",
		"--databases", "1",
	)
	if f := s.cfg.tls; f != nil {
		a = append(a, "--port", "0", "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile,
			"--tls-ca-cert-file", f.CAFile, "--tls-auth-clients", "optional")
	}
	if s.cfg.appendOnly {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	return append(a, s.cfg.args...)
}

// start runs the process and waits until it answers PING.
func (s *Server) start() error {
	bin, err := lookPath()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, s.args()...)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = s.dir
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.log, s.paused = cmd, exited, log, false
	s.mu.Unlock()

	if err := waitPing(s.clientOptions(), exited, 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("redistest: redis-server on %s did not come up: %w\n%s", s.Addr, err, log.String())
	}
	return nil
}

// clientOptions are the options of a client of s: its address, and TLS
// with WithTLS.
func (s *Server) clientOptions() *redis.Options {
	o := &redis.Options{Addr: s.Addr}
	if s.cfg.tls != nil {
		o.TLSConfig = s.cfg.tls.ClientConfig()
	}
	return o
}

func waitPing(o *redis.Options, exited <-chan struct{}, timeout time.Duration) error {
	o.MaxRetries, o.DialTimeout, o.ReadTimeout, o.PoolSize = -1, 200*time.Millisecond, time.Second, 1
	c := redis.NewClient(o)
	defer c.Close()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("the process exited")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// URL returns redis://Addr/0 (rediss:// WithTLS).
func (s *Server) URL() string {
	if s.cfg.tls != nil {
		return "rediss://" + s.Addr + "/0"
	}
	return "redis://" + s.Addr + "/0"
}

// NewClient returns a client of s, closed when tb ends. Its options suit
// tests that break the server: short timeouts, and context deadlines
// are honoured.
func (s *Server) NewClient(tb testing.TB) *redis.Client {
	tb.Helper()
	o := s.clientOptions()
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled = time.Second, 2*time.Second, 2*time.Second, true
	c := redis.NewClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// UniversalClient is NewClient as a redis.UniversalClient (see [Topology]).
func (s *Server) UniversalClient(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	return s.NewClient(tb)
}

// Nodes is the server itself (see [Topology]).
func (s *Server) Nodes() []*Server { return []*Server{s} }

// Log returns what the server wrote to stdout and stderr since it last
// started.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	return s.log.String()
}

// Running reports whether the process is alive (it may be paused).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runningLocked()
}

func (s *Server) runningLocked() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Stop shuts the server down with SIGTERM (it saves nothing unless
// AppendOnly) and waits for it. It does nothing if the server is not
// running.
func (s *Server) Stop() { s.signalAndWait(syscall.SIGTERM) }

// Kill kills the server with SIGKILL and waits for it.
func (s *Server) Kill() { s.signalAndWait(syscall.SIGKILL) }

func (s *Server) signalAndWait(sig syscall.Signal) {
	s.mu.Lock()
	if !s.runningLocked() {
		s.mu.Unlock()
		return
	}
	cmd, exited, paused := s.cmd, s.exited, s.paused
	s.paused = false
	s.mu.Unlock()
	_ = cmd.Process.Signal(sig)
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Restart stops the server if it runs and starts it again on the same port
// and directory (with AppendOnly, the data comes back). It panics if the
// server cannot start again; call it from the test goroutine.
func (s *Server) Restart() {
	s.Stop()
	if err := s.start(); err != nil {
		panic(err)
	}
}

// Pause stops the process with SIGSTOP: connections stay open and commands
// hang until Resume.
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runningLocked() && !s.paused {
		_ = s.cmd.Process.Signal(syscall.SIGSTOP)
		s.paused = true
	}
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runningLocked() && s.paused {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		s.paused = false
	}
}

// shutdown kills the process and removes its directory.
func (s *Server) shutdown() {
	s.Kill()
	if s.own {
		_ = os.RemoveAll(s.dir)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Keep the log bounded: a chatty server must not eat the memory.
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
