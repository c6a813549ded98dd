package ontimebolt_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// contents is everything a store holds, as its API reads it, in JSON.
func contents(t *testing.T, d *ontimebolt.Driver) []byte {
	t.Helper()
	topics, err := d.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]v1Topic{}
	for _, topic := range topics {
		var tp v1Topic
		if tp.Counts, err = d.Count(ctx, topic); err != nil {
			t.Fatal(err)
		}
		for cursor := ""; ; {
			p, err := d.List(ctx, topic, ontimedriver.ListOptions{Limit: 1000, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			tp.Timers = append(tp.Timers, p.Timers...)
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		dead, err := d.ListDead(ctx, topic, ontimedriver.ListOptions{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		tp.Dead = dead.Dead
		all[topic] = tp
	}
	b, err := json.Marshal(struct {
		Topics []string
		All    map[string]v1Topic
	}{topics, all})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compactable writes a store of n timers in 4 topics (100-byte payloads,
// due in an hour), a lease and dead letters, and cancels two timers of
// every three; it returns the path, closed.
func compactable(t *testing.T, n int) string {
	t.Helper()
	d, path := open(t, nil)
	payload := bytes.Repeat([]byte("p"), 100)
	var cancel []string
	for lo := 0; lo < n; lo += 1000 {
		var ts []ontimedriver.NewTimer
		for i := lo; i < min(lo+1000, n); i++ {
			id := fmt.Sprintf("timer-%07d", i)
			ts = append(ts, ontimedriver.NewTimer{ID: id, Delay: time.Hour + time.Duration(i)*time.Millisecond, Payload: payload})
			if i%3 != 0 {
				cancel = append(cancel, id)
			}
		}
		schedule(t, d, fmt.Sprintf("topic-%d", lo/1000%4), ts...)
	}
	for lo := 0; lo < len(cancel); lo += 1000 {
		chunk := cancel[lo:min(lo+1000, len(cancel))]
		byTopic := map[string][]string{}
		for _, id := range chunk {
			var i int
			fmt.Sscanf(id, "timer-%d", &i)
			byTopic[fmt.Sprintf("topic-%d", i/1000%4)] = append(byTopic[fmt.Sprintf("topic-%d", i/1000%4)], id)
		}
		for topic, ids := range byTopic {
			if _, err := d.CancelBatch(ctx, topic, ids); err != nil {
				t.Fatal(err)
			}
		}
	}
	schedule(t, d, "live", ontimedriver.NewTimer{ID: "leased", Payload: []byte("l")}, ontimedriver.NewTimer{ID: "dead", Payload: []byte("d")})
	r := claim(t, d, "live", 2, time.Hour)
	for _, c := range r.Timers {
		if c.ID == "dead" {
			settle(t, d, "live", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: c.ID, Token: c.Token}, Kind: ontimedriver.Dead, Reason: "r", Error: "e"})
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCompact: Compact gives the free space back, and the store holds
// what it held, whole.
func TestCompact(t *testing.T) {
	t.Parallel()
	path := compactable(t, 30_000)
	d := reopen(t, path, nil)
	tok := claim(t, d, "live", 1, time.Minute).Timers[0].Token
	settle(t, d, "live", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "leased", Token: tok}, Kind: ontimedriver.Snooze})
	want := contents(t, d)
	sp, err := d.Space()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	before, after, err := ontimebolt.Compact(path, &ontimebolt.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted: %d KB (%d KB free) -> %d KB", before>>10, sp.Free>>10, after>>10)
	if info, _ := os.Stat(path); info.Size() != after || after >= before || after > before-sp.Free/2 {
		t.Errorf("file %d bytes before, %d after (%d free before): want at least half the free space back", before, after, sp.Free)
	}
	if _, err := os.Stat(path + ".compacting"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the compaction's file is left behind: %v", err)
	}
	d = reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
	if got := contents(t, d); !bytes.Equal(got, want) {
		t.Errorf("contents changed by the compaction:\n got %.600s\nwant %.600s", got, want)
	}
	// Lease tokens go on from where they were.
	c := claim(t, d, "live", 1, time.Minute).Timers
	before36, _ := strconv.ParseUint(tok, 36, 64)
	if len(c) != 1 {
		t.Fatalf("claim after the compaction: %+v", c)
	}
	if after36, _ := strconv.ParseUint(c[0].Token, 36, 64); after36 <= before36 {
		t.Errorf("token after the compaction %s, before %s: want a later one", c[0].Token, tok)
	}
}

// TestCompactLocked: Compact refuses a store that is open.
func TestCompactLocked(t *testing.T) {
	t.Parallel()
	_, path := open(t, nil)
	_, _, err := ontimebolt.Compact(path, &ontimebolt.Options{LockTimeout: -1, Logger: quiet})
	if !errors.Is(err, ontimebolt.ErrLocked) {
		t.Fatalf("Compact of an open store: %v, want ErrLocked", err)
	}
}

// TestOpenWhileCompacting: an Open that waits for the lock while Compact
// runs opens the compacted file, not the old one that no name leads to
// once Compact has renamed the copy over it: what it writes is in the
// store.
func TestOpenWhileCompacting(t *testing.T) {
	t.Parallel()
	path := compactable(t, 3000)
	d := reopen(t, path, nil)
	want := contents(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		d   *ontimebolt.Driver
		err error
	}
	opened := make(chan result, 1)
	o := &ontimebolt.Options{Logger: quiet}
	ontimebolt.SetCompactHook(o, func(stage string) {
		if stage == "copy" {
			go func() {
				d, err := ontimebolt.Open(path, &ontimebolt.Options{LockTimeout: time.Minute, Logger: quiet})
				opened <- result{d, err}
			}()
		}
	})
	if _, _, err := ontimebolt.Compact(path, o); err != nil {
		t.Fatal(err)
	}
	r := <-opened
	if r.err != nil {
		t.Fatal(r.err)
	}
	d = r.d
	if got := contents(t, d); !bytes.Equal(got, want) {
		t.Errorf("the store opened during the compaction holds\n%.300s\nwant\n%.300s", got, want)
	}
	schedule(t, d, "after", ontimedriver.NewTimer{ID: "x", Delay: time.Hour})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := reopen(t, path, nil).Get(ctx, "after", "x"); err != nil {
		t.Errorf("a timer written by the Open that waited for the compaction is lost: %v", err)
	}
}

// TestReplaced: a file no name leads to any more is told apart.
func TestReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "a")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ontimebolt.Replaced(path, f) {
		t.Fatal("the file at its own name reported replaced")
	}
	if err := os.WriteFile(path+".new", []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if !ontimebolt.Replaced(path, f) {
		t.Fatal("a file renamed over not reported")
	}
}

// TestOpenSuggestsCompact: Open logs that the file can be compacted when
// more than half of it is free (and more than the hint's size: 64 MB by
// default, 1 byte here), not otherwise.
func TestOpenSuggestsCompact(t *testing.T) {
	t.Parallel()
	path := compactable(t, 6000)
	var logs bytes.Buffer
	o := &ontimebolt.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ontimebolt.SetCompactHint(o, 1)
	d := reopen(t, path, o)
	if !strings.Contains(logs.String(), "ontime compact") {
		t.Errorf("Open of a file mostly free logged %q, want the compact hint", logs.String())
	}
	_ = d.Close()
	if _, _, err := ontimebolt.Compact(path, &ontimebolt.Options{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	reopen(t, path, o)
	if strings.Contains(logs.String(), "ontime compact") {
		t.Errorf("Open of a compacted file logged %q", logs.String())
	}
}
