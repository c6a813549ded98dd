//go:build linux

package chaos

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
)

// settleBacklog is the most outcomes a worker can hold queued for its
// settle batcher per topic (settler.go: a channel of 4*maxSettleBatch
// requests plus the batch being flushed). A handler's slot is freed when
// its outcome is queued, not when the store has applied it, so with
// handlers that return nil a worker can hold MaxConcurrency running timers
// plus this many handled-but-not-yet-acked ones. See docs/guarantees.md.
const settleBacklog = 4*512 + 512

// killParams sizes TestSIGKILL; see params_*_test.go.
type killParams struct {
	timers  int           // how many timers are published
	spread  time.Duration // their due times spread over this window
	kills   int           // how many workers are SIGKILLed
	workers int           // how many run at a time
	conc    int           // each worker's MaxConcurrency
	lease   time.Duration
	work    time.Duration // handlers sleep a random time below this
}

// TestSIGKILL publishes timers due over a few seconds, runs worker
// processes that log every delivery, SIGKILLs random workers at random
// moments while starting new ones, and checks when the store is empty that
// every timer was handled to the end (lost=0), that no claim was delivered
// twice (two deliveries with the same attempt number would mean two
// workers held one lease), and that every duplicate is one of the timers
// the killed process had in flight at its kill.
//
// "In flight" is measured, not assumed. The testworker logs when a handler
// starts (D) and when its work is done (F, before it acks or returns), and
// a pass-through wrapper of its driver logs when the store confirmed an ack
// (S) or refused one (R). A killed process writes nothing after its kill,
// so its in-flight set at the kill is exactly its deliveries the store had
// not confirmed acked: handlers still working (no F), plus outcomes on
// their way to the store (F, no S; with m.Ack, S comes before A). A confirmed ack
// deleted the timer under its lease token: that delivery must never come
// back. The converse does not hold line by line: a process killed after
// the store applied its ack but before it wrote S (or A) leaves an
// in-flight delivery that is not redelivered. So per kill
//
//	handlers working at the kill  <=  duplicates  <=  in flight at the kill
//
// the lower bound because a handler without F never asked for an ack, so
// its timer must run again; the upper bound because each duplicate is
// checked to be one of the in-flight deliveries.
//
// Two variants: handlers that return nil (the outcome is acked
// asynchronously, in batches), and handlers that call m.Ack and wait for
// the store (then "in flight" is "not yet acked": at most MaxConcurrency).
// In both, "lost" counts the timers none of whose deliveries finished its
// work (F), so a delivery cut short by a kill does not count as delivered.
func TestSIGKILL(t *testing.T) {
	p := killDefaults
	bin := buildWorker(t)
	for _, mode := range []string{"return", "explicit"} {
		t.Run("ack="+mode, func(t *testing.T) { runKill(t, bin, mode, 1, p) })
	}
	// The same over 20 topics served by HandleTopics (the topic index,
	// idle and restarted topics): each worker runs up to MaxConcurrency
	// handlers per topic.
	t.Run("ack=return/HandleTopics", func(t *testing.T) { runKill(t, bin, "return", 20, p) })
}

// runKill runs TestSIGKILL's scenario; with topics > 1 the timers are
// spread over that many topics, served by HandleTopics("chaos-*").
func runKill(t *testing.T, bin, mode string, topics int, p killParams) {
	ctx := t.Context()
	srv := redistest.StartServer(t)
	rdb := readmeClient(t, srv.Addr)
	prefix := redistest.Prefix(t)
	topicOf := func(int) string { return "chaos" }
	serve := []string{"-topic", "chaos"}
	if topics > 1 {
		topicOf = func(i int) string { return fmt.Sprintf("chaos-%d", i%topics) }
		serve = []string{"-pattern", "chaos-*"}
	}
	client, _ := newStoreClient(t, rdb, prefix, nil)
	logPath := filepath.Join(t.TempDir(), "deliveries.log")

	fl := newFleet(t, bin, p.conc, append([]string{
		"-addr", srv.Addr, "-prefix", prefix, "-log", logPath,
		"-lease", p.lease.String(), "-work", p.work.String(), "-ack", mode}, serve...)...)
	defer func() {
		if t.Failed() {
			fl.logStderr()
		}
	}()

	// Publish everything first: due from 300ms (the workers start meanwhile)
	// to 300ms+spread from now, in random order of ids.
	start := time.Now()
	ids := make([]string, p.timers)
	timers := make([]ontime.Timer, p.timers)
	for i := range timers {
		ids[i] = fmt.Sprintf("t%06d", i)
		off := 300*time.Millisecond + time.Duration(rand.Int64N(int64(p.spread)))
		timers[i] = ontime.Timer{ID: ids[i], Body: []byte("x"), At: start.Add(off)}
	}
	byTopic := map[string][]ontime.Timer{}
	for i, tm := range timers {
		byTopic[topicOf(i)] = append(byTopic[topicOf(i)], tm)
	}
	for topic, ts := range byTopic {
		res, err := client.PublishBatch(ctx, topic, ts)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("publish %s: %v", ts[i].ID, r.Err)
			}
		}
	}
	for range p.workers {
		fl.start()
	}

	// Kill at random moments while timers fall due (from 500ms, when the
	// first workers are serving, to the last due time), so that kills hit
	// running handlers; timers redelivered after an earlier kill fall due
	// within the window too, and are hit by the later kills.
	at := make([]time.Duration, p.kills)
	for i := range at {
		at[i] = 500*time.Millisecond + time.Duration(rand.Int64N(int64(p.spread-200*time.Millisecond)))
	}
	slices.Sort(at)
	kills := 0
	for _, d := range at {
		if w := time.Until(start.Add(d)); w > 0 {
			time.Sleep(w)
		}
		alive := fl.alive()
		if len(alive) == 0 {
			t.Fatalf("no worker alive (they crashed):\n%s", fl.stderrOf(fl.all()[0]))
		}
		victim := alive[rand.IntN(len(alive))]
		fl.kill(victim)
		kills++
		time.Sleep(time.Duration(rand.Int64N(int64(100 * time.Millisecond))))
		fl.start()
	}

	for topic := range byTopic {
		counts := waitEmpty(t, client, topic, p.spread+p.lease+60*time.Second)
		if counts.Dead != 0 {
			t.Errorf("%s: %d timers were dead-lettered", topic, counts.Dead)
		}
	}
	elapsed := time.Since(start)
	fl.stopAll(15 * time.Second)

	killed := map[int]bool{}
	for _, pr := range fl.all() {
		if pr.killed {
			killed[pr.pid] = true
		}
	}
	st := analyseKill(t, readLog(t, logPath), ids, killed, mode, p.conc*topics)
	t.Logf("lost=%d duplicated=%d kills=%d timers=%d (ack=%s, conc=%d, lease=%v; in flight at the kills %d (handlers running %d); per kill running<=duplicates<=in flight %v; duplicates from live workers (each after a lost lease) %d; ack errors %d; deliveries=%d; store empty after %s)",
		st.lost, st.dup, kills, p.timers, mode, p.conc, p.lease, st.inFlight, st.running, st.perKill, st.live, st.ackErrs, st.deliveries, fmtDur(elapsed))
}

// killStats is what analyseKill found.
type killStats struct {
	lost, dup, live   int
	inFlight, running int      // summed over the kills
	perKill           []string // "running<=duplicates<=in flight" per killed process
	ackErrs           int
	deliveries        int
}

// delivery of the kill test: one handler call (a D line) and what the log
// says happened to it.
type killDelivery struct {
	pid                int
	done               bool // F: the handler's work was done
	acked              bool // A: m.Ack returned nil (explicit mode)
	ackErr             bool // L: m.Ack returned an error (explicit mode)
	settled            bool // S ack: the store applied the ack
	refused, callError bool // R, E: the settle was refused, or its call failed
	leaseLost          bool // X: the heartbeat found the lease lost
}

// analyseKill checks the delivery log of a kill run; see TestSIGKILL.
func analyseKill(t *testing.T, entries []logEntry, ids []string, killed map[int]bool, mode string, conc int) killStats {
	t.Helper()
	type claim struct {
		id      string
		attempt int
	}
	published := make(map[string]bool, len(ids))
	for _, id := range ids {
		published[id] = true
	}
	var st killStats
	ds := map[claim]*killDelivery{}
	byID := map[string][]int{} // id -> attempts delivered
	bad := 0
	errorf := func(format string, args ...any) {
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	for _, e := range entries {
		c := claim{e.id, e.attempt}
		if e.kind == 'D' {
			if !published[e.id] {
				errorf("delivered %q, which was never published", e.id)
				continue
			}
			if d, ok := ds[c]; ok {
				errorf("timer %s attempt %d was delivered twice (pids %d and %d): two workers held one lease", e.id, e.attempt, d.pid, e.pid)
				continue
			}
			ds[c] = &killDelivery{pid: e.pid}
			byID[e.id] = append(byID[e.id], e.attempt)
			continue
		}
		d := ds[c]
		if strings.ContainsRune("SRE", rune(e.kind)) && !strings.HasPrefix(e.extra, "ack") {
			// The outcome of a claimed timer handed back unstarted at a
			// graceful stop (snooze): it never reached a handler.
			continue
		}
		if d == nil || d.pid != e.pid {
			errorf("log line %c %s %d %d %s is about no delivery of that process", e.kind, e.id, e.attempt, e.pid, e.extra)
			continue
		}
		switch e.kind {
		case 'F':
			d.done = true
		case 'A':
			d.acked = true
		case 'L':
			d.ackErr = true
			st.ackErrs++
		case 'S':
			d.settled = true
		case 'R':
			d.refused = true
		case 'E':
			d.callError = true
		case 'X':
			d.leaseLost = true
		default:
			errorf("log line of unknown kind %c", e.kind)
		}
	}
	st.deliveries = len(ds)

	// Lost: a timer none of whose handler calls finished its work.
	for _, id := range ids {
		done := false
		for _, a := range byID[id] {
			done = done || ds[claim{id, a}].done
		}
		if !done {
			if st.lost++; st.lost <= 10 {
				t.Errorf("timer %s was never handled to the end (deliveries at attempts %v)", id, byID[id])
			}
		}
	}

	type kill struct{ dup, inFlight, running int }
	perKill := map[int]*kill{}
	for pid := range killed {
		perKill[pid] = &kill{}
	}
	// What each killed process held when it was killed: every delivery not
	// confirmed acked by the store (no S; with m.Ack, S comes before A).
	// Running: the handler's work was not done.
	for c, d := range ds {
		k := perKill[d.pid]
		if k == nil {
			// A live process's handlers all finished before the graceful
			// stop at the end.
			if !d.done {
				errorf("timer %s attempt %d: the handler of live worker %d never finished", c.id, c.attempt, d.pid)
			}
			continue
		}
		if !d.settled && !d.acked {
			k.inFlight++
		}
		if d.acked && !d.settled {
			// m.Ack returns after the settle batcher got the store's
			// reply, which the driver wrapper logs first.
			errorf("timer %s attempt %d: m.Ack returned nil on worker %d, but no applied ack was logged", c.id, c.attempt, d.pid)
		}
		if !d.done {
			k.running++
		}
	}

	for id, attempts := range byID {
		sort.Ints(attempts)
		for i, a := range attempts {
			d := ds[claim{id, a}]
			last := i == len(attempts)-1
			if last {
				continue
			}
			// Every delivery but the last of its timer is a duplicate.
			st.dup++
			if d.settled || d.acked {
				errorf("timer %s: the store acked attempt %d (worker %d; S %v, A %v), yet it was delivered again at attempt %d",
					id, a, d.pid, d.settled, d.acked, attempts[i+1])
			}
			if k := perKill[d.pid]; k != nil {
				// Charged to the kill of the process that made it: it is
				// one of that process's in-flight deliveries (checked just
				// above: not acked).
				k.dup++
				continue
			}
			// A live worker's delivery came back: only a lease lost while
			// the worker lived (a stall longer than the lease; cause 4 of
			// docs/guarantees.md) explains that, and the worker saw it.
			st.live++
			if !d.leaseLost && !d.refused && !d.callError && !d.ackErr {
				errorf("timer %s attempt %d of live worker %d was delivered again (attempt %d) though the worker neither lost its lease nor failed to ack",
					id, a, d.pid, attempts[i+1])
			}
		}
		// A handler cut short by a kill never asked for an ack: its timer
		// must be delivered again.
		la := attempts[len(attempts)-1]
		if d := ds[claim{id, la}]; !d.done {
			errorf("timer %s: the handler of its last delivery (attempt %d, worker %d, killed %v) never finished, and it was not delivered again",
				id, la, d.pid, killed[d.pid])
		}
	}

	// The bound: each kill's duplicates are among its in-flight deliveries
	// (checked one by one above), so at most their number, and at least
	// the handlers it was running. The in-flight set itself is bounded as
	// docs/guarantees.md says.
	pids := make([]int, 0, len(perKill))
	for pid := range perKill {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	var desc []string
	for _, pid := range pids {
		k := perKill[pid]
		st.inFlight += k.inFlight
		st.running += k.running
		desc = append(desc, fmt.Sprintf("%d<=%d<=%d", k.running, k.dup, k.inFlight))
		if k.dup > k.inFlight {
			errorf("kill of worker %d: %d duplicates, but it had only %d deliveries in flight", pid, k.dup, k.inFlight)
		}
		if k.dup < k.running {
			errorf("kill of worker %d: %d duplicates, but it was running %d handlers, each of which must run again", pid, k.dup, k.running)
		}
		if k.running > conc {
			errorf("worker %d was running %d handlers when killed; MaxConcurrency is %d", pid, k.running, conc)
		}
		limit := conc
		if mode == "return" {
			limit = conc + settleBacklog
		}
		if k.inFlight > limit {
			errorf("worker %d had %d deliveries in flight (not acked) when killed; the bound is %d", pid, k.inFlight, limit)
		}
	}
	st.perKill = desc
	// Without this, every check above would pass on kills that hit idle
	// workers. The kills fall while timers are due, when a worker runs a
	// few handlers at a time; all of them missing is a sign the test no
	// longer measures what it claims.
	if len(killed) > 0 && st.running == 0 {
		t.Errorf("none of the %d kills interrupted a running handler (in flight at the kills: %d): the duplicate checks were vacuous", len(killed), st.inFlight)
	}
	if bad > 20 {
		t.Errorf("... and %d more errors", bad-20)
	}
	return st
}
