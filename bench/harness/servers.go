package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// tailBuffer keeps the last bytes a child process wrote, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 16<<10 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-8<<10:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before we bind, so callers retry.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// child is a server process the harness started and must stop.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
	out    *tailBuffer
}

func startChild(cmd *exec.Cmd) (*child, error) {
	c := &child{cmd: cmd, exited: make(chan struct{}), out: &tailBuffer{}}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	setDeathSignal(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *child) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// stop sends sig and waits up to grace before killing.
func (c *child) stop(sig os.Signal, grace time.Duration) {
	if !c.alive() {
		return
	}
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// RedisServer is a redis-server the harness started on a free loopback
// port, with persistence off, in a temporary directory.
type RedisServer struct {
	Addr    string
	Version string
	dir     string
	proc    *child
}

// StartRedis starts redis-server (bin, or "redis-server" from PATH) on a free
// loopback port with RDB and AOF off. extra are more command-line arguments.
func StartRedis(ctx context.Context, bin string, extra ...string) (*RedisServer, error) {
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("redis-server not found: %w", err)
	}
	dir, err := os.MkdirTemp("", "ontime-bench-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			lastErr = err
			break
		}
		args := []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--protected-mode", "no", "--loglevel", "warning", "--databases", "1",
		}
		args = append(args, extra...)
		cmd := exec.Command(path, args...)
		cmd.Dir = dir
		proc, err := startChild(cmd)
		if err != nil {
			lastErr = err
			continue
		}
		s := &RedisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, proc: proc}
		if err := s.waitReady(ctx); err != nil {
			proc.stop(syscall.SIGKILL, time.Second)
			lastErr = fmt.Errorf("%w\n%s", err, proc.out.String())
			continue
		}
		return s, nil
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("start redis-server: %w", lastErr)
}

func (s *RedisServer) waitReady(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, PoolSize: 1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if !s.proc.alive() {
			return errors.New("redis-server exited")
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		info, err := c.Info(pctx, "server").Result()
		cancel()
		if err == nil {
			s.Version = infoField(info, "redis_version")
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop shuts the server down and removes its directory.
func (s *RedisServer) Stop() {
	if s == nil {
		return
	}
	s.proc.stop(syscall.SIGTERM, 5*time.Second)
	_ = os.RemoveAll(s.dir)
}

// infoField returns one "key:value" line of an INFO reply.
func infoField(info, key string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// PostgresServer is a PostgreSQL cluster the harness created with initdb in
// a temporary directory and runs on a free loopback port.
type PostgresServer struct {
	URL     string
	Version string
	dir     string
	proc    *child
}

// pgBinDir finds the directory of initdb and postgres.
func pgBinDir(hint string) (string, error) {
	var cands []string
	if hint != "" {
		cands = append(cands, hint)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		cands = append(cands, filepath.Dir(p))
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(matches) - 1; i >= 0; i-- {
		cands = append(cands, matches[i])
	}
	for _, d := range cands {
		if st, err := os.Stat(filepath.Join(d, "initdb")); err == nil && !st.IsDir() {
			if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
				return d, nil
			}
		}
	}
	return "", errors.New("PostgreSQL binaries (initdb, postgres) not found; set -pg-bin")
}

// StartPostgres runs initdb in a temporary directory and starts postgres on
// a free loopback port, with durability off (fsync, synchronous_commit and
// full_page_writes off), to match a Redis with persistence off. When the
// harness runs as root, the server runs as the "postgres" (or "nobody") user,
// since PostgreSQL refuses to run as root.
func StartPostgres(ctx context.Context, binHint string) (*PostgresServer, error) {
	bin, err := pgBinDir(binHint)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ontime-bench-pg-")
	if err != nil {
		return nil, err
	}
	cred, err := pgCredential(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			lastErr = err
			break
		}
		cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
			"-k", dir, "-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "max_connections=200", "-c", "shared_buffers=256MB")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		proc, err := startChild(cmd)
		if err != nil {
			lastErr = err
			continue
		}
		s := &PostgresServer{
			URL:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
			dir:  dir,
			proc: proc,
		}
		if err := s.waitReady(ctx, port); err != nil {
			proc.stop(syscall.SIGKILL, time.Second)
			lastErr = fmt.Errorf("%w\n%s", err, proc.out.String())
			continue
		}
		if v, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output(); err == nil {
			s.Version = strings.TrimSpace(string(v))
		}
		return s, nil
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("start postgres: %w", lastErr)
}

func (s *PostgresServer) waitReady(ctx context.Context, port int) error {
	deadline := time.Now().Add(20 * time.Second)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for {
		if !s.proc.alive() {
			return errors.New("postgres exited")
		}
		// The server writes "ready to accept connections" when it is.
		if strings.Contains(s.proc.out.String(), "ready to accept connections") {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("postgres did not become ready in 20s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop performs a fast shutdown and removes the cluster.
func (s *PostgresServer) Stop() {
	if s == nil {
		return
	}
	s.proc.stop(syscall.SIGINT, 10*time.Second)
	_ = os.RemoveAll(s.dir)
}

// pgCredential returns the user to run PostgreSQL as (nil: the current one)
// and gives it dir.
func pgCredential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 != nil || err2 != nil {
			continue
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and no postgres or nobody user to run PostgreSQL as")
}

// redisBenchmarkZADD runs redis-benchmark's ZADD test pipelined 16 deep and
// returns its requests per second.
func redisBenchmarkZADD(ctx context.Context, addr string, n int) (float64, string, error) {
	path, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return 0, "", err
	}
	host, port, _ := net.SplitHostPort(addr)
	args := []string{"-h", host, "-p", port, "-P", "16", "-t", "zadd", "-n", strconv.Itoa(n), "-r", "1000000", "-q"}
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	cmdline := "redis-benchmark " + strings.Join(args, " ")
	if err != nil {
		return 0, cmdline, fmt.Errorf("redis-benchmark: %w\n%s", err, out)
	}
	// The -q output ends with lines like "ZADD: 512820.53 requests per second, p50=1.191 msec".
	// Progress lines before it are separated by carriage returns.
	for _, line := range bytes.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
		s := strings.TrimSpace(string(line))
		rest, ok := strings.CutPrefix(s, "ZADD:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) >= 2 && f[1] == "requests" {
			v, err := strconv.ParseFloat(f[0], 64)
			if err == nil {
				return v, cmdline, nil
			}
		}
	}
	return 0, cmdline, fmt.Errorf("redis-benchmark: no ZADD result in output:\n%s", out)
}
