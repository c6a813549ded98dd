package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/schedule"
)

// TestSIGKILLRecurring: three worker processes on one schedule every
// 200 ms on a real Redis, one SIGKILLed while it runs a tick: no tick is
// lost (every tick number from the first to the last has finished its
// work), the schedule goes on after the kill, and the only tick delivered
// twice is the one the killed worker had in flight.
func TestSIGKILLRecurring(t *testing.T) {
	const (
		interval = 200 * time.Millisecond
		ticks    = 50 // 10 s
	)
	ctx := t.Context()
	bin := buildWorker(t)
	srv := redistest.StartServer(t)
	rdb := readmeClient(t, srv.Addr)
	prefix := redistest.Prefix(t)
	client, _ := newStoreClient(t, rdb, prefix, nil)
	logPath := filepath.Join(t.TempDir(), "deliveries.log")
	fl := newFleet(t, bin, 1, "-addr", srv.Addr, "-prefix", prefix, "-log", logPath,
		"-lease", "1s", "-work", "120ms", "-tick-ids", "-topic", "rec")
	defer func() {
		if t.Failed() {
			fl.logStderr()
		}
	}()
	for range 3 {
		fl.start()
	}
	// FireEach with a large bound: the ticks that fall due while the
	// killed worker's lease runs out fire late, none is skipped.
	if _, err := client.PublishRecurring(ctx, "rec", "r", schedule.Every(interval), []byte("x"), ontime.OnMissed(ontime.FireEach(1000))); err != nil {
		t.Fatal(err)
	}

	// Kill a worker while it runs a tick: wait for a D line (of tick 20
	// or later) with no F after it, and SIGKILL its pid.
	var killedPid, killedTick int
	wait.For(t, 30*time.Second, func() bool {
		es := readLogLenient(logPath)
		if len(es) == 0 {
			return false
		}
		last := es[len(es)-1]
		n := tickOf(last.id)
		if last.kind != 'D' || n < 20 {
			return false
		}
		for _, p := range fl.alive() {
			if p.pid == last.pid {
				fl.kill(p)
				killedPid, killedTick = p.pid, n
				return true
			}
		}
		return false
	}, "a worker in the middle of a tick")
	t.Logf("killed worker %d in tick %d", killedPid, killedTick)

	wait.For(t, 60*time.Second, func() bool {
		for _, e := range readLogLenient(logPath) {
			if e.kind == 'F' && tickOf(e.id) >= ticks {
				return true
			}
		}
		return false
	}, "tick %d", ticks)
	if err := client.Cancel(ctx, "rec", "r"); err != nil {
		t.Fatal(err)
	}
	fl.stopAll(30 * time.Second)

	es := readLog(t, logPath)
	delivered := map[int][]logEntry{}
	finished := map[int]bool{}
	maxTick := 0
	for _, e := range es {
		if e.kind != 'D' && e.kind != 'F' {
			continue // the store's answers (S, R, E, X) name the timer, not the tick
		}
		n := tickOf(e.id)
		if n <= 0 {
			t.Fatalf("log line without a tick: %+v", e)
		}
		maxTick = max(maxTick, n)
		switch e.kind {
		case 'D':
			delivered[n] = append(delivered[n], e)
		case 'F':
			finished[n] = true
		}
	}
	var lost, dups []int
	for n := 1; n <= maxTick; n++ {
		if !finished[n] {
			lost = append(lost, n)
		}
		if len(delivered[n]) > 1 {
			dups = append(dups, n)
			// the one duplicate allowed: the killed worker's tick in flight
			if n != killedTick || delivered[n][0].pid != killedPid {
				t.Errorf("tick %d delivered %d times (%+v), not the killed worker's tick in flight (%d)", n, len(delivered[n]), delivered[n], killedTick)
			}
		}
	}
	if len(lost) > 0 {
		t.Errorf("ticks lost (never finished): %v", lost)
	}
	if maxTick < killedTick+10 {
		t.Errorf("the schedule stopped after the kill: last tick %d, killed in %d", maxTick, killedTick)
	}
	// the instants: every 200 ms, one tick each
	var prevAt int64
	for n := 1; n <= maxTick; n++ {
		if len(delivered[n]) == 0 {
			continue
		}
		at, _ := strconv.ParseInt(delivered[n][0].extra, 10, 64)
		if prevAt != 0 && time.Duration(at-prevAt)*time.Microsecond != interval {
			t.Errorf("tick %d at %d µs is %v after the tick before, want %v", n, at, time.Duration(at-prevAt)*time.Microsecond, interval)
		}
		prevAt = at
	}
	t.Logf("%d ticks, %d delivered twice (%v), none lost", maxTick, len(dups), dups)
}

// tickOf reads the tick number of a -tick-ids log id ("r#12").
func tickOf(id string) int {
	_, n, ok := strings.Cut(id, "#")
	if !ok {
		return -1
	}
	v, err := strconv.Atoi(n)
	if err != nil {
		return -1
	}
	return v
}

// readLogLenient reads the delivery log while workers write it, skipping
// a last line being written.
func readLogLenient(path string) []logEntry {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []logEntry
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || len(f[0]) != 1 {
			continue
		}
		a, err1 := strconv.Atoi(f[2])
		p, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, logEntry{kind: f[0][0], id: f[1], attempt: a, pid: p, extra: strings.Join(f[4:], " ")})
	}
	return out
}

// TestRecurringRedisOutage: redis-server stopped for 2 s under two
// schedules every 200 ms, one FireOnce and one FireEach(4): after the
// restart, FireOnce fires one tick for the outage and FireEach at most 4,
// and both go on; no tick twice, none early.
func TestRecurringRedisOutage(t *testing.T) {
	const interval = 200 * time.Millisecond
	ctx := t.Context()
	srv := redistest.StartServer(t, redistest.AppendOnly())
	rdb := readmeClient(t, srv.Addr)
	client, _ := newStoreClient(t, rdb, redistest.Prefix(t), nil)

	type tick struct {
		n   int64
		at  time.Time
		got time.Time // local clock at delivery
	}
	var mu sync.Mutex
	seen := map[string][]tick{}
	w := ontime.NewWorker(client, &ontime.WorkerConfig{})
	err := ontime.Handle(w, "out", func(ctx context.Context, m *ontime.Message[[]byte]) error {
		mu.Lock()
		seen[m.ID] = append(seen[m.ID], tick{m.Tick.N, m.Tick.At, time.Now()})
		mu.Unlock()
		return nil
	}, &ontime.TopicOptions{PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(context.Background()) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
		<-runDone
	}()
	pols := map[string]ontime.MissedPolicy{"once": ontime.FireOnce(), "each4": ontime.FireEach(4)}
	for id, p := range pols {
		if _, err := client.PublishRecurring(ctx, "out", id, schedule.Every(interval), []byte("x"), ontime.OnMissed(p)); err != nil {
			t.Fatal(err)
		}
	}
	count := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen[id])
	}
	wait.For(t, 30*time.Second, func() bool { return count("once") >= 3 && count("each4") >= 3 }, "three ticks of each schedule")

	srv.Stop()
	down := time.Now()
	before := map[string]int{"once": count("once"), "each4": count("each4")}
	wait.For(t, 10*time.Second, func() bool { return time.Since(down) >= 2*time.Second }, "2 s of outage")
	// Redis is back at some moment between these two: a tick due between
	// them may fire on time, so only the ticks due before the restart
	// began count as the outage's
	restart := time.Now()
	srv.Restart()
	up := time.Now()
	wait.For(t, 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id := range pols {
			ts := seen[id]
			if len(ts) == 0 || !ts[len(ts)-1].at.After(up.Add(3*interval)) {
				return false
			}
		}
		return true
	}, "both schedules to go on after the restart")

	mu.Lock()
	defer mu.Unlock()
	for id, p := range pols {
		ts := seen[id]
		late := 0
		for i, tk := range ts {
			if tk.got.Before(tk.at) {
				t.Errorf("%s: tick %d delivered at %s, before its instant %s", id, tk.n, tk.got, tk.at)
			}
			if i > 0 && (tk.n != ts[i-1].n+1 || !tk.at.After(ts[i-1].at)) {
				t.Errorf("%s: tick %d at %s after tick %d at %s", id, tk.n, tk.at, ts[i-1].n, ts[i-1].at)
			}
			// ticks from before the restart delivered after the outage
			if i >= before[id] && !tk.at.After(restart) {
				late++
			}
		}
		hi := 1
		if id == "each4" {
			hi = 4
		}
		if late < 1 || late > hi {
			t.Errorf("%s (%s): %d ticks of the outage fired after it, want 1 to %d", id, p, late, hi)
		}
		// the tick after the late one: with FireOnce the first after its
		// settlement, with FireEach a missed one (see the drivertest case)
		if b := before[id]; len(ts) >= b+2 {
			first, second := ts[b], ts[b+1]
			if id == "once" && !second.at.After(first.got) {
				t.Errorf("%s: the tick after the late one is at %s, before its delivery at %s: a missed tick fired", id, second.at, first.got)
			}
			if id == "each4" && second.got.Sub(second.at) < 2*interval {
				t.Errorf("%s: the tick after the late one (%s) fired at %s: not a missed tick", id, second.at, second.got)
			}
		}
		t.Logf("%s: %d ticks of the 2 s outage fired after the restart", p, late)
	}
}
