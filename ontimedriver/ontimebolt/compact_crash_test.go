package ontimebolt_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

const envCompactFile = "ONTIMEBOLT_TEST_COMPACT_FILE"

// TestCompactChild is the child of TestCompactCrash: it compacts the file
// and prints "copy" when it starts copying and "done" at the end.
func TestCompactChild(t *testing.T) {
	path := os.Getenv(envCompactFile)
	if path == "" {
		t.Skip("child process of TestCompactCrash")
	}
	o := &ontimebolt.Options{Logger: quiet}
	ontimebolt.SetCompactHook(o, func(stage string) {
		if stage == "copy" {
			fmt.Println("copy")
		}
	})
	if _, _, err := ontimebolt.Compact(path, o); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	fmt.Println("done")
}

// TestCompactCrash kills a child process with SIGKILL in the middle of
// compacting a store (at a spread of moments after it starts copying), and
// checks that the store then opens whole with what it held, and that the
// half-written copy is deleted. The last round is not killed: the file
// shrinks.
func TestCompactCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	src := compactable(t, 60_000)
	d := reopen(t, src, nil)
	want := contents(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	midCopy := 0
	delays := []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond, -1}
	for round, delay := range delays {
		path := fmt.Sprintf("%s/round-%d.db", t.TempDir(), round)
		if err := os.WriteFile(path, orig, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := child(t, "TestCompactChild", envCompactFile, path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("round %d: the child ended before it copied: %v", round, err)
			}
			if line == "copy\n" {
				break
			}
		}
		if delay >= 0 {
			time.Sleep(delay) // the moment to kill at, not a wait for an event
			_ = cmd.Process.Kill()
		}
		rest, _ := io.ReadAll(r)
		err = cmd.Wait()
		var exit *exec.ExitError
		killed := errors.As(err, &exit) && exit.ExitCode() == -1
		switch {
		case delay < 0 && err != nil:
			t.Fatalf("round %d: the child failed: %v", round, err)
		case delay >= 0 && !killed && !strings.Contains(string(rest), "done"):
			t.Fatalf("round %d: the child ended with %v, neither killed nor done", round, err)
		}
		_, statErr := os.Stat(path + ".compacting")
		leftover := statErr == nil
		if killed && leftover {
			midCopy++
		}
		info, _ := os.Stat(path)
		t.Logf("round %d: kill after %v: killed %v, copy left behind %v, file %d KB (was %d KB)", round, delay, killed, leftover, info.Size()>>10, len(orig)>>10)

		d := reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
		if got := contents(t, d); !bytes.Equal(got, want) {
			t.Errorf("round %d: the store holds other contents after the kill", round)
		}
		if _, err := os.Stat(path + ".compacting"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("round %d: Open left the half-written copy: %v", round, err)
		}
		if delay < 0 && info.Size() >= int64(len(orig)) {
			t.Errorf("round %d: the completed compaction left the file at %d bytes (was %d)", round, info.Size(), len(orig))
		}
		_ = d.Close()
	}
	if midCopy == 0 {
		t.Errorf("no kill landed while the copy was being written; the test tested nothing of the middle")
	}
}
