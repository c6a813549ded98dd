package drivertest

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

func getCases() []testCase {
	return []testCase{
		{"Fields", testGetFields},
	}
}

func listCases() []testCase {
	return []testCase{
		{"Order", testListOrder},
		{"Paging", testListPaging},
		{"Before", testListBefore},
		{"LimitCap", testListLimitCap},
	}
}

func countCases() []testCase {
	return []testCase{
		{"States", testCountStates},
	}
}

func topicsCases() []testCase {
	return []testCase{
		{"Listed", testTopicsListed},
		{"Relisted", testTopicsRelisted},
	}
}

// testGetFields: Get reports every field, payload bytes exact (binary, empty,
// large), for scheduled and leased timers; ids may hold any non-control
// character.
func testGetFields(e *env) {
	const topic = "get.fields"
	far := e.now().Truncate(time.Millisecond).Add(time.Hour)
	bin := []byte{0x00, 0xff, 0x00, 0x80, 0x7f, '\n', '\r', 0xc3, 0x28, 0x00}
	big := make([]byte, 64<<10)
	_, _ = rand.NewChaCha8([32]byte{1, 2, 3}).Read(big)
	const uid = "ключ/ü id with spaces:{x}#1*?"
	timers := []ontimedriver.NewTimer{
		{ID: "bin", At: far, Payload: bin},
		{ID: "empty", At: far.Add(time.Millisecond), Payload: []byte{}},
		{ID: "nil", At: far.Add(2 * time.Millisecond)},
		{ID: "big", At: far.Add(3 * time.Millisecond), Payload: big},
		{ID: uid, At: far.Add(4 * time.Millisecond), Payload: []byte("unicode")},
		{ID: "lease-me", Payload: []byte{0xff, 0x00, 0xfe}},
		{ID: uid + "-due", Payload: []byte{}},
	}
	res := e.put(topic, timers...)
	for i, tm := range timers[:5] {
		if !res[i].Due.Equal(tm.At) {
			e.t.Errorf("%q: Due %s, want At %s", tm.ID, ts(res[i].Due), ts(tm.At))
		}
		want := tm.Payload
		if want == nil {
			want = []byte{}
		}
		ti := e.get(topic, tm.ID)
		e.wantScheduled(fmt.Sprintf("Get(%q)", tm.ID), ti, res[i].Due, 0, want)
		if ti.LastError != "" {
			e.t.Errorf("Get(%q): LastError %q", tm.ID, ti.LastError)
		}
	}

	got := e.claim(topic, 10, longLease)
	if len(got.Timers) != 2 {
		e.t.Fatalf("claim: %q, want lease-me and the unicode id", claimedIDs(got))
	}
	for _, c := range got.Timers {
		i := slices.IndexFunc(timers, func(tm ontimedriver.NewTimer) bool { return tm.ID == c.ID })
		if i < 5 {
			e.t.Fatalf("claimed %q", c.ID)
		}
		e.wantPayload(fmt.Sprintf("claimed %q", c.ID), c.Payload, timers[i].Payload)
		if !c.Due.Equal(res[i].Due) {
			e.t.Errorf("claimed %q: Due %s, want %s", c.ID, ts(c.Due), ts(res[i].Due))
		}
		ti := e.get(topic, c.ID)
		e.wantLeased(fmt.Sprintf("Get(%q) while leased", c.ID), ti, c, res[i].Due)
		if ti.LastError != "" {
			e.t.Errorf("Get(%q): LastError %q", c.ID, ti.LastError)
		}
	}
	e.wantGone(topic, "absent")
	e.wantGone(topic, uid+"x")
}

// testListOrder: List orders by the instant a timer becomes claimable (due,
// or lease deadline while leased), then by id.
func testListOrder(e *env) {
	const topic = "list.order"
	now := e.now().Truncate(time.Millisecond)
	res := e.put(topic,
		dueAt("a", now.Add(3*time.Second), "pa"),
		dueAt("c", now.Add(time.Second), "pc"),
		dueAt("b", now.Add(time.Second), "pb"),
		dueAt("e", now.Add(time.Second), "pe"),
		dueAt("d", now.Add(-time.Second), "pd"),
	)
	d := e.claimOne(e.d, topic, "d", 2*time.Second)
	list := e.listAll(topic, ontimedriver.ListOptions{})
	e.wantIDs("List", timerIDs(list), []string{"b", "c", "e", "d", "a"})
	dues := map[string]time.Time{"a": res[0].Due, "c": res[1].Due, "b": res[2].Due, "e": res[3].Due, "d": res[4].Due}
	for i := range list {
		ti := &list[i]
		if ti.ID == "d" {
			e.wantLeased("List: d", ti, d, dues["d"])
			continue
		}
		e.wantScheduled("List: "+ti.ID, ti, dues[ti.ID], 0, nil)
	}
}

// testListPaging: paging with a limit visits every timer exactly once, in
// order; Limit 0 means 100.
func testListPaging(e *env) {
	const topic = "list.paging"
	const n = 250
	base := e.now().Truncate(time.Second).Add(time.Hour)
	timers := make([]ontimedriver.NewTimer, n)
	for i := range timers {
		k := (i * 37) % n // scheduled out of order
		timers[i] = dueAt(fmt.Sprintf("p%03d", k), base.Add(time.Duration(k%7)*time.Millisecond), "x")
	}
	res := e.put(topic, timers...)
	type entry struct {
		due time.Time
		id  string
	}
	want := make([]entry, n)
	for i, tm := range timers {
		want[i] = entry{res[i].Due, tm.ID}
	}
	slices.SortFunc(want, func(a, b entry) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	wantIDs := make([]string, n)
	for i, w := range want {
		wantIDs[i] = w.id
	}

	e.wantIDs("List, limit 100, all pages", timerIDs(e.listAll(topic, ontimedriver.ListOptions{Limit: 100})), wantIDs)
	e.wantIDs("List, limit 7, all pages", timerIDs(e.listAll(topic, ontimedriver.ListOptions{Limit: 7})), wantIDs)
	e.wantIDs("List, limit 250, all pages", timerIDs(e.listAll(topic, ontimedriver.ListOptions{Limit: n})), wantIDs)

	p, err := e.d.List(e.ctx, topic, ontimedriver.ListOptions{})
	if err != nil {
		e.t.Fatalf("List: %v", err)
	}
	if len(p.Timers) != 100 || p.NextCursor == "" {
		e.t.Errorf("List with Limit 0: %d timers, NextCursor %q; want 100 and a cursor", len(p.Timers), p.NextCursor)
	}
}

// testListBefore: Before keeps timers claimable before an instant, on every
// page.
func testListBefore(e *env) {
	const topic = "list.before"
	now := e.now().Truncate(time.Millisecond)
	base := now.Add(time.Hour)
	var timers []ontimedriver.NewTimer
	for i := range 10 {
		timers = append(timers, dueAt(fmt.Sprintf("b%d", i), base.Add(time.Duration(i)*100*time.Millisecond), "x"))
	}
	timers = append(timers, dueAt("soon", now.Add(5*time.Second), "x"), dueAt("leased", now.Add(-time.Second), "x"))
	e.put(topic, timers...)
	e.claimOne(e.d, topic, "leased", longLease) // claimable again at now + 30s

	all := []string{"soon", "leased", "b0", "b1", "b2", "b3", "b4"}
	cut := base.Add(450 * time.Millisecond)
	e.wantIDs("List Before +1h450ms", timerIDs(e.listAll(topic, ontimedriver.ListOptions{Before: cut})), all)
	e.wantIDs("List Before +1h450ms, limit 2", timerIDs(e.listAll(topic, ontimedriver.ListOptions{Before: cut, Limit: 2})), all)
	e.wantIDs("List Before +10s", timerIDs(e.listAll(topic, ontimedriver.ListOptions{Before: now.Add(10 * time.Second)})), []string{"soon"})
	e.wantIDs("List Before -1h", timerIDs(e.listAll(topic, ontimedriver.ListOptions{Before: now.Add(-time.Hour)})), nil)
	if got := e.listAll(topic, ontimedriver.ListOptions{}); len(got) != 12 {
		e.t.Errorf("List without Before: %d timers, want 12", len(got))
	}
}

// testListLimitCap: a limit above 1000 is capped at 1000.
func testListLimitCap(e *env) {
	const topic = "list.limit-cap"
	const n = 1001
	at := e.now().Truncate(time.Millisecond).Add(time.Hour)
	timers := make([]ontimedriver.NewTimer, n)
	for i := range timers {
		timers[i] = dueAt(fmt.Sprintf("c%04d", i), at, "x")
	}
	e.put(topic, timers...)
	p, err := e.d.List(e.ctx, topic, ontimedriver.ListOptions{Limit: 5000})
	if err != nil {
		e.t.Fatalf("List: %v", err)
	}
	if len(p.Timers) != 1000 || p.NextCursor == "" {
		e.t.Fatalf("List with Limit 5000 over %d timers: %d timers, NextCursor %q; want 1000 and a cursor", n, len(p.Timers), p.NextCursor)
	}
	p2, err := e.d.List(e.ctx, topic, ontimedriver.ListOptions{Limit: 5000, Cursor: p.NextCursor})
	if err != nil {
		e.t.Fatalf("List page 2: %v", err)
	}
	e.wantIDs("List page 2", timerIDs(p2.Timers), []string{"c1000"})
	if p2.NextCursor != "" {
		e.t.Errorf("List last page: NextCursor %q, want empty", p2.NextCursor)
	}
}

// testCountStates: Count tells scheduled (including due-unclaimed and expired
// leases), leased (live leases) and dead.
func testCountStates(e *env) {
	const topic = "count.states"
	e.wantCounts(topic, 0, 0, 0)
	e.put(topic, dueNow("live", "x"), dueNow("dead", "x"))
	got := e.claim(topic, 10, longLease)
	if len(got.Timers) != 2 {
		e.t.Fatalf("claim: %q", claimedIDs(got))
	}
	for _, c := range got.Timers {
		if c.ID == "dead" {
			e.wantErr("dead", e.settle1(topic, deadOp(c, ontimedriver.ReasonRejected, "x")), nil)
		}
	}
	e.put(topic, dueNow("expiring", "x"))
	exp := e.claimOne(e.d, topic, "expiring", shortLease)
	now := e.now()
	e.put(topic, dueIn("s1", time.Hour, "x"), dueIn("s2", time.Hour, "x"), dueAt("due-unclaimed", now.Add(-time.Second), "x"))

	before := e.now()
	c := e.count(topic)
	after := e.now()
	switch {
	case after.Before(exp.LeaseUntil):
		e.checkCounts(topic, c, 3, 2, 1)
	case before.After(exp.LeaseUntil):
		e.checkCounts(topic, c, 4, 1, 1)
	default:
		e.t.Logf("the short lease expired during Count (slow machine): %+v", c)
	}
	e.waitStorePast(exp.LeaseUntil)
	e.wantCounts(topic, 4, 1, 1)
}

// testTopicsListed: Topics lists, sorted, exactly the topics holding a timer
// or a dead letter; emptied topics are not listed.
func testTopicsListed(e *env) {
	if got := e.topics(); len(got) != 0 {
		e.t.Errorf("Topics of a fresh namespace: %q, want none", got)
	}
	want := []string{"tp.b", "tp.a", "tp-Z", "TP.upper", "tp:1/x@y+z~"}
	e.put("tp.b", dueIn("x", time.Hour, "x"))
	e.put("tp.a", dueNow("x", "x"))
	e.claimOne(e.d, "tp.a", "x", longLease) // leased only
	e.put("tp-Z", dueIn("x", time.Hour, "x"))
	e.put("TP.upper", dueIn("x", time.Hour, "x"))
	e.put("tp:1/x@y+z~", dueIn("x", time.Hour, "x"), dueIn("y", time.Hour, "x"))
	e.put("tp:1/x@y+z~", dueIn("x", 2*time.Hour, "x")) // re-published

	// Emptied by ack, cancel, settle of the last timer.
	e.put("tp.acked", dueNow("x", "x"))
	e.wantErr("ack", e.settle1("tp.acked", ackOp(e.claimOne(e.d, "tp.acked", "x", longLease))), nil)
	e.put("tp.cancelled", dueIn("x", time.Hour, "x"))
	e.wantErr("cancel", e.d.Cancel(e.ctx, "tp.cancelled", "x"), nil)
	e.claim("tp.claimed-empty", 10, longLease) // never held anything

	if !e.lacks.NoDeadLetters {
		want = append(want, "tp.dead-only")
		e.put("tp.dead-only", dueNow("x", "x"))
		e.wantErr("dead", e.settle1("tp.dead-only", deadOp(e.claimOne(e.d, "tp.dead-only", "x", longLease), "r", "e")), nil)

		e.put("tp.purged", dueNow("x", "x"))
		e.wantErr("dead", e.settle1("tp.purged", deadOp(e.claimOne(e.d, "tp.purged", "x", longLease), "r", "e")), nil)
		if n, err := e.d.PurgeAllDead(e.ctx, "tp.purged"); err != nil || n != 1 {
			e.t.Errorf("PurgeAllDead = %d, %v; want 1", n, err)
		}

		e.put("tp.replayed", dueNow("x", "x"))
		e.wantErr("dead", e.settle1("tp.replayed", deadOp(e.claimOne(e.d, "tp.replayed", "x", longLease), "r", "e")), nil)
		if n, err := e.d.ReplayAllDead(e.ctx, "tp.replayed"); err != nil || n != 1 {
			e.t.Errorf("ReplayAllDead = %d, %v; want 1", n, err)
		}
		e.wantErr("ack replayed", e.settle1("tp.replayed", ackOp(e.claimOne(e.d, "tp.replayed", "x", longLease))), nil)
	} else {
		e.put("tp.dead-deletes", dueNow("x", "x"))
		e.wantErr("dead", e.settle1("tp.dead-deletes", deadOp(e.claimOne(e.d, "tp.dead-deletes", "x", longLease), "r", "e")), nil)
	}
	slices.Sort(want)
	e.wantIDs("Topics", e.topics(), want)
}

// testTopicsRelisted: a topic that emptied out and was left out of Topics
// (a store may then forget it: the Redis registry prunes it) is listed
// again once it holds a timer, also when other Topics calls run while
// timers are written and cancelled: once the writes returned and the
// Topics calls running meanwhile ended, every topic that holds a timer is
// listed.
func testTopicsRelisted(e *env) {
	const n = 16
	name := func(i int) string { return fmt.Sprintf("tr.%02d", i) }
	want := make([]string, n)
	for i := range n {
		want[i] = name(i)
		e.put(name(i), dueIn("x", time.Hour, "x"))
		e.wantErr("cancel", e.d.Cancel(e.ctx, name(i), "x"), nil)
	}
	if got := e.topics(); len(got) != 0 {
		e.t.Errorf("Topics after every topic emptied: %q", got)
	}
	stop := make(chan struct{})
	var calls atomic.Int64 // Topics calls ended
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.peer().Topics(e.ctx); err != nil {
				e.t.Errorf("Topics: %v", err)
				return
			}
			calls.Add(1)
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for round := range 10 {
		for i := range n {
			e.put(name(i), dueIn("x", time.Hour, "x"))
		}
		// The call running during the writes has ended, and a whole one
		// after them.
		c0 := calls.Load()
		WaitFor(e.t, waitTimeout, func() bool { return calls.Load() >= c0+2 }, "two more Topics calls")
		got := e.topics()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			e.t.Fatalf("round %d: Topics = %q after every topic got a timer, want all %d", round, got, n)
		}
		for i := range n {
			e.wantErr("cancel", e.d.Cancel(e.ctx, name(i), "x"), nil)
		}
	}
}
