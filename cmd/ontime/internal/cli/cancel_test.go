package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/cmd/ontime/internal/store"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wire"
)

// TestCancelMany: `ontime cancel TOPIC ID ID...` and --ids-from (a file,
// standard input) cancel every listed timer through timers:cancel, in
// requests of up to server.MaxCancel ids, list the ids not found and exit
// 3 for them; one id keeps the single cancel's output; no id at all is a
// usage error and cancels nothing.
func TestCancelMany(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	prefix := fmt.Sprintf("cancelmany%d:", time.Now().UnixNano())
	st, err := store.OpenRedis(store.RedisOptions{URL: rs.URL(), Prefix: prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	client, err := ontime.NewClient(st.Driver, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	n := server.MaxCancel + 10
	var timers []ontime.Timer
	var lines strings.Builder
	for i := range n {
		id := fmt.Sprintf("f%d", i)
		timers = append(timers, ontime.Timer{ID: id, Delay: time.Hour})
		fmt.Fprintf(&lines, "  %s \n\n", id)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		timers = append(timers, ontime.Timer{ID: id, Delay: time.Hour})
	}
	if _, err := client.PublishBatch(ctx, "t", timers); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) (string, string, int) {
		// Synchronized: go-redis logs through a process-wide logger (the
		// last opened store's), from its pool's dial goroutines, which can
		// write after Run returned.
		var stdout, stderr apitest.SyncBuffer
		args = append(args, "--redis", rs.URL(), "--redis-prefix", prefix)
		code := Run(ctx, args, strings.NewReader(stdin), &stdout, &stderr, func(string) (string, bool) { return "", false })
		return stdout.String(), stderr.String(), code
	}
	count := func() int64 {
		t.Helper()
		c, err := client.Count(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		return c.Scheduled
	}
	total := int64(n + 4)

	if _, errOut, code := run("", "cancel", "t"); code != ExitUsage || !strings.Contains(errOut, "give the ids") {
		t.Errorf("cancel with no id: exit %d, %q; want %d", code, errOut, ExitUsage)
	}
	if _, errOut, code := run("\n \n", "cancel", "t", "--ids-from", "-"); code != ExitUsage || !strings.Contains(errOut, "has no ids") {
		t.Errorf("cancel with an empty --ids-from: exit %d, %q; want %d", code, errOut, ExitUsage)
	}
	if _, _, code := run("", "cancel", "t", "a", ".."); code != ExitInvalid {
		t.Errorf("cancel with an invalid id: exit %d, want %d", code, ExitInvalid)
	}
	if got := count(); got != total {
		t.Fatalf("refused cancels left %d timers, want %d", got, total)
	}

	out, _, code := run("", "cancel", "t", "a")
	if code != 0 || out != "cancelled a\n" {
		t.Errorf("cancel of one id: exit %d, %q", code, out)
	}
	out, errOut, code := run("", "cancel", "t", "b", "nope", "c")
	if code != ExitNotFound || out != "not found nope\ncancelled 2 of 3\n" || !strings.Contains(errOut, "1 of 3 ids not found") {
		t.Errorf("cancel b nope c: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = run("", "cancel", "t", "d", "a", "--json")
	var res struct {
		Topic string `json:"topic"`
		wire.CancelResult
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitNotFound || res.Topic != "t" || res.Cancelled != 1 ||
		len(res.Results) != 2 || res.Results[0].Status != 204 || res.Results[1].Status != 404 {
		t.Errorf("cancel d a --json: exit %d, %s (%v)", code, out, err)
	}
	if got := count(); got != int64(n) {
		t.Fatalf("%d timers left, want %d", got, n)
	}

	// More ids than one request holds from a file (two requests), the
	// rest on standard input.
	all := strings.SplitAfter(lines.String(), "\n\n")
	file := filepath.Join(t.TempDir(), "ids")
	if err := os.WriteFile(file, []byte(strings.Join(all[:n-5], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run("", "cancel", "t", "--ids-from", file)
	if code != 0 || out != fmt.Sprintf("cancelled %d of %d\n", n-5, n-5) {
		t.Errorf("cancel --ids-from FILE: exit %d, %q, %q", code, out, errOut)
	}
	out, errOut, code = run(strings.Join(all[n-5:], ""), "cancel", "t", "--ids-from", "-")
	if code != 0 || out != "cancelled 5 of 5\n" {
		t.Errorf("cancel --ids-from -: exit %d, %q, %q", code, out, errOut)
	}
	if got := count(); got != 0 {
		t.Errorf("%d timers left, want none", got)
	}
}
