// Package redistest gives tests the Redis servers they talk to: the one
// launcher of redis-server for every test of the tree (the library, the
// drivers, the chaos tests and the cmd/ontime module, which may import it
// because its path is under the root module's).
//
// Every test package that uses the shared server calls [Main] (or [Run],
// from a TestMain that does more) and then [NewClient] and [Prefix] in its
// tests:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		rdb := redistest.NewClient(t)
//		prefix := redistest.Prefix(t) // keys of this test start with it
//		...
//	}
//
// If the environment variable ONTIME_TEST_REDIS_URL is set (for example
// redis://127.0.0.1:6379/0), the tests use that server. Otherwise the first
// call starts one redis-server per test binary on a free loopback port, with
// persistence off and its files in a temporary directory; Main stops it when
// the tests end, and on Linux the kernel kills it if the test binary dies
// first. A test that needs Redis fails (it does not skip) when redis-server
// cannot be found or started; benchmarks call [RequireRedis] too.
//
// Tests never FLUSHDB: each one works under its own random key prefix, so
// they can run in parallel against one server.
//
// # Topologies
//
// [StartServer] starts an extra, dedicated server for a test that needs to
// stop, kill, restart or pause it, or to reach it through a [Proxy] that
// partitions or stalls the link. [StartCluster] starts a Redis Cluster of
// such servers (masters, and replicas with [WithReplicas]). Both are a
// [Topology]: a set of [Server] processes a test can break one by one and a
// client of the whole. [StartSentinel] starts a Sentinel setup (a primary,
// its replicas and three sentinels, each a Server, the sentinels started
// with [ConfigFile] and the --sentinel argument).
//
// redis-server missing is a failure, not a skip: `make test` installs it
// (the Makefile's deps target).
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// EnvURL names the environment variable that points the tests at an
// existing Redis server instead of starting one.
const EnvURL = "ONTIME_TEST_REDIS_URL"

// ServerBinary is the redis-server executable StartServer and the shared
// server run. It is looked up in PATH when it has no slash.
var ServerBinary = "redis-server"

var shared struct {
	once sync.Once
	srv  *Server // nil when EnvURL is used
	opts *redis.Options
	url  string
	err  error
}

// Main runs the tests of m, then stops the shared server if one was started,
// and exits with the tests' status. Call it from TestMain.
func Main(m *testing.M, opts ...MainOption) {
	os.Exit(Run(m, opts...))
}

// Run is Main for a TestMain that does more before or after the tests: it
// runs them, stops the shared server and returns the status to exit with.
func Run(m *testing.M, opts ...MainOption) int {
	var cfg mainConfig
	for _, o := range opts {
		o(&cfg)
	}
	code := m.Run()
	stopShared()
	if code == 0 && cfg.leaks {
		if err := goleak.Find(cfg.leakOpts...); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: goroutines leaked after the tests: %v\n", err)
			code = 1
		}
	}
	return code
}

// MainOption configures Main.
type MainOption func(*mainConfig)

type mainConfig struct {
	leaks    bool
	leakOpts []goleak.Option
}

// CheckLeaks makes Main fail the test binary when goroutines are left
// running after the tests passed (go.uber.org/goleak, with opts).
func CheckLeaks(opts ...goleak.Option) MainOption {
	return func(c *mainConfig) { c.leaks, c.leakOpts = true, opts }
}

func stopShared() {
	// Make sure a later ensureShared (there should be none) does not start
	// a server nobody stops.
	shared.once.Do(func() { shared.err = errors.New("redistest: Main has returned") })
	if shared.srv != nil {
		shared.srv.shutdown()
	}
}

// ensureShared starts the shared server (or parses EnvURL) once.
func ensureShared() error {
	shared.once.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			opts, err := redis.ParseURL(u)
			if err != nil {
				shared.err = fmt.Errorf("redistest: %s=%q: %w", EnvURL, u, err)
				return
			}
			shared.opts, shared.url = opts, u
			return
		}
		srv, err := startServer(serverConfig{})
		if err != nil {
			shared.err = err
			return
		}
		shared.srv = srv
		shared.opts = &redis.Options{Addr: srv.Addr}
		shared.url = srv.URL()
	})
	return shared.err
}

func mustShared(tb testing.TB) {
	tb.Helper()
	if err := ensureShared(); err != nil {
		tb.Fatalf("redistest: no Redis server for the tests: %v\n"+
			"Install redis-server (for example apt-get install redis-server) "+
			"or set %s to the URL of a server the tests may write to.", err, EnvURL)
	}
}

// Available reports whether a Redis server is usable for tests, starting the
// shared server if needed, and why not.
func Available() error { return ensureShared() }

// RequireRedis fails tb when no Redis server can be used (make test
// installs redis-server; a benchmark without it fails rather than
// reporting nothing).
func RequireRedis(tb testing.TB) {
	tb.Helper()
	if err := ensureShared(); err != nil {
		tb.Fatalf("redistest: no Redis server: %v", err)
	}
}

// Addr returns host:port of the shared test server.
func Addr(tb testing.TB) string {
	tb.Helper()
	mustShared(tb)
	return shared.opts.Addr
}

// URL returns a redis:// URL of the shared test server.
func URL(tb testing.TB) string {
	tb.Helper()
	mustShared(tb)
	return shared.url
}

// Options returns a copy of the client options of the shared test server.
func Options(tb testing.TB) *redis.Options {
	tb.Helper()
	mustShared(tb)
	o := *shared.opts
	return &o
}

// NewClient returns a new client of the shared test server. It is closed
// when tb ends.
func NewClient(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(Options(tb))
	tb.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		tb.Fatalf("redistest: PING %s: %v", shared.opts.Addr, err)
	}
	return c
}

// Start is NewClient: it makes sure the shared server runs and returns a
// client of it, closed when tb ends.
func Start(tb testing.TB) *redis.Client {
	tb.Helper()
	return NewClient(tb)
}

// Prefix returns a fresh random key prefix such as "t3f9a0c21d4e5:". Keys a
// test writes under it cannot collide with another test's.
func Prefix(tb testing.TB) string {
	tb.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("redistest: random prefix: %v", err)
	}
	return "t" + hex.EncodeToString(b[:]) + ":"
}

// DeleteKeys deletes every key that starts with prefix (SCAN + UNLINK). Tests
// need not call it; it is for the ones that check the whole key space of
// their prefix.
func DeleteKeys(ctx context.Context, c redis.UniversalClient, prefix string) error {
	iter := c.Scan(ctx, 0, EscapeGlob(prefix)+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := c.Unlink(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// Keys returns the keys that start with prefix, unsorted.
func Keys(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	iter := c.Scan(ctx, 0, EscapeGlob(prefix)+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}

// EscapeGlob escapes the characters SCAN MATCH and KEYS treat as pattern
// syntax (* ? [ ] \).
func EscapeGlob(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(b)
}

// lookPath resolves ServerBinary.
func lookPath() (string, error) {
	p, err := exec.LookPath(ServerBinary)
	if err != nil {
		return "", fmt.Errorf("redistest: %s not found: %w", ServerBinary, err)
	}
	return p, nil
}
