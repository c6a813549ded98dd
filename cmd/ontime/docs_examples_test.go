package main_test

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/ontime-go/ontime/internal/redistest"
)

// tomlBlocks returns the ```toml blocks of a document, in order.
func tomlBlocks(t *testing.T, doc string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", doc))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestServerDocExamples: every TOML example of docs/server.md starts
// `ontime serve` as written (a newcomer copies them): the store and the
// listen address are the only things the test changes, the Redis URL of
// the compat example to a test Redis and the listen address to a free
// loopback port. The webhook secret the example names by secret_env is set
// in the environment, as its text says.
func TestServerDocExamples(t *testing.T) {
	t.Parallel()
	blocks := tomlBlocks(t, "docs/server.md")
	if len(blocks) < 3 {
		t.Fatalf("docs/server.md has %d toml blocks, want at least 3", len(blocks))
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env := []string{"INVOICE_HOOK_SECRET=whsec_" + base64.StdEncoding.EncodeToString(key)}
	for i, b := range blocks {
		t.Run(strings.SplitN(strings.TrimSpace(b), "\n", 2)[0], func(t *testing.T) {
			args := []string{"--data-dir", t.TempDir()}
			if regexp.MustCompile(`(?m)^redis\s*=`).MatchString(b) {
				rs := redistest.StartServer(t)
				b = regexp.MustCompile(`(?m)^redis\s*=.*$`).ReplaceAllString(b, `redis = "`+rs.URL()+`"`)
			}
			path := filepath.Join(t.TempDir(), "ontime.toml")
			if err := os.WriteFile(path, []byte(b), 0o600); err != nil {
				t.Fatal(err)
			}
			s := serve(t, env, append(args, "--config", path)...)
			if code := s.stop(syscall.SIGTERM); code != 0 {
				t.Fatalf("example %d: ontime serve exited %d; stderr:\n%s", i+1, code, s.stderr())
			}
		})
	}
}
