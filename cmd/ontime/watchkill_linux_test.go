package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/internal/wire"
)

// TestWatchKilled: a SIGKILLed `ontime watch` loses nothing. Its standard
// output is a pipe of one page that the test never reads, so it blocks
// printing the first event it gets (a line longer than the page): that
// event is sent and not confirmed. A second watcher, started then, prints
// every other timer but that one, which its first watcher holds (the
// topic's lease is long, so only the kill can give it back). Killed, the
// first watcher's connection closes and its event comes back at once, as
// attempt 2, to the second watcher. Every timer is printed (lost=0) and
// the store is empty.
func TestWatchKilled(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "ontime.toml")
	if err := os.WriteFile(cfg, []byte("[defaults]\nlease = \"5m\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, nil, "--data-dir", filepath.Join(t.TempDir(), "data"), "--config", cfg)
	a := newAPI(t, s)
	const topic = "killed"

	// The first watcher, printing into a pipe of one page.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Fatal(err)
	}
	var stderr apitest.SyncBuffer
	first := exec.Command(bin, "watch", topic, "--server", s.URL, "--json")
	first.Env = baseEnv()
	childAttr(first)
	first.Stdout, first.Stderr = w, &stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan struct{})
	go func() { _ = first.Wait(); close(exited) }()
	t.Cleanup(func() { _ = first.Process.Kill(); <-exited })
	waitAPI(t, 30*time.Second, "the first watcher", func() bool { return strings.Contains(stderr.String(), "watching "+topic) })

	const n = 30
	body := strings.Repeat("x", 4096)
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"id": fmt.Sprintf("k%02d", i), "body": body, "delay": "1s"}
	}
	a.must(200, "POST", "/v1/topics/"+topic+"/timers:batch", items)

	// It got its first event and blocks printing it: the page is full.
	waitAPI(t, 30*time.Second, "the first watcher blocked on its full pipe", func() bool {
		k, err := unix.IoctlGetInt(int(r.Fd()), unix.TIOCINQ) // FIONREAD: bytes in the pipe
		return err == nil && k >= 4096
	})

	second := watch(t, s, nil, topic, "--json")
	parse := func(l line) wire.Event {
		var ev wire.Event
		if err := json.Unmarshal([]byte(l.text), &ev); err != nil {
			t.Fatalf("the second watcher printed %.80q…: %v", l.text, err)
		}
		return ev
	}
	got := map[string]int{}
	for _, l := range second.waitLines(60*time.Second, n-1) {
		got[parse(l).ID]++
	}
	var held string
	for i := range n {
		if id := fmt.Sprintf("k%02d", i); got[id] == 0 {
			if held != "" {
				t.Fatalf("the second watcher lacks %s and %s; want only the first watcher's one", held, id)
			}
			held = id
		}
	}

	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	lines := second.waitLines(30*time.Second, n)
	back := parse(lines[n-1])
	if back.ID != held || back.Attempt != 2 {
		t.Errorf("after the kill the second watcher printed %s attempt %d; want %s, attempt 2", back.ID, back.Attempt, held)
	}
	// Every timer printed: by the second watcher, or in full by the first
	// before it was killed (the partial line it blocked on is no print).
	seen := map[string]bool{}
	for _, l := range lines {
		seen[parse(l).ID] = true
	}
	rest, _ := io.ReadAll(r)
	printed := strings.Count(string(rest), "\n")
	lost := 0
	for i := range n {
		if !seen[fmt.Sprintf("k%02d", i)] {
			lost++
		}
	}
	dup := len(lines) + printed - len(seen)
	t.Logf("SIGKILLed watcher: lost=%d duplicates=%d (it held %s, which came back as attempt %d)", lost, dup, held, back.Attempt)
	if lost != 0 {
		t.Errorf("lost=%d", lost)
	}
	waitAPI(t, 10*time.Second, "an empty topic", func() bool {
		var p wire.TimerPage
		a.must(200, "GET", "/v1/topics/"+topic+"/timers", nil).decode(t, &p)
		return len(p.Timers) == 0
	})
}
