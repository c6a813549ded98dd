package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/cmd/ontime/internal/store"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

func runCLI(t *testing.T, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut apitest.SyncBuffer // go-redis may log into it later (see TestCancelMany)
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	code = Run(context.Background(), args, strings.NewReader(""), &out, &errOut, lookup)
	return code, out.String(), errOut.String()
}

// TestCompactVerb: `ontime compact` shrinks the data directory's store
// after mass cancels and keeps what it holds; it refuses a store in use
// (exit 5) and a directory without one, and finds the directory in
// ONTIME_DATA_DIR.
func TestCompactVerb(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, store.FileName)
	d, err := ontimebolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	for lo := 0; lo < 20000; lo += 1000 {
		var ts []ontimedriver.NewTimer
		for i := lo; i < lo+1000; i++ {
			ids = append(ids, fmt.Sprintf("t%05d", i))
			ts = append(ts, ontimedriver.NewTimer{ID: ids[i], Delay: time.Hour, Payload: bytes.Repeat([]byte("x"), 200)})
		}
		if _, err := d.Schedule(ctx, "jobs", ts, ontimedriver.Upsert); err != nil {
			t.Fatal(err)
		}
	}
	for lo := 0; lo < 19000; lo += 1000 {
		if _, err := d.CancelBatch(ctx, "jobs", ids[lo:lo+1000]); err != nil {
			t.Fatal(err)
		}
	}

	if code, _, stderr := runCLI(t, nil, "compact", "--data-dir", dir, "--wait", "10ms"); code != ExitUnavailable || !strings.Contains(stderr, "ontime serve running") {
		t.Errorf("compact of an open store: exit %d, %q; want %d and a hint", code, stderr, ExitUnavailable)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	code, stdout, stderr := runCLI(t, map[string]string{"ONTIME_DATA_DIR": dir}, "compact")
	if code != ExitOK || !strings.HasPrefix(stdout, "compacted "+path+": ") {
		t.Fatalf("compact: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	after, _ := os.Stat(path)
	t.Logf("%s", strings.TrimSpace(stdout))
	if after.Size() > before.Size()/4 {
		t.Errorf("file %d bytes after compacting, %d before: want a quarter or less", after.Size(), before.Size())
	}
	d, err = ontimebolt.Open(path, &ontimebolt.Options{CheckOnOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if c, err := d.Count(ctx, "jobs"); err != nil || c.Scheduled != 1000 {
		t.Errorf("Count after compact = %+v, %v; want 1000 scheduled", c, err)
	}

	empty := t.TempDir()
	if code, _, stderr := runCLI(t, nil, "compact", "--data-dir", empty); code != ExitError || !strings.Contains(stderr, "no embedded store") {
		t.Errorf("compact of a directory without a store: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(empty, store.FileName)); err == nil {
		t.Error("compact created a store")
	}
	if code, _, stderr := runCLI(t, map[string]string{"ONTIME_REDIS": "redis://127.0.0.1:1"}, "compact"); code != ExitUsage || !strings.Contains(stderr, "Redis") {
		t.Errorf("compact with a Redis store configured: exit %d, %q", code, stderr)
	}
}
