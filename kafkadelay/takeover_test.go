package kafkadelay_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ontime-go/ontime/kafkadelay"
)

// child is a republisher subprocess with the default group timing.
type child struct {
	cmd      *exec.Cmd
	assigned chan struct{}
	killed   bool
}

func startChild(t *testing.T, c *cluster, name string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(c.addrs, ","), childDefaultsEnv+"=1")
	cmd.Stderr = prefixWriter{t, name + ": "}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: cmd, assigned: make(chan struct{})}
	t.Cleanup(func() {
		if !ch.killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	go func() {
		sc := bufio.NewScanner(out)
		closed := false
		for sc.Scan() {
			if sc.Text() == "assigned" && !closed {
				close(ch.assigned)
				closed = true
			}
		}
	}()
	return ch
}

func (ch *child) kill(t *testing.T) {
	t.Helper()
	if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = ch.cmd.Wait()
	ch.killed = true
}

type prefixWriter struct {
	t      testing.TB
	prefix string
}

func (w prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.t.Log(w.prefix + line)
	}
	return len(b), nil
}

// takeover runs n republisher subprocesses with the default group timing,
// SIGKILLs `kill` of them while records are pending, and checks that the
// records due after the kill are delivered, none early, none later than
// the default session timeout + 2 s.
func takeover(t *testing.T, n, kill int) {
	c := newCluster(t)
	s := c.sink(t)
	children := make([]*child, n)
	for i := range children {
		children[i] = startChild(t, c, fmt.Sprintf("republisher %d", i))
	}
	for i, ch := range children {
		select {
		case <-ch.assigned:
		case <-time.After(60 * time.Second):
			t.Fatalf("republisher %d never got partitions", i)
		}
	}
	// Records due from 1 s to 16 s from now; the kill comes at about 3 s,
	// so most are due after it.
	const records = 6000
	rng := rand.New(rand.NewPCG(7, 8))
	start := time.Now()
	pub := publishMany(t, c, records, func(int) time.Time {
		return start.Add(time.Second + time.Duration(rng.IntN(15000))*time.Millisecond)
	})
	s.waitFor(t, 30*time.Second, "the first deliveries", func(s *sink) bool { return len(s.got) >= 100 })
	for i := 0; time.Since(start) < 3*time.Second; i++ {
		time.Sleep(50 * time.Millisecond) // let the kill fall inside the run, not at its start
	}
	for _, ch := range children[:kill] {
		ch.kill(t)
	}
	killedAt := time.Now()
	t.Logf("SIGKILLed %d of %d republishers at +%v", kill, n, killedAt.Sub(start).Round(time.Millisecond))
	s.waitFor(t, 90*time.Second, "every record", func(s *sink) bool { return len(s.got) >= records })
	s.drain(t, c, 60*time.Second) // late duplicates included
	dups, _ := s.check(t, pub)

	// Lateness of the records due after the kill.
	var after []time.Duration
	var worstDue time.Time
	s.mu.Lock()
	for id, p := range pub {
		if p.due.Before(killedAt) {
			continue
		}
		l := s.got[id][0].received.Sub(p.due)
		if len(after) == 0 || l > slices.Max(after) {
			worstDue = p.due
		}
		after = append(after, l)
	}
	s.mu.Unlock()
	slices.Sort(after)
	bound := kafkadelay.DefaultSessionTimeout + 2*time.Second
	t.Logf("records due after the kill: %s; the latest was due %v after the kill; duplicates %d",
		latenessLine(after), worstDue.Sub(killedAt).Round(time.Millisecond), dups)
	if worst := after[len(after)-1]; worst > bound {
		t.Errorf("a record due after the kill was %v late, more than the session timeout + 2s (%v)", worst, bound)
	}
	for _, ch := range children[kill:] {
		_ = ch.cmd.Process.Signal(syscall.SIGTERM)
		_ = ch.cmd.Wait()
		ch.killed = true
	}
}

// kill -9 of one of two republishers, with the default group timing.
func TestTakeoverOneOfTwo(t *testing.T) { takeover(t, 2, 1) }

// kill -9 of two of three republishers, with the default group timing.
func TestTakeoverTwoOfThree(t *testing.T) { takeover(t, 3, 2) }
