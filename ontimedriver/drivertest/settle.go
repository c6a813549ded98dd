package drivertest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

func settleCases() []testCase {
	return []testCase{
		{"Ack", testSettleAck},
		{"Retry", testSettleRetry},
		{"Snooze", testSettleSnooze},
		{"Dead", testSettleDead},
		{"WrongToken", testSettleWrongToken},
		{"LeaseLostToPeer", testSettleLostToPeer},
		{"RepublishedWhileLeased", testSettleRepublished},
		{"MixedBatch", testSettleMixed},
	}
}

func extendCases() []testCase {
	return []testCase{
		{"PushesDeadline", testExtendPushes},
		{"LeaseLost", testExtendLost},
	}
}

func cancelCases() []testCase {
	return []testCase{
		{"Scheduled", testCancelScheduled},
		{"Leased", testCancelLeased},
		{"Absent", testCancelAbsent},
		{"Batch", testCancelBatch},
		{"BatchEmpty", testCancelBatchEmpty},
		{"BatchEmptiesTopic", testCancelBatchEmptiesTopic},
	}
}

// testSettleAck: ack deletes; a second ack with the same token is refused.
func testSettleAck(e *env) {
	const topic = "settle.ack"
	e.put(topic, dueNow("a", "p"), dueIn("keep", time.Hour, "k"))
	c := e.claimOne(e.d, topic, "a", longLease)
	e.wantErr("ack", e.settle1(topic, ackOp(c)), nil)
	e.wantGone(topic, "a")
	e.wantCounts(topic, 1, 0, 0)
	e.wantErr("second ack with the same token", e.settle1(topic, ackOp(c)), ontimedriver.ErrLeaseLost)
	e.wantErr("retry after ack", e.settle1(topic, retryOp(c, 0, "x")), ontimedriver.ErrLeaseLost)
	e.wantGone(topic, "a")
	if got := e.claim(topic, 10, longLease); len(got.Timers) != 0 {
		e.t.Errorf("claim after ack: got %v", claimedIDs(got))
	}
	e.wantScheduled("Get(keep)", e.get(topic, "keep"), time.Time{}, 0, []byte("k"))
}

// testSettleRetry: retry schedules again at store now + Delay, keeps the
// attempt and the error text; the next claim counts on.
func testSettleRetry(e *env) {
	const topic = "settle.retry"
	const delay = 300 * time.Millisecond
	e.put(topic, dueNow("r", "payload"))
	first := e.claimWait(e.d, topic, 10, longLease)
	c := first.Timers[0]
	e.wantErr("retry", e.settle1(topic, retryOp(c, delay, "boom: 1")), nil)
	after := e.now()

	ti := e.get(topic, "r")
	e.wantScheduled("Get after retry", ti, time.Time{}, 1, []byte("payload"))
	if ti.Due.Before(first.Now.Add(delay)) || ti.Due.After(after.Add(delay+time.Millisecond)) {
		e.t.Errorf("Get after retry with Delay %v: Due %s, want store now + delay within [%s, %s]", delay, ts(ti.Due), ts(first.Now.Add(delay)), ts(after.Add(delay+time.Millisecond)))
	}
	if !e.lacks.NoLastError && ti.LastError != "boom: 1" {
		e.t.Errorf("Get after retry: LastError %q, want %q", ti.LastError, "boom: 1")
	}
	e.wantErr("ack with the token of the retried claim", e.settle1(topic, ackOp(c)), ontimedriver.ErrLeaseLost)

	got := e.drain(e.d, topic, map[string]time.Time{"r": ti.Due}, []string{"r"}, longLease)
	c2 := got["r"]
	e.wantClaimAttempt("claim after retry", c2.Attempt, 2)
	e.wantPayload("claim after retry", c2.Payload, []byte("payload"))
	if c2.Token == c.Token {
		e.t.Errorf("claim after retry: token %q reused", c2.Token)
	}

	// Retry at once: claimable immediately, attempt 3.
	e.wantErr("retry with Delay 0", e.settle1(topic, retryOp(c2, 0, "boom: 2")), nil)
	if !e.lacks.NoLastError {
		if got := e.get(topic, "r").LastError; got != "boom: 2" {
			e.t.Errorf("Get after the second retry: LastError %q, want %q", got, "boom: 2")
		}
	}
	c3 := e.claimOne(e.d, topic, "r", longLease)
	e.wantClaimAttempt("claim after retry with Delay 0", c3.Attempt, 3)
	e.wantErr("ack", e.settle1(topic, ackOp(c3)), nil)
	e.wantGone(topic, "r")
}

// testSettleSnooze: snooze schedules again like retry but gives back the
// attempt its claim counted.
func testSettleSnooze(e *env) {
	const topic = "settle.snooze"
	const delay = 300 * time.Millisecond
	e.put(topic, dueNow("s", "payload"))
	c1 := e.claimOne(e.d, topic, "s", longLease)
	e.wantErr("retry", e.settle1(topic, retryOp(c1, 0, "failed")), nil)
	c2 := e.claimOne(e.d, topic, "s", longLease)
	e.wantClaimAttempt("claim after retry", c2.Attempt, 2)

	before := e.now()
	e.wantErr("snooze", e.settle1(topic, snoozeOp(c2, delay)), nil)
	after := e.now()
	ti := e.get(topic, "s")
	e.wantScheduled("Get after snooze", ti, time.Time{}, 1, []byte("payload"))
	if ti.Due.Before(before.Add(delay)) || ti.Due.After(after.Add(delay+time.Millisecond)) {
		e.t.Errorf("Get after snooze with Delay %v: Due %s, want store now + delay within [%s, %s]", delay, ts(ti.Due), ts(before.Add(delay)), ts(after.Add(delay+time.Millisecond)))
	}
	e.wantErr("ack with the token of the snoozed claim", e.settle1(topic, ackOp(c2)), ontimedriver.ErrLeaseLost)

	got := e.drain(e.d, topic, map[string]time.Time{"s": ti.Due}, []string{"s"}, longLease)
	c3 := got["s"]
	e.wantClaimAttempt("claim after snooze", c3.Attempt, 2)

	// Release at shutdown is a snooze with Delay 0: due again at once, the
	// attempt given back.
	e.wantErr("release (snooze 0)", e.settle1(topic, snoozeOp(c3, 0)), nil)
	c4 := e.claimOne(e.d, topic, "s", longLease)
	e.wantClaimAttempt("claim after release", c4.Attempt, 2)
	e.wantErr("ack", e.settle1(topic, ackOp(c4)), nil)
}

// testSettleDead: dead moves the timer to the dead letters with reason, error,
// attempt and payload (or deletes it where there are none).
func testSettleDead(e *env) {
	const topic = "settle.dead"
	payload := []byte{0x00, 'd', 0xff}
	res := e.put(topic, ontimedriver.NewTimer{ID: "d1", Payload: payload}, dueNow("d2", "p2"))
	got := e.claim(topic, 10, longLease)
	if len(got.Timers) != 2 {
		e.t.Fatalf("claim: %v, want d1 and d2", claimedIDs(got))
	}
	var d1, d2 ontimedriver.ClaimedTimer
	for _, c := range got.Timers {
		if c.ID == "d1" {
			d1 = c
		} else {
			d2 = c
		}
	}
	// d1 fails once first, so it dies at attempt 2.
	e.wantErr("retry d1", e.settle1(topic, retryOp(d1, 0, "first")), nil)
	d1 = e.claimOne(e.d, topic, "d1", longLease)

	longErr := strings.Repeat("0123456789abcdef", 128) // 2 KiB
	before := e.now()
	errs := e.settle(topic,
		deadOp(d1, ontimedriver.ReasonMaxAttempts, "boom"),
		deadOp(d2, "free text reason", longErr),
	)
	after := e.now()
	e.wantErr("dead d1", errs[0], nil)
	e.wantErr("dead d2", errs[1], nil)
	e.wantGone(topic, "d1")
	e.wantGone(topic, "d2")
	e.wantErr("ack after dead", e.settle1(topic, ackOp(d1)), ontimedriver.ErrLeaseLost)
	e.wantCounts(topic, 0, 0, 2)
	if got := e.claim(topic, 10, longLease); len(got.Timers) != 0 {
		e.t.Errorf("claim after dead: got %v", claimedIDs(got))
	}

	dead := e.listDeadAll(topic, ontimedriver.ListOptions{})
	if e.lacks.NoDeadLetters {
		if len(dead) != 0 {
			e.t.Errorf("ListDead on a driver without dead letters: %q", deadIDs(dead))
		}
		return
	}
	if len(dead) != 2 {
		e.t.Fatalf("ListDead: %q, want d1 and d2", deadIDs(dead))
	}
	for _, dl := range dead {
		if dl.DiedAt.Before(before.Add(-time.Millisecond)) || dl.DiedAt.After(after.Add(time.Millisecond)) {
			e.t.Errorf("dead %s: DiedAt %s, want store now at the settle, within [%s, %s]", dl.ID, ts(dl.DiedAt), ts(before), ts(after))
		}
		switch dl.ID {
		case "d1":
			if !dl.Due.Equal(d1.Due) {
				e.t.Errorf("dead d1: Due %s, want the due it had (set by its retry) %s", ts(dl.Due), ts(d1.Due))
			}
			if want := 2; !e.lacks.NoAttempts && dl.Attempt != want {
				e.t.Errorf("dead d1: Attempt %d, want %d", dl.Attempt, want)
			}
			if dl.Reason != ontimedriver.ReasonMaxAttempts || dl.Error != "boom" {
				e.t.Errorf("dead d1: Reason %q, Error %q; want %q, %q", dl.Reason, dl.Error, ontimedriver.ReasonMaxAttempts, "boom")
			}
			e.wantPayload("dead d1", dl.Payload, payload)
		case "d2":
			if !dl.Due.Equal(res[1].Due) {
				e.t.Errorf("dead d2: Due %s, want the due it had %s", ts(dl.Due), ts(res[1].Due))
			}
			if want := 1; !e.lacks.NoAttempts && dl.Attempt != want {
				e.t.Errorf("dead d2: Attempt %d, want %d", dl.Attempt, want)
			}
			if dl.Reason != "free text reason" {
				e.t.Errorf("dead d2: Reason %q, want %q", dl.Reason, "free text reason")
			}
			if len(dl.Error) < 1024 || len(dl.Error) > len(longErr) || !strings.HasPrefix(longErr, dl.Error[:1000]) {
				e.t.Errorf("dead d2: Error of %d bytes %q..., want the 2 KiB error, truncated to no less than 1 KiB", len(dl.Error), dl.Error[:min(len(dl.Error), 40)])
			}
			e.wantPayload("dead d2", dl.Payload, []byte("p2"))
		default:
			e.t.Errorf("ListDead: unknown id %q", dl.ID)
		}
	}
}

// testSettleWrongToken: a wrong token changes nothing, for every kind.
func testSettleWrongToken(e *env) {
	const topic = "settle.wrong-token"
	res := e.put(topic, dueNow("w", "payload"))
	c := e.claimOne(e.d, topic, "w", longLease)
	before := e.get(topic, "w")
	for _, tok := range []string{"", "not-a-token", c.Token + "x", "0"} {
		for _, op := range []ontimedriver.Settlement{
			ackOp(c), retryOp(c, 0, "x"), snoozeOp(c, 0), deadOp(c, "x", "x"),
		} {
			e.wantErr("settle "+op.Kind.String()+" with token "+tok, e.settle1(topic, withToken(op, tok)), ontimedriver.ErrLeaseLost)
		}
		e.wantErr("extend with token "+tok, e.extend(topic, time.Hour, ontimedriver.Lease{ID: "w", Token: tok})[0], ontimedriver.ErrLeaseLost)
	}
	after := e.get(topic, "w")
	e.wantLeased("Get after the refused settles", after, c, res[0].Due)
	if !after.LeaseUntil.Equal(before.LeaseUntil) || !after.Due.Equal(before.Due) || after.Attempt != before.Attempt || after.State != before.State {
		e.t.Errorf("refused settles changed the timer: before %+v, after %+v", before, after)
	}
	e.wantCounts(topic, 0, 1, 0)
	if got := e.listDeadAll(topic, ontimedriver.ListOptions{}); len(got) != 0 {
		e.t.Errorf("a refused dead created dead letters %q", deadIDs(got))
	}
	e.wantErr("ack with the right token", e.settle1(topic, ackOp(c)), nil)
	e.wantGone(topic, "w")
}

// testSettleLostToPeer: once an expired lease is claimed by another worker,
// the first worker's token is refused for every kind and for Extend.
func testSettleLostToPeer(e *env) {
	const topic = "settle.lost-to-peer"
	res := e.put(topic, dueNow("x", "payload"))
	c1 := e.claimOne(e.d, topic, "x", shortLease)
	e.waitStorePast(c1.LeaseUntil)
	c2 := e.claimOne(e.peer(), topic, "x", longLease)
	for _, op := range []ontimedriver.Settlement{
		ackOp(c1), retryOp(c1, 0, "x"), snoozeOp(c1, 0), deadOp(c1, "x", "x"),
	} {
		e.wantErr("settle "+op.Kind.String()+" with the lost lease", e.settle1(topic, op), ontimedriver.ErrLeaseLost)
	}
	e.wantErr("extend the lost lease", e.extend(topic, time.Hour, leaseOf(c1))[0], ontimedriver.ErrLeaseLost)
	e.wantLeased("Get after the refused settles", e.get(topic, "x"), c2, res[0].Due)
	e.wantCounts(topic, 0, 1, 0)
	if _, err := e.peer().Settle(e.ctx, topic, []ontimedriver.Settlement{ackOp(c2)}); err != nil {
		e.t.Fatalf("peer Settle: %v", err)
	}
	e.wantGone(topic, "x")
}

// testSettleRepublished: a timer re-published while leased survives the old
// lease's ack, with its new payload.
func testSettleRepublished(e *env) {
	const topic = "settle.republished"
	e.put(topic, dueNow("re", "v1"))
	c := e.claimOne(e.d, topic, "re", longLease)
	res := e.put(topic, dueNow("re", "v2"))
	for _, op := range []ontimedriver.Settlement{ackOp(c), retryOp(c, time.Hour, "x"), snoozeOp(c, time.Hour), deadOp(c, "x", "x")} {
		e.wantErr(op.Kind.String()+" with the token from before the re-publish", e.settle1(topic, op), ontimedriver.ErrLeaseLost)
	}
	e.wantScheduled("Get after the refused ack", e.get(topic, "re"), res[0].Due, 0, []byte("v2"))
	if got := e.listDeadAll(topic, ontimedriver.ListOptions{}); len(got) != 0 {
		e.t.Errorf("a refused dead created dead letters %q", deadIDs(got))
	}
	c2 := e.claimOne(e.d, topic, "re", longLease)
	e.wantPayload("claim of the re-published timer", c2.Payload, []byte("v2"))
	e.wantClaimAttempt("claim of the re-published timer", c2.Attempt, 1)
	e.wantErr("ack", e.settle1(topic, ackOp(c2)), nil)
}

// testSettleMixed: one Settle call with every kind and refused slots; each
// slot gets its own result and only the refused ones change nothing.
func testSettleMixed(e *env) {
	const topic = "settle.mixed"
	e.put(topic, dueNow("a", "pa"), dueNow("b", "pb"), dueNow("c", "pc"), dueNow("d", "pd"), dueNow("e", "pe"))
	got := e.claim(topic, 10, longLease)
	if len(got.Timers) != 5 {
		e.t.Fatalf("claim: %v, want 5 timers", claimedIDs(got))
	}
	cl := make(map[string]ontimedriver.ClaimedTimer)
	for _, c := range got.Timers {
		cl[c.ID] = c
	}
	errs := e.settle(topic,
		ackOp(cl["a"]),
		retryOp(cl["b"], time.Hour, "eb"),
		withToken(ackOp(cl["e"]), "bogus"),
		snoozeOp(cl["c"], time.Hour),
		ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "ghost", Token: cl["a"].Token}, Kind: ontimedriver.Retry},
		deadOp(cl["d"], ontimedriver.ReasonRejected, "ed"),
	)
	e.wantErr("slot 0 (ack a)", errs[0], nil)
	e.wantErr("slot 1 (retry b)", errs[1], nil)
	e.wantErr("slot 2 (ack e, wrong token)", errs[2], ontimedriver.ErrLeaseLost)
	e.wantErr("slot 3 (snooze c)", errs[3], nil)
	e.wantErr("slot 4 (retry of an absent id)", errs[4], ontimedriver.ErrLeaseLost)
	e.wantErr("slot 5 (dead d)", errs[5], nil)

	e.wantGone(topic, "a")
	e.wantGone(topic, "d")
	e.wantGone(topic, "ghost")
	b := e.get(topic, "b")
	e.wantScheduled("Get(b)", b, time.Time{}, 1, []byte("pb"))
	if !e.lacks.NoLastError && b.LastError != "eb" {
		e.t.Errorf("Get(b): LastError %q, want %q", b.LastError, "eb")
	}
	c := e.get(topic, "c")
	e.wantScheduled("Get(c)", c, time.Time{}, 0, []byte("pc"))
	for _, ti := range []*ontimedriver.TimerInfo{b, c} {
		if ti.Due.Before(got.Now.Add(time.Hour)) {
			e.t.Errorf("Get(%s): Due %s, before the claim's Now + 1h", ti.ID, ts(ti.Due))
		}
	}
	e.wantLeased("Get(e)", e.get(topic, "e"), cl["e"], cl["e"].Due)
	e.wantCounts(topic, 2, 1, 1)
	if !e.lacks.NoDeadLetters {
		dead := e.listDeadAll(topic, ontimedriver.ListOptions{})
		e.wantIDs("ListDead", deadIDs(dead), []string{"d"})
		if len(dead) == 1 && (dead[0].Reason != ontimedriver.ReasonRejected || dead[0].Error != "ed") {
			e.t.Errorf("dead d: Reason %q, Error %q", dead[0].Reason, dead[0].Error)
		}
	}
}

// testExtendPushes: Extend moves the lease deadline so no one else claims the
// timer after the original deadline, and the token stays valid.
func testExtendPushes(e *env) {
	const topic = "extend.pushes"
	res := e.put(topic, dueNow("x", "p"), dueNow("y", "p"))
	got := e.claim(topic, 10, 2*shortLease)
	if len(got.Timers) != 2 {
		e.t.Fatalf("claim: %v, want x and y", claimedIDs(got))
	}
	x, y := got.Timers[0], got.Timers[1]
	if x.ID != "x" {
		x, y = y, x
	}
	before := e.now()
	errs := e.extend(topic, 2*time.Second, leaseOf(x), leaseOf(y))
	after := e.now()
	e.wantErr("extend x", errs[0], nil)
	e.wantErr("extend y", errs[1], nil)
	ti := e.get(topic, "x")
	if !e.lacks.NoLeasedState {
		if ti.State != ontimedriver.StateLeased {
			e.t.Errorf("Get after extend: State %q", ti.State)
		}
		if ti.LeaseUntil.Before(before.Add(2*time.Second-time.Millisecond)) || ti.LeaseUntil.After(after.Add(2*time.Second+time.Millisecond)) {
			e.t.Errorf("Get after extend by 2s: LeaseUntil %s, want store now + 2s within [%s, %s]", ts(ti.LeaseUntil), ts(before.Add(2*time.Second)), ts(after.Add(2*time.Second)))
		}
	}
	if !e.lacks.NoOriginalDue && !ti.Due.Equal(res[0].Due) {
		e.t.Errorf("Get after extend: Due %s, want the scheduled due %s", ts(ti.Due), ts(res[0].Due))
	}
	e.wantStoredAttempt("Get after extend", ti.Attempt, 1)

	// Past the original deadline, a peer claims nothing.
	peer := e.peer()
	orig := x.LeaseUntil
	if y.LeaseUntil.After(orig) {
		orig = y.LeaseUntil
	}
	WaitFor(e.t, waitTimeout, func() bool {
		res := e.claimWith(peer, topic, 10, longLease)
		if len(res.Timers) != 0 {
			e.t.Fatalf("peer claimed %v at store %s, after extending the leases to %s", claimedIDs(res), ts(res.Now), ts(ti.LeaseUntil))
		}
		return res.Now.After(orig.Add(100 * time.Millisecond))
	}, "the store clock to pass the original lease deadline")

	e.wantErr("extend x again", e.extend(topic, longLease, leaseOf(x))[0], nil)
	e.wantErr("ack x after extend", e.settle1(topic, ackOp(x)), nil)
	e.wantErr("retry y after extend", e.settle1(topic, retryOp(y, time.Hour, "later")), nil)
	e.wantGone(topic, "x")
	e.wantCounts(topic, 1, 0, 0)
}

// testExtendLost: Extend refuses leases that were lost (claimed by a peer
// after expiry, cancelled, re-published, settled), slot by slot.
func testExtendLost(e *env) {
	const topic = "extend.lost"
	e.put(topic, dueNow("expired", "p"))
	exp := e.claimOne(e.d, topic, "expired", shortLease)
	e.waitStorePast(exp.LeaseUntil)
	taken := e.claimOne(e.peer(), topic, "expired", longLease)

	e.put(topic, dueNow("cancelled", "p"), dueNow("republished", "p"), dueNow("acked", "p"), dueNow("live", "p"))
	got := e.claim(topic, 10, longLease)
	if len(got.Timers) != 4 {
		e.t.Fatalf("claim: %v, want 4 timers", claimedIDs(got))
	}
	cl := make(map[string]ontimedriver.ClaimedTimer)
	for _, c := range got.Timers {
		cl[c.ID] = c
	}
	if err := e.d.Cancel(e.ctx, topic, "cancelled"); err != nil {
		e.t.Fatalf("Cancel: %v", err)
	}
	e.put(topic, dueIn("republished", time.Hour, "p2"))
	e.wantErr("ack", e.settle1(topic, ackOp(cl["acked"])), nil)

	errs := e.extend(topic, time.Hour,
		leaseOf(exp), leaseOf(cl["cancelled"]), leaseOf(cl["live"]), leaseOf(cl["republished"]), leaseOf(cl["acked"]))
	e.wantErr("extend the lease lost to a peer", errs[0], ontimedriver.ErrLeaseLost)
	e.wantErr("extend a cancelled timer", errs[1], ontimedriver.ErrLeaseLost)
	e.wantErr("extend a live lease", errs[2], nil)
	e.wantErr("extend a re-published timer", errs[3], ontimedriver.ErrLeaseLost)
	e.wantErr("extend an acked timer", errs[4], ontimedriver.ErrLeaseLost)

	e.wantLeased("Get(expired), held by the peer", e.get(topic, "expired"), taken, taken.Due)
	e.wantGone(topic, "cancelled")
	e.wantGone(topic, "acked")
	e.wantScheduled("Get(republished)", e.get(topic, "republished"), time.Time{}, 0, []byte("p2"))
	e.wantCounts(topic, 1, 2, 0)
}

// testCancelScheduled: cancel deletes a scheduled timer; twice is ErrNotFound.
func testCancelScheduled(e *env) {
	const topic = "cancel.scheduled"
	e.put(topic, dueIn("c", time.Hour, "p"), dueIn("keep", time.Hour, "k"))
	e.wantErr("cancel", e.d.Cancel(e.ctx, topic, "c"), nil)
	e.wantGone(topic, "c")
	e.wantErr("cancel again", e.d.Cancel(e.ctx, topic, "c"), ontimedriver.ErrNotFound)
	e.wantCounts(topic, 1, 0, 0)
	e.wantIDs("List after cancel", timerIDs(e.listAll(topic, ontimedriver.ListOptions{})), []string{"keep"})
}

// testCancelLeased: cancel deletes a leased timer; its lease is then refused
// and it never comes back.
func testCancelLeased(e *env) {
	const topic = "cancel.leased"
	e.put(topic, dueNow("c", "p"))
	c := e.claimOne(e.d, topic, "c", shortLease)
	e.wantErr("cancel a leased timer", e.d.Cancel(e.ctx, topic, "c"), nil)
	e.wantGone(topic, "c")
	e.wantErr("ack after cancel", e.settle1(topic, ackOp(c)), ontimedriver.ErrLeaseLost)
	e.wantErr("retry after cancel", e.settle1(topic, retryOp(c, 0, "x")), ontimedriver.ErrLeaseLost)
	e.wantGone(topic, "c")
	e.wantCounts(topic, 0, 0, 0)
	// Past the lease deadline it is not claimable either.
	e.waitStorePast(c.LeaseUntil)
	if got := e.claim(topic, 10, longLease); len(got.Timers) != 0 || !got.Next.IsZero() {
		e.t.Errorf("claim after cancel and lease expiry: %v, Next %s; want nothing and zero Next", claimedIDs(got), ts(got.Next))
	}
}

// testCancelAbsent: cancel of an absent id, and of a dead letter, is
// ErrNotFound and leaves the dead letter alone.
func testCancelAbsent(e *env) {
	const topic = "cancel.absent"
	e.wantErr("cancel in an empty topic", e.d.Cancel(e.ctx, topic, "nope"), ontimedriver.ErrNotFound)
	e.put(topic, dueNow("dl", "p"))
	c := e.claimOne(e.d, topic, "dl", longLease)
	e.wantErr("dead", e.settle1(topic, deadOp(c, ontimedriver.ReasonRejected, "x")), nil)
	e.wantErr("cancel of a dead letter", e.d.Cancel(e.ctx, topic, "dl"), ontimedriver.ErrNotFound)
	e.wantErr("cancel of an absent id", e.d.Cancel(e.ctx, topic, "nope"), ontimedriver.ErrNotFound)
	e.wantCounts(topic, 0, 0, 1)
}

// cancelBatch calls CancelBatch and fails the test on a call error or a
// result of the wrong length.
func (e *env) cancelBatch(topic string, ids ...string) []error {
	e.t.Helper()
	res, err := e.d.CancelBatch(e.ctx, topic, ids)
	if err != nil {
		e.t.Fatalf("CancelBatch(%s, %q): %v", topic, ids, err)
	}
	if len(res) != len(ids) {
		e.t.Fatalf("CancelBatch(%s, %q): %d results, want %d", topic, ids, len(res), len(ids))
	}
	return res
}

// testCancelBatch: one call deletes scheduled and leased timers; an absent
// id, a dead letter, an id of another topic and an id given twice (its
// second slot) are ErrNotFound; what was not named stays, and a cancelled
// lease is refused.
func testCancelBatch(e *env) {
	const topic, other = "cancel.batch", "cancel.batch.other"
	e.put(topic, dueNow("leased", "p"))
	leased := e.claimOne(e.d, topic, "leased", longLease)
	e.put(topic, dueNow("dl", "p"))
	dl := e.claimOne(e.d, topic, "dl", longLease)
	e.wantErr("dead", e.settle1(topic, deadOp(dl, ontimedriver.ReasonRejected, "x")), nil)
	e.put(topic, dueIn("s1", time.Hour, "p"), dueIn("s2", time.Minute, "p"), dueIn("keep", time.Hour, "k"))
	e.put(other, dueIn("elsewhere", time.Hour, "o"))

	res := e.cancelBatch(topic, "s1", "leased", "nope", "dl", "s2", "s1", "elsewhere")
	for i, want := range []error{nil, nil, ontimedriver.ErrNotFound, ontimedriver.ErrNotFound, nil, ontimedriver.ErrNotFound, ontimedriver.ErrNotFound} {
		e.wantErr(fmt.Sprintf("CancelBatch result %d", i), res[i], want)
	}
	for _, id := range []string{"s1", "s2", "leased"} {
		e.wantGone(topic, id)
	}
	e.wantErr("ack a cancelled lease", e.settle1(topic, ackOp(leased)), ontimedriver.ErrLeaseLost)
	e.wantCounts(topic, 1, 0, 1)
	e.wantIDs("List after CancelBatch", timerIDs(e.listAll(topic, ontimedriver.ListOptions{})), []string{"keep"})
	if !e.lacks.NoDeadLetters {
		e.wantIDs("ListDead after CancelBatch", deadIDs(e.listDeadAll(topic, ontimedriver.ListOptions{})), []string{"dl"})
	}
	e.wantScheduled("Get in the other topic", e.get(other, "elsewhere"), time.Time{}, 0, []byte("o"))
	// Cancelled timers are never claimed.
	if got := e.claim(topic, 10, longLease); len(got.Timers) != 0 {
		e.t.Errorf("claim after CancelBatch: %v, want nothing due", claimedIDs(got))
	}
}

// testCancelBatchEmpty: nil and empty ids cancel nothing, and say so with
// an empty result.
func testCancelBatchEmpty(e *env) {
	const topic = "cancel.batch.empty"
	e.put(topic, dueIn("a", time.Hour, "p"))
	for _, ids := range [][]string{nil, {}} {
		res, err := e.d.CancelBatch(e.ctx, topic, ids)
		if err != nil || res == nil || len(res) != 0 {
			e.t.Errorf("CancelBatch(%#v) = %#v, %v; want an empty result, nil", ids, res, err)
		}
	}
	e.wantCounts(topic, 1, 0, 0)
}

// testCancelBatchEmptiesTopic: a batch that deletes every timer of a topic
// takes the topic out of Topics, and out of the topic index.
func testCancelBatchEmptiesTopic(e *env) {
	const topic = "cancel.batch.emptied"
	ids := make([]string, 300)
	timers := make([]ontimedriver.NewTimer, len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("t%03d", i)
		timers[i] = dueNow(ids[i], "p")
	}
	e.put(topic, timers...)
	for i, err := range e.cancelBatch(topic, ids...) {
		e.wantErr("CancelBatch "+ids[i], err, nil)
	}
	e.wantCounts(topic, 0, 0, 0)
	topics, err := e.d.Topics(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if slices.Contains(topics, topic) {
		e.t.Errorf("Topics after cancelling every timer = %q, want %s left out", topics, topic)
	}
	if idx, ok := e.d.(ontimedriver.TopicIndex); ok && idx.TopicIndexed() {
		r := e.dueTopics("*", 10)
		if slices.Contains(r.Topics, topic) {
			e.t.Errorf("DueTopics after cancelling every timer = %q, want %s left out", r.Topics, topic)
		}
	}
}
