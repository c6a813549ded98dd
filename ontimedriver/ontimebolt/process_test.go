package ontimebolt_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// Child processes are this test binary run again with one test selected and
// an environment variable naming the file.
const (
	envCrashFile = "ONTIMEBOLT_TEST_CRASH_FILE"
	envLockFile  = "ONTIMEBOLT_TEST_LOCK_FILE"
)

func child(t *testing.T, name, env, path string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), env+"="+path)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestCrashChild is the child of TestCrashDurability. It publishes and acks
// timers as fast as it can, until it is killed. It prints "P id" after the
// Schedule that wrote id returned, "C id" before it sends an ack for id and
// "A id" after the ack returned.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(envCrashFile)
	if path == "" {
		t.Skip("child process of TestCrashDurability")
	}
	d, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	run := os.Getpid() // ids are unique across the runs on one file
	var out sync.Mutex
	report := func(kind string, ids []string) {
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(kind + " " + id + "\n")
		}
		out.Lock()
		defer out.Unlock()
		if _, err := io.WriteString(os.Stdout, b.String()); err != nil {
			os.Exit(4)
		}
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(5)
	}
	for g := range 4 { // publishers: batches of 1 to 8
		go func() {
			for i := 0; ; i++ {
				var timers []ontimedriver.NewTimer
				var ids []string
				for j := range 1 + i%8 {
					id := fmt.Sprintf("p%d-%d-%d-%d", run, g, i, j)
					timers = append(timers, ontimedriver.NewTimer{ID: id, Payload: []byte(id)})
					ids = append(ids, id)
				}
				if _, err := d.Schedule(ctx, "crash", timers, ontimedriver.Upsert); err != nil {
					fail(err)
				}
				report("P", ids)
			}
		}()
	}
	for range 2 { // workers: ack every other claimed timer, leave the rest leased
		go func() {
			for {
				r, err := d.Claim(ctx, "crash", 16, time.Hour)
				if err != nil {
					fail(err)
				}
				var ops []ontimedriver.Settlement
				for i, ct := range r.Timers {
					if i%2 == 0 {
						ops = append(ops, ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: ct.ID, Token: ct.Token}, Kind: ontimedriver.Ack})
					}
				}
				var acking []string
				for _, op := range ops {
					acking = append(acking, op.ID)
				}
				report("C", acking) // an ack may land without its report: say so first
				errs, err := d.Settle(ctx, "crash", ops)
				if err != nil {
					fail(err)
				}
				var acked []string
				for i, op := range ops {
					if errs[i] == nil {
						acked = append(acked, op.ID)
					}
				}
				report("A", acked)
			}
		}()
	}
	select {} // until killed
}

// TestCrashDurability kills a writing child with SIGKILL at a random moment
// and checks the file: every publish the child saw return is there unless it
// had started to ack it, and no timer whose ack returned is.
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	path := t.TempDir() + "/crash.db"
	published, acking, acked := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for round := range 3 { // the same file, killed three times
		cmd := child(t, "TestCrashChild", envCrashFile, path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			r := bufio.NewReader(stdout)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return // a line cut short by the kill does not count
				}
				lines <- strings.TrimSuffix(line, "\n")
			}
		}()
		// Kill at a random moment once the child is busy.
		killAfter := time.Duration(50+rand.IntN(400)) * time.Millisecond
		var killTimer <-chan time.Time
		seen := 0
		for line := range lines {
			kind, id, ok := strings.Cut(line, " ")
			switch {
			case !ok:
				continue // test framework output
			case kind == "P":
				published[id] = true
			case kind == "C":
				acking[id] = true
			case kind == "A":
				acked[id] = true
			}
			if seen++; seen == 100 {
				killTimer = time.After(killAfter)
			}
			select {
			case <-killTimer:
				_ = cmd.Process.Kill()
				killTimer = nil
			default:
			}
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != -1 {
			t.Fatalf("round %d: child ended with %v, want killed", round, err)
		}
		t.Logf("round %d: killed after %v with %d published, %d acked so far", round, killAfter, len(published), len(acked))
	}

	d := reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
	lost, resurrected := 0, 0
	for id := range published {
		_, err := d.Get(ctx, "crash", id)
		switch {
		case acked[id] && !errors.Is(err, ontimedriver.ErrNotFound):
			resurrected++
		case !acking[id] && err != nil:
			lost++
			if lost < 5 {
				t.Errorf("published timer %s lost: %v", id, err)
			}
		}
	}
	for id := range acked {
		if !published[id] {
			if _, err := d.Get(ctx, "crash", id); !errors.Is(err, ontimedriver.ErrNotFound) {
				resurrected++
			}
		}
	}
	if lost > 0 || resurrected > 0 {
		t.Errorf("%d published timers lost, %d acked timers back", lost, resurrected)
	}
	if len(published) < 300 || len(acked) < 30 {
		t.Errorf("child did too little to test: %d published, %d acked", len(published), len(acked))
	}
}

// TestLockChild is the child of TestLockedByAnotherProcess: it holds the
// file open until its stdin closes.
func TestLockChild(t *testing.T) {
	path := os.Getenv(envLockFile)
	if path == "" {
		t.Skip("child process of TestLockedByAnotherProcess")
	}
	d, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = d.Close()
}

func TestLockedByAnotherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	path := t.TempDir() + "/locked.db"
	cmd := child(t, "TestLockChild", envLockFile, path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("child did not get ready: %v", err)
		}
		if line == "ready\n" {
			break
		}
	}

	const timeout = 300 * time.Millisecond
	start := time.Now()
	d, err := ontimebolt.Open(path, &ontimebolt.Options{LockTimeout: timeout, Logger: quiet})
	took := time.Since(start)
	if err == nil {
		_ = d.Close()
		t.Fatal("Open succeeded on a file another process holds")
	}
	if !errors.Is(err, ontimebolt.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q: want ErrLocked naming %s", err, path)
	}
	if took < timeout-10*time.Millisecond || took > timeout+time.Second {
		t.Errorf("Open gave up after %v, want about %v", took, timeout)
	}
	t.Logf("error after %v: %v", took.Round(time.Millisecond), err)

	// Once the child lets go, the file opens.
	_ = stdin.Close()
	_, _ = io.Copy(io.Discard, r)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	reopen(t, path, &ontimebolt.Options{LockTimeout: timeout})
}

// TestLockedInProcess runs in a bubble (testing/synctest): its clock moves
// only while the Open sleeps, so "did not wait" holds to the millisecond,
// however busy the machine.
func TestLockedInProcess(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, path := open(t, nil)
		start := time.Now()
		_, err := ontimebolt.Open(path, &ontimebolt.Options{LockTimeout: -1})
		if !errors.Is(err, ontimebolt.ErrLocked) || !strings.Contains(err.Error(), path) {
			t.Errorf("second Open: %v, want ErrLocked naming the file", err)
		}
		// One try of the lock (bbolt retries after 1 ms once the timeout
		// has passed), against the default LockTimeout's second.
		if took := time.Since(start); took > 10*time.Millisecond {
			t.Errorf("negative LockTimeout waited %v", took)
		}
	})
}
