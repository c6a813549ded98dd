package drivertest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

func claimCases() []testCase {
	return []testCase{
		{"NotBeforeDue", testClaimNotBeforeDue},
		{"PastDueAtOnce", testClaimPastDue},
		{"OldestFirstAndMax", testClaimOldestFirstAndMax},
		{"Next", testClaimNext},
		{"AfterLeaseExpiry", testClaimAfterLeaseExpiry},
		{"ConcurrentPeers", testClaimConcurrent},
		{"LeasesNeverOverlap", testClaimLeasesNeverOverlap},
		{"NeverEarlyMicroseconds", testClaimNeverEarlyMicro},
	}
}

// testClaimNeverEarlyMicro: timers due a delay after the store's clock, the
// delays whole milliseconds or not, claimed as soon as the store allows
// (claims in a tight loop), are never claimed before the store's clock, at
// its full resolution, reaches the instant it showed at publish plus the
// delay. The clock is read (ClaimResult.Now) before the publish, so the
// bound it gives is if anything early: a claim before it is certainly
// early. (Before due times were computed at the store's full resolution, a
// Redis store floored its clock to the millisecond and let timers with
// whole-millisecond delays be claimed up to 1 ms early.)
func testClaimNeverEarlyMicro(e *env) {
	const topic = "claim.never-early"
	const n = 60
	delays := map[string]time.Duration{}
	var timers []ontimedriver.NewTimer
	for i := range n {
		d := time.Duration(20+i%40) * time.Millisecond // whole milliseconds
		if i%3 == 1 {
			d += time.Duration(1+i*16) * time.Microsecond // a sub-millisecond part
		}
		if i%3 == 2 {
			d += 999*time.Microsecond + 500*time.Nanosecond // a sub-microsecond part
		}
		id := fmt.Sprintf("t%02d", i)
		delays[id] = d
		timers = append(timers, dueIn(id, d, "p"))
	}
	before := e.now()
	res := e.put(topic, timers...)
	for i, tm := range timers {
		if res[i].Due.Before(before.Add(tm.Delay)) {
			e.t.Errorf("%s: Due %s before the store's clock at publish plus the delay (%s + %v)", tm.ID, ts(res[i].Due), ts(before), tm.Delay)
		}
	}
	claimed, early, claims := 0, 0, 0
	deadline := time.Now().Add(10 * time.Second)
	for claimed < n && time.Now().Before(deadline) {
		r := e.claim(topic, n, longLease)
		claims++
		for _, c := range r.Timers {
			claimed++
			if due := before.Add(delays[c.ID]); r.Now.Before(due) {
				early++
				e.t.Errorf("%s claimed at store %s, %v before its due instant %s (store clock at publish %s + %v)",
					c.ID, ts(r.Now), due.Sub(r.Now), ts(due), ts(before), delays[c.ID])
			}
			if r.Now.Before(c.Due) {
				e.t.Errorf("%s claimed at store %s, before its reported Due %s", c.ID, ts(r.Now), ts(c.Due))
			}
		}
	}
	if claimed != n {
		e.t.Fatalf("claimed %d of %d timers in 10s", claimed, n)
	}
	e.t.Logf("%d timers claimed in %d claims, %d early", n, claims, early)
}

// testClaimNotBeforeDue: a timer due in 300 ms is not claimed before its due
// time on the store's clock, and is claimed soon after.
func testClaimNotBeforeDue(e *env) {
	const topic = "claim.not-before-due"
	const delay = 300 * time.Millisecond
	res := e.put(topic, dueIn("soon", delay, "s"), dueIn("later", time.Hour, "l"))
	due := res[0].Due

	first := e.claim(topic, 10, longLease)
	if first.Now.Before(due) {
		if len(first.Timers) != 0 {
			e.t.Errorf("claim at store %s, before the due %s: got %v", ts(first.Now), ts(due), claimedIDs(first))
		}
		if !near(first.Next, due, time.Millisecond) {
			e.t.Errorf("claim before due: Next %s, want the due %s", ts(first.Next), ts(due))
		}
	} else {
		e.t.Logf("the first claim came %v after the due (slow machine); the early claim was not tested", first.Now.Sub(due))
		for _, c := range first.Timers {
			e.put(topic, dueAt(c.ID, due, "s")) // put it back for drain
		}
	}
	got := e.drain(e.d, topic, map[string]time.Time{"soon": due, "later": res[1].Due}, []string{"soon"}, longLease)
	c := got["soon"]
	claimedAt := c.LeaseUntil.Add(-longLease)
	if late := claimedAt.Sub(due); late > time.Second {
		e.t.Errorf("claimed %v after its due while polling every %v", late, pollInterval)
	}
	e.wantPayload("soon", c.Payload, []byte("s"))
}

// testClaimPastDue: a timer due in the past is claimed at once; one in the
// future is not.
func testClaimPastDue(e *env) {
	const topic = "claim.past-due"
	now := e.now()
	res := e.put(topic,
		dueAt("old", now.Add(-time.Hour), "o"),
		dueAt("older", now.Add(-2*time.Hour), "oo"),
		dueAt("future", now.Add(time.Hour), "f"),
	)
	got := e.claim(topic, 10, longLease)
	e.wantIDs("claim of past-due timers", claimedIDs(got), []string{"older", "old"})
	for _, c := range got.Timers {
		want := res[0].Due
		if c.ID == "older" {
			want = res[1].Due
		}
		if !c.Due.Equal(want) {
			e.t.Errorf("%s: claimed Due %s, want %s", c.ID, ts(c.Due), ts(want))
		}
	}
	if len(got.Timers) > 0 && !near(got.Next, got.Timers[0].LeaseUntil, time.Millisecond) {
		e.t.Errorf("Next %s, want the lease deadline %s (earlier than the future timer)", ts(got.Next), ts(got.Timers[0].LeaseUntil))
	}
}

// testClaimOldestFirstAndMax: claims take the oldest due timers first, never
// more than max, and Next points at the oldest one left behind.
func testClaimOldestFirstAndMax(e *env) {
	const topic = "claim.oldest-first"
	now := e.now().Truncate(time.Millisecond)
	// Ids in an order unrelated to the due order.
	offsets := []int{7, 2, 9, 4, 1, 8, 3, 10, 6, 5} // seconds before now
	var timers []ontimedriver.NewTimer
	byAge := make([]string, 11) // byAge[k] is the id due k seconds ago
	for i, off := range offsets {
		id := fmt.Sprintf("t%c", 'a'+i)
		byAge[off] = id
		timers = append(timers, dueAt(id, now.Add(-time.Duration(off)*time.Second), id))
	}
	res := e.put(topic, timers...)
	dues := make(map[string]time.Time)
	for i, tm := range timers {
		dues[tm.ID] = res[i].Due
	}
	var oldest []string // oldest first
	for k := 10; k >= 1; k-- {
		oldest = append(oldest, byAge[k])
	}

	got := e.claim(topic, 3, longLease)
	e.wantIDs("claim max 3", claimedIDs(got), oldest[:3])
	if !near(got.Next, dues[oldest[3]], time.Millisecond) {
		e.t.Errorf("claim max 3: Next %s, want the due of the oldest left (%s, %s)", ts(got.Next), oldest[3], ts(dues[oldest[3]]))
	}
	if got.Next.After(got.Now) {
		e.t.Errorf("claim max 3 with 7 more due: Next %s after Now %s", ts(got.Next), ts(got.Now))
	}
	got = e.claim(topic, 1, longLease)
	e.wantIDs("claim max 1", claimedIDs(got), oldest[3:4])
	got = e.claim(topic, 100, longLease)
	e.wantIDs("claim max 100", claimedIDs(got), oldest[4:])
	for _, c := range got.Timers {
		if !c.Due.Equal(dues[c.ID]) {
			e.t.Errorf("%s: claimed Due %s, want %s", c.ID, ts(c.Due), ts(dues[c.ID]))
		}
	}
	if got := e.claim(topic, 100, longLease); len(got.Timers) != 0 {
		e.t.Errorf("claim with all leased: got %v", claimedIDs(got))
	}
}

// testClaimNext: Next is the earliest instant a timer of the topic becomes
// claimable (a due time or a lease deadline), zero on an empty topic.
func testClaimNext(e *env) {
	got := e.claim("claim.next.empty", 10, longLease)
	if len(got.Timers) != 0 || !got.Next.IsZero() {
		e.t.Errorf("claim on an empty topic: %v, Next %s; want nothing and zero Next", claimedIDs(got), ts(got.Next))
	}

	now := e.now()
	// A future due earlier than the lease deadline.
	const a = "claim.next.due"
	res := e.put(a, dueNow("now", "n"), dueAt("later", now.Add(10*time.Second), "l"))
	got = e.claim(a, 10, longLease)
	e.wantIDs("claim "+a, claimedIDs(got), []string{"now"})
	if !near(got.Next, res[1].Due, time.Millisecond) {
		e.t.Errorf("%s: Next %s, want the future timer's due %s", a, ts(got.Next), ts(res[1].Due))
	}

	// A lease deadline earlier than the future due.
	const b = "claim.next.lease"
	e.put(b, dueNow("now", "n"), dueAt("later", now.Add(10*time.Second), "l"))
	got = e.claim(b, 10, 500*time.Millisecond)
	e.wantIDs("claim "+b, claimedIDs(got), []string{"now"})
	if len(got.Timers) == 1 && !near(got.Next, got.Timers[0].LeaseUntil, time.Millisecond) {
		e.t.Errorf("%s: Next %s, want the lease deadline %s", b, ts(got.Next), ts(got.Timers[0].LeaseUntil))
	}

	// Only a future timer: nothing claimed, Next is its due.
	const c = "claim.next.future"
	res = e.put(c, dueAt("f", now.Add(5*time.Second), "f"))
	got = e.claim(c, 10, longLease)
	if len(got.Timers) != 0 || !near(got.Next, res[0].Due, time.Millisecond) {
		e.t.Errorf("%s: %v, Next %s; want nothing and Next %s", c, claimedIDs(got), ts(got.Next), ts(res[0].Due))
	}

	// Emptied: Next is zero again.
	first := e.claim(a, 10, longLease) // nothing due: "now" is leased
	if len(first.Timers) != 0 {
		e.t.Errorf("%s: claimed %v again while leased", a, claimedIDs(first))
	}
	if err := e.d.Cancel(e.ctx, a, "later"); err != nil {
		e.t.Fatalf("Cancel: %v", err)
	}
	got = e.claim(a, 10, longLease)
	if len(got.Timers) != 0 || got.Next.IsZero() {
		e.t.Errorf("%s with only a leased timer: %v, Next %s; want nothing and Next at its lease deadline", a, claimedIDs(got), ts(got.Next))
	}
	if err := e.d.Cancel(e.ctx, a, "now"); err != nil {
		e.t.Fatalf("Cancel: %v", err)
	}
	got = e.claim(a, 10, longLease)
	if len(got.Timers) != 0 || !got.Next.IsZero() {
		e.t.Errorf("%s emptied: %v, Next %s; want nothing and zero Next", a, claimedIDs(got), ts(got.Next))
	}
}

// testClaimAfterLeaseExpiry: a timer whose lease expired is claimed again, not
// before its deadline, with a new token and the attempt counter raised.
func testClaimAfterLeaseExpiry(e *env) {
	const topic = "claim.expiry"
	res := e.put(topic, dueNow("r", "payload"))
	due := res[0].Due
	peer := e.peer()
	c1 := e.claimOne(e.d, topic, "r", shortLease)
	e.wantClaimAttempt("first claim", c1.Attempt, 1)
	e.wantLeasedWhileLive("Get after the first claim", topic, c1, due)

	prev := c1
	tokens := map[string]bool{c1.Token: true}
	for round, d := range []ontimedriver.Driver{peer, e.d} {
		attempt := round + 2
		var c ontimedriver.ClaimedTimer
		WaitFor(e.t, waitTimeout, func() bool {
			got := e.claimWith(d, topic, 10, shortLease)
			if got.Now.Before(prev.LeaseUntil) {
				if len(got.Timers) != 0 {
					e.t.Fatalf("claim at store %s, before the lease deadline %s: got %v", ts(got.Now), ts(prev.LeaseUntil), claimedIDs(got))
				}
				if !near(got.Next, prev.LeaseUntil, time.Millisecond) {
					e.t.Errorf("claim while leased: Next %s, want the lease deadline %s", ts(got.Next), ts(prev.LeaseUntil))
				}
				return false
			}
			if len(got.Timers) == 0 {
				if got.Now.After(prev.LeaseUntil.Add(time.Millisecond)) {
					e.t.Fatalf("claim at store %s, after the lease deadline %s: nothing claimed", ts(got.Now), ts(prev.LeaseUntil))
				}
				return false
			}
			c = got.Timers[0]
			return true
		}, "the expired lease to be claimed again")
		what := fmt.Sprintf("claim %d", attempt)
		if c.ID != "r" {
			e.t.Fatalf("%s: id %q", what, c.ID)
		}
		e.wantClaimAttempt(what, c.Attempt, attempt)
		if tokens[c.Token] {
			e.t.Errorf("%s: token %q was handed out before", what, c.Token)
		}
		tokens[c.Token] = true
		if e.lacks.NoOriginalDue {
			if !near(c.Due, prev.LeaseUntil, time.Millisecond) {
				e.t.Errorf("%s: Due %s, want the instant it became claimable (%s)", what, ts(c.Due), ts(prev.LeaseUntil))
			}
		} else if !c.Due.Equal(due) {
			e.t.Errorf("%s: Due %s, want the scheduled due %s", what, ts(c.Due), ts(due))
		}
		e.wantPayload(what, c.Payload, []byte("payload"))
		e.wantErr(what+": ack with the expired token", e.settle1(topic, ackOp(prev)), ontimedriver.ErrLeaseLost)
		e.wantLeasedWhileLive(what+": Get", topic, c, due)
		prev = c
	}
	e.wantErr("ack with the live token", e.settle1(topic, ackOp(prev)), nil)
	e.wantGone(topic, "r")
}

// testClaimConcurrent: two drivers on one namespace, two claimers each, claim
// 500 due timers concurrently; no timer is handed out twice while its lease is
// live, and every one is handed out.
func testClaimConcurrent(e *env) {
	const topic = "claim.concurrent"
	const n = 500
	timers := make([]ontimedriver.NewTimer, n)
	for i := range timers {
		timers[i] = dueNow(fmt.Sprintf("c%03d", i), "x")
	}
	e.put(topic, timers...)
	drivers := []ontimedriver.Driver{e.d, e.d, e.peer(), e.peer()}

	var (
		mu     sync.Mutex
		owner  = make(map[string]int) // id -> claimer
		total  atomic.Int64
		failed atomic.Bool
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(2 * waitTimeout)
	for w, d := range drivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for total.Load() < n && !failed.Load() && time.Now().Before(deadline) {
				res, err := d.Claim(e.ctx, topic, 16, longLease)
				if err != nil {
					e.t.Errorf("claimer %d: Claim: %v", w, err)
					failed.Store(true)
					return
				}
				if len(res.Timers) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				ops := make([]ontimedriver.Settlement, 0, len(res.Timers))
				mu.Lock()
				for _, c := range res.Timers {
					if prev, dup := owner[c.ID]; dup {
						e.t.Errorf("claimer %d got %q, which claimer %d holds with a live lease", w, c.ID, prev)
						failed.Store(true)
					}
					owner[c.ID] = w
					ops = append(ops, ackOp(c))
				}
				mu.Unlock()
				total.Add(int64(len(res.Timers)))
				errs, err := d.Settle(e.ctx, topic, ops)
				if err != nil {
					e.t.Errorf("claimer %d: Settle: %v", w, err)
					failed.Store(true)
					return
				}
				for i, err := range errs {
					if err != nil {
						e.t.Errorf("claimer %d: ack %q: %v", w, ops[i].ID, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if got := total.Load(); got != n || len(owner) != n {
		e.t.Fatalf("claimed %d timers (%d distinct), want each of %d exactly once", got, len(owner), n)
	}
	perClaimer := make([]int, len(drivers))
	for _, w := range owner {
		perClaimer[w]++
	}
	e.t.Logf("timers per claimer: %v", perClaimer)
	e.wantCounts(topic, 0, 0, 0)
}

// testClaimLeasesNeverOverlap: claimers on two drivers race for a few timers
// with short leases they let expire. Each timer is claimed again and again
// (three times),
// but a claim never starts (on the store's clock) before the previous lease
// of that timer ended, tokens never repeat and attempts count up by one.
func testClaimLeasesNeverOverlap(e *env) {
	const topic = "claim.overlap"
	const n = 20
	const lease = 100 * time.Millisecond
	timers := make([]ontimedriver.NewTimer, n)
	for i := range timers {
		timers[i] = dueNow(fmt.Sprintf("o%02d", i), "x")
	}
	e.put(topic, timers...)
	type claim struct {
		now time.Time
		c   ontimedriver.ClaimedTimer
	}
	var (
		mu     sync.Mutex
		claims = make(map[string][]claim)
		wg     sync.WaitGroup
	)
	// Run until every timer was claimed rounds times.
	const rounds = 3
	var done atomic.Bool
	stop := time.Now().Add(waitTimeout)
	for w, d := range []ontimedriver.Driver{e.d, e.d, e.peer(), e.peer()} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() && time.Now().Before(stop) {
				res, err := d.Claim(e.ctx, topic, 3, lease)
				if err != nil {
					e.t.Errorf("claimer %d: Claim: %v", w, err)
					return
				}
				mu.Lock()
				for _, c := range res.Timers {
					claims[c.ID] = append(claims[c.ID], claim{res.Now, c})
				}
				all := len(claims) == n
				for _, cs := range claims {
					all = all && len(cs) >= rounds
				}
				mu.Unlock()
				if all {
					done.Store(true)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()

	total := 0
	for id, cs := range claims {
		total += len(cs)
		slices.SortFunc(cs, func(a, b claim) int { return a.now.Compare(b.now) })
		tokens := make(map[string]bool)
		for i, cl := range cs {
			if tokens[cl.c.Token] {
				e.t.Errorf("%s: token %q handed out twice", id, cl.c.Token)
			}
			tokens[cl.c.Token] = true
			if i == 0 {
				continue
			}
			prev := cs[i-1]
			if cl.now.Before(prev.c.LeaseUntil) {
				e.t.Errorf("%s: claimed at store %s while the previous lease ran until %s", id, ts(cl.now), ts(prev.c.LeaseUntil))
			}
			if !e.lacks.NoAttempts && cl.c.Attempt != prev.c.Attempt+1 {
				e.t.Errorf("%s: attempt %d after attempt %d", id, cl.c.Attempt, prev.c.Attempt)
			}
		}
		if !e.lacks.NoAttempts && cs[0].c.Attempt != 1 {
			e.t.Errorf("%s: first claim has attempt %d", id, cs[0].c.Attempt)
		}
	}
	if !done.Load() {
		e.t.Errorf("after %v, %d of %d timers were claimed, %d claims in all; want each claimed %d times (its lease of %v expiring each time)", waitTimeout, len(claims), n, total, rounds, lease)
	}
	e.t.Logf("%d claims of %d timers", total, n)
}
