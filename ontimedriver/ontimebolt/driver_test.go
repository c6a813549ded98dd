package ontimebolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

var ctx = context.Background()

func TestScheduleAndGet(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	at := time.Now().Add(time.Hour).Add(1234 * time.Nanosecond) // not on a µs
	before := time.Now()
	res := schedule(t, d, "orders",
		ontimedriver.NewTimer{ID: "a", At: at, Payload: []byte("pa")},
		ontimedriver.NewTimer{ID: "b", Delay: time.Minute, Payload: []byte("pb")},
	)
	after := time.Now()
	if res[0].Due.Before(at) || res[0].Due.Sub(at) >= time.Microsecond {
		t.Errorf("At: due %v, want %v rounded up to the µs", res[0].Due, at)
	}
	if res[1].Due.Before(before.Add(time.Minute)) || res[1].Due.After(after.Add(time.Minute+time.Microsecond)) {
		t.Errorf("Delay: due %v, want about now+1m", res[1].Due)
	}
	got, err := d.Get(ctx, "orders", "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "a" || !got.Due.Equal(res[0].Due) || got.State != ontimedriver.StateScheduled ||
		got.Attempt != 0 || !got.LeaseUntil.IsZero() || string(got.Payload) != "pa" {
		t.Errorf("Get = %+v", got)
	}
	if _, err := d.Get(ctx, "orders", "nope"); !errors.Is(err, ontimedriver.ErrNotFound) {
		t.Errorf("Get missing: %v, want ErrNotFound", err)
	}
	if _, err := d.Get(ctx, "no-topic", "a"); !errors.Is(err, ontimedriver.ErrNotFound) {
		t.Errorf("Get missing topic: %v, want ErrNotFound", err)
	}
}

func TestScheduleIfAbsent(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	first := schedule(t, d, "q", ontimedriver.NewTimer{ID: "a", Delay: time.Hour, Payload: []byte("1")})
	res, err := d.Schedule(ctx, "q", []ontimedriver.NewTimer{
		{ID: "a", Delay: time.Second, Payload: []byte("2")},
		{ID: "b", Delay: time.Second, Payload: []byte("3")},
		{ID: "b", Delay: time.Second, Payload: []byte("4")}, // same id twice in one call
	}, ontimedriver.IfAbsent)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, ontimedriver.ErrExists) || !res[0].Due.Equal(first[0].Due) {
		t.Errorf("slot 0 = %+v, want ErrExists with the stored due", res[0])
	}
	if res[1].Err != nil || !errors.Is(res[2].Err, ontimedriver.ErrExists) {
		t.Errorf("slots 1, 2 = %v, %v", res[1].Err, res[2].Err)
	}
	a, _ := d.Get(ctx, "q", "a")
	b, _ := d.Get(ctx, "q", "b")
	if string(a.Payload) != "1" || string(b.Payload) != "3" {
		t.Errorf("payloads %q %q, want 1 3", a.Payload, b.Payload)
	}

	// A leased timer exists too; a dead letter does not.
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "c"})
	c := claim(t, d, "q", 10, time.Minute)
	if !slices.Equal(ids(c.Timers), []string{"c"}) {
		t.Fatalf("claimed %v", ids(c.Timers))
	}
	res, _ = d.Schedule(ctx, "q", []ontimedriver.NewTimer{{ID: "c"}}, ontimedriver.IfAbsent)
	if !errors.Is(res[0].Err, ontimedriver.ErrExists) {
		t.Errorf("leased: %v, want ErrExists", res[0].Err)
	}
	settle(t, d, "q", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "c", Token: c.Timers[0].Token}, Kind: ontimedriver.Dead})
	res, _ = d.Schedule(ctx, "q", []ontimedriver.NewTimer{{ID: "c"}}, ontimedriver.IfAbsent)
	if res[0].Err != nil {
		t.Errorf("dead letter blocked IfAbsent: %v", res[0].Err)
	}
}

func TestClaimOrderAttemptAndNext(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	now := time.Now()
	schedule(t, d, "q",
		ontimedriver.NewTimer{ID: "t3", At: now.Add(-1 * time.Second), Payload: []byte("3")},
		ontimedriver.NewTimer{ID: "t1", At: now.Add(-3 * time.Second), Payload: []byte("1")},
		ontimedriver.NewTimer{ID: "t2", At: now.Add(-2 * time.Second), Payload: []byte("2")},
		ontimedriver.NewTimer{ID: "later", At: now.Add(time.Hour)},
	)
	r := claim(t, d, "q", 2, time.Minute)
	if !slices.Equal(ids(r.Timers), []string{"t1", "t2"}) {
		t.Fatalf("claimed %v, want [t1 t2]", ids(r.Timers))
	}
	for i, ct := range r.Timers {
		if ct.Attempt != 1 || ct.Token == "" || string(ct.Payload) != fmt.Sprint(i+1) ||
			!ct.LeaseUntil.After(r.Now) || ct.Due.After(r.Now) {
			t.Errorf("claimed %+v (now %v)", ct, r.Now)
		}
	}
	if r.Timers[0].Token == r.Timers[1].Token {
		t.Error("two claims share a token")
	}
	// t3 is still due: Next is in the past.
	if !r.Next.Equal(now.Add(-time.Second).Truncate(time.Microsecond)) && !r.Next.Before(r.Now) {
		t.Errorf("Next = %v, want t3's due", r.Next)
	}
	r2 := claim(t, d, "q", 10, time.Minute)
	if !slices.Equal(ids(r2.Timers), []string{"t3"}) {
		t.Fatalf("claimed %v, want [t3]", ids(r2.Timers))
	}
	// Now the earliest claimable is the first lease deadline.
	if !r2.Next.Equal(r.Timers[0].LeaseUntil) {
		t.Errorf("Next = %v, want first lease deadline %v", r2.Next, r.Timers[0].LeaseUntil)
	}
	info, _ := d.Get(ctx, "q", "t1")
	if info.State != ontimedriver.StateLeased || !info.LeaseUntil.Equal(r.Timers[0].LeaseUntil) || info.Attempt != 1 {
		t.Errorf("Get leased = %+v", info)
	}
	// Empty topic and claim of zero.
	r3 := claim(t, d, "empty", 10, time.Minute)
	if len(r3.Timers) != 0 || !r3.Next.IsZero() || r3.Now.IsZero() {
		t.Errorf("empty topic claim = %+v", r3)
	}
}

// Bad arguments fail the whole call with ErrInvalid and change nothing, as
// with the Redis driver: a negative delay, a claim of no timers or without
// a lease, an unknown settlement kind.
func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	invalid := func(what string, err error, want string) {
		t.Helper()
		if !errors.Is(err, ontimedriver.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrInvalid mentioning %q", what, err, want)
		}
	}
	_, err := d.Schedule(ctx, "q", []ontimedriver.NewTimer{{ID: "ok"}, {ID: "neg", Delay: -time.Millisecond}}, ontimedriver.Upsert)
	invalid("Schedule with a negative delay", err, "negative delay")
	_, err = d.Schedule(ctx, "q", []ontimedriver.NewTimer{{ID: "ok"}, {ID: "neg", At: time.Now(), Delay: -1}}, ontimedriver.IfAbsent)
	invalid("Schedule with At and a negative delay", err, "negative delay")
	if _, err := d.Get(ctx, "q", "ok"); !errors.Is(err, ontimedriver.ErrNotFound) {
		t.Errorf("the valid timer of a refused Schedule was written: %v", err)
	}

	schedule(t, d, "q", ontimedriver.NewTimer{ID: "a"}, ontimedriver.NewTimer{ID: "b"})
	for _, limit := range []int{0, -1} {
		_, err := d.Claim(ctx, "q", limit, time.Minute)
		invalid(fmt.Sprintf("Claim of %d", limit), err, "max")
	}
	for _, lease := range []time.Duration{0, -time.Second} {
		_, err := d.Claim(ctx, "q", 1, lease)
		invalid(fmt.Sprintf("Claim with lease %v", lease), err, "lease")
	}
	if c, _ := d.Count(ctx, "q"); c != (ontimedriver.Counts{Scheduled: 2}) {
		t.Fatalf("refused claims leased timers: Count = %+v", c)
	}

	r := claim(t, d, "q", 2, time.Minute)
	la := ontimedriver.Lease{ID: r.Timers[0].ID, Token: r.Timers[0].Token}
	lb := ontimedriver.Lease{ID: r.Timers[1].ID, Token: r.Timers[1].Token}
	_, err = d.Settle(ctx, "q", []ontimedriver.Settlement{{Lease: la, Kind: ontimedriver.Ack}, {Lease: lb, Kind: ontimedriver.Retry, Delay: -time.Second}})
	invalid("Settle with a negative delay", err, "negative delay")
	_, err = d.Settle(ctx, "q", []ontimedriver.Settlement{{Lease: la, Kind: ontimedriver.Ack}, {Lease: lb, Kind: ontimedriver.SettleKind(9)}})
	invalid("Settle with an unknown kind", err, "unknown kind")
	_, err = d.Extend(ctx, "q", []ontimedriver.Lease{la}, 0)
	invalid("Extend with lease 0", err, "lease")
	// Nothing was applied: both leases still hold with their tokens.
	if c, _ := d.Count(ctx, "q"); c != (ontimedriver.Counts{Leased: 2}) {
		t.Errorf("refused settlements changed the store: Count = %+v", c)
	}
	errs := settle(t, d, "q", ontimedriver.Settlement{Lease: la}, ontimedriver.Settlement{Lease: lb})
	if errs[0] != nil || errs[1] != nil {
		t.Errorf("ack after the refused calls: %v", errs)
	}
}

// A lease token fences only as the exact string Claim handed out: another
// spelling of the same number is a different token.
func TestTokenMustMatchExactly(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	var timers []ontimedriver.NewTimer
	for i := range 12 { // tokens 1..12 in base 36: the last ones are letters
		timers = append(timers, ontimedriver.NewTimer{ID: fmt.Sprint(i)})
	}
	schedule(t, d, "q", timers...)
	r := claim(t, d, "q", 12, time.Hour)
	ct := r.Timers[11]
	if strings.ToUpper(ct.Token) == ct.Token {
		t.Fatalf("token %q has no letter; the test needs one", ct.Token)
	}
	for _, forged := range []string{strings.ToUpper(ct.Token), "0" + ct.Token, "00" + ct.Token} {
		l := ontimedriver.Lease{ID: ct.ID, Token: forged}
		if errs, _ := d.Extend(ctx, "q", []ontimedriver.Lease{l}, time.Hour); !errors.Is(errs[0], ontimedriver.ErrLeaseLost) {
			t.Errorf("Extend with %q for token %q: %v, want ErrLeaseLost", forged, ct.Token, errs[0])
		}
		if errs := settle(t, d, "q", ontimedriver.Settlement{Lease: l}); !errors.Is(errs[0], ontimedriver.ErrLeaseLost) {
			t.Errorf("ack with %q for token %q: %v, want ErrLeaseLost", forged, ct.Token, errs[0])
		}
	}
	if errs := settle(t, d, "q", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: ct.ID, Token: ct.Token}}); errs[0] != nil {
		t.Errorf("ack with the real token: %v", errs[0])
	}
}

func TestNeverClaimableEarly(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	at := time.Now().Add(30 * time.Millisecond).Add(777 * time.Nanosecond)
	res := schedule(t, d, "q", ontimedriver.NewTimer{ID: "x", At: at})
	for {
		r := claim(t, d, "q", 1, time.Minute)
		if len(r.Timers) == 1 {
			if now := time.Now(); now.Before(at) {
				t.Fatalf("claimed at %v, due %v", now, at)
			}
			if r.Now.Before(res[0].Due) {
				t.Fatalf("claim Now %v before due %v", r.Now, res[0].Due)
			}
			return
		}
		if r.Next.Before(at) {
			t.Fatalf("Next %v before due %v", r.Next, at)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestExpiredLeaseIsClaimedAgain(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "x"})
	r1 := claim(t, d, "q", 1, time.Minute)
	if len(r1.Timers) != 1 {
		t.Fatal("not claimed")
	}
	if r := claim(t, d, "q", 1, time.Minute); len(r.Timers) != 0 {
		t.Fatal("claimed while leased")
	}
	// Shorten the lease to a millisecond and wait for the store to see it
	// expired (no fixed sleep: a busy machine may take longer).
	if errs, err := d.Extend(ctx, "q", []ontimedriver.Lease{{ID: "x", Token: r1.Timers[0].Token}}, time.Millisecond); err != nil || errs[0] != nil {
		t.Fatalf("extend to 1ms: %v, %v", errs, err)
	}
	wait.For(t, 10*time.Second, func() bool {
		info, err := d.Get(ctx, "q", "x")
		return err == nil && info.State == ontimedriver.StateScheduled
	}, "the shortened lease to expire")
	info, _ := d.Get(ctx, "q", "x")
	if info.State != ontimedriver.StateScheduled || !info.LeaseUntil.IsZero() || info.Attempt != 1 {
		t.Errorf("expired lease: Get = %+v, want scheduled", info)
	}
	if c, _ := d.Count(ctx, "q"); c.Scheduled != 1 || c.Leased != 0 {
		t.Errorf("Count = %+v", c)
	}
	r2 := claim(t, d, "q", 1, time.Minute)
	if len(r2.Timers) != 1 || r2.Timers[0].Attempt != 2 || r2.Timers[0].Token == r1.Timers[0].Token {
		t.Fatalf("reclaim = %+v", r2.Timers)
	}
	lost := ontimedriver.Lease{ID: "x", Token: r1.Timers[0].Token}
	if errs := settle(t, d, "q", ontimedriver.Settlement{Lease: lost, Kind: ontimedriver.Ack}); !errors.Is(errs[0], ontimedriver.ErrLeaseLost) {
		t.Errorf("old token ack: %v, want ErrLeaseLost", errs[0])
	}
	if errs, _ := d.Extend(ctx, "q", []ontimedriver.Lease{lost}, time.Minute); !errors.Is(errs[0], ontimedriver.ErrLeaseLost) {
		t.Errorf("old token extend: %v, want ErrLeaseLost", errs[0])
	}
	if c, _ := d.Count(ctx, "q"); c.Scheduled != 0 || c.Leased != 1 {
		t.Errorf("Count = %+v", c)
	}
}

// A handler that re-publishes its own id and then acks must keep the new
// timer: the ack is fenced by the old lease token.
func TestFencingRepublishWhileLeased(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "x", Payload: []byte("old")})
	r := claim(t, d, "q", 1, time.Minute)
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "x", Delay: time.Hour, Payload: []byte("new")})
	lease := ontimedriver.Lease{ID: "x", Token: r.Timers[0].Token}
	for _, kind := range []ontimedriver.SettleKind{ontimedriver.Ack, ontimedriver.Retry, ontimedriver.Snooze, ontimedriver.Dead} {
		if errs := settle(t, d, "q", ontimedriver.Settlement{Lease: lease, Kind: kind}); !errors.Is(errs[0], ontimedriver.ErrLeaseLost) {
			t.Errorf("%v after re-publish: %v, want ErrLeaseLost", kind, errs[0])
		}
	}
	info, err := d.Get(ctx, "q", "x")
	if err != nil || string(info.Payload) != "new" || info.State != ontimedriver.StateScheduled || info.Attempt != 0 {
		t.Fatalf("after fenced ack: %+v, %v", info, err)
	}
	if c, _ := d.Count(ctx, "q"); c != (ontimedriver.Counts{Scheduled: 1}) {
		t.Errorf("Count = %+v", c)
	}
	// Cancel also invalidates the token.
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "y"})
	r = claim(t, d, "q", 1, time.Minute)
	if err := d.Cancel(ctx, "q", "y"); err != nil {
		t.Fatal(err)
	}
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "y", Delay: time.Hour})
	if errs := settle(t, d, "q", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "y", Token: r.Timers[0].Token}}); !errors.Is(errs[0], ontimedriver.ErrLeaseLost) {
		t.Errorf("ack after cancel+re-publish: %v", errs[0])
	}
	if _, err := d.Get(ctx, "q", "y"); err != nil {
		t.Errorf("re-published timer lost: %v", err)
	}
}

func TestSettleKinds(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	schedule(t, d, "q",
		ontimedriver.NewTimer{ID: "ack", Payload: []byte("A")},
		ontimedriver.NewTimer{ID: "retry", Payload: []byte("R")},
		ontimedriver.NewTimer{ID: "snooze", Payload: []byte("S")},
		ontimedriver.NewTimer{ID: "dead", Payload: []byte("D")},
	)
	r := claim(t, d, "q", 10, time.Minute)
	tok := map[string]string{}
	for _, ct := range r.Timers {
		tok[ct.ID] = ct.Token
	}
	lease := func(id string) ontimedriver.Lease { return ontimedriver.Lease{ID: id, Token: tok[id]} }
	before := time.Now()
	errs := settle(t, d, "q",
		ontimedriver.Settlement{Lease: lease("ack"), Kind: ontimedriver.Ack},
		ontimedriver.Settlement{Lease: lease("retry"), Kind: ontimedriver.Retry, Delay: time.Hour, Error: "boom"},
		ontimedriver.Settlement{Lease: lease("snooze"), Kind: ontimedriver.Snooze, Delay: time.Hour},
		ontimedriver.Settlement{Lease: lease("dead"), Kind: ontimedriver.Dead, Reason: ontimedriver.ReasonRejected, Error: "bad"},
		ontimedriver.Settlement{Lease: lease("ack"), Kind: ontimedriver.Ack}, // twice: the first one won
		ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "retry", Token: "zzz"}, Kind: ontimedriver.Ack},
	)
	for i, want := range []error{nil, nil, nil, nil, ontimedriver.ErrLeaseLost, ontimedriver.ErrLeaseLost} {
		if !errors.Is(errs[i], want) || (want == nil && errs[i] != nil) {
			t.Errorf("slot %d: %v, want %v", i, errs[i], want)
		}
	}
	if _, err := d.Get(ctx, "q", "ack"); !errors.Is(err, ontimedriver.ErrNotFound) {
		t.Errorf("acked timer: %v", err)
	}
	rt, _ := d.Get(ctx, "q", "retry")
	if rt.Attempt != 1 || rt.LastError != "boom" || rt.State != ontimedriver.StateScheduled || rt.Due.Before(before.Add(time.Hour)) {
		t.Errorf("retried = %+v", rt)
	}
	sn, _ := d.Get(ctx, "q", "snooze")
	if sn.Attempt != 0 || sn.Due.Before(before.Add(time.Hour)) {
		t.Errorf("snoozed = %+v", sn)
	}
	page, err := d.ListDead(ctx, "q", ontimedriver.ListOptions{})
	if err != nil || len(page.Dead) != 1 {
		t.Fatalf("ListDead = %+v, %v", page, err)
	}
	dl := page.Dead[0]
	if dl.ID != "dead" || dl.Reason != ontimedriver.ReasonRejected || dl.Error != "bad" || dl.Attempt != 1 ||
		string(dl.Payload) != "D" || dl.DiedAt.Before(before.Truncate(time.Microsecond)) {
		t.Errorf("dead letter = %+v", dl)
	}
	if c, _ := d.Count(ctx, "q"); c != (ontimedriver.Counts{Scheduled: 2, Dead: 1}) {
		t.Errorf("Count = %+v", c)
	}
	// A long error is truncated to 1 KiB.
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "long"})
	r = claim(t, d, "q", 1, time.Minute)
	settle(t, d, "q", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "long", Token: r.Timers[0].Token}, Kind: ontimedriver.Retry, Error: strings.Repeat("é", 1000)})
	if lt, _ := d.Get(ctx, "q", "long"); len(lt.LastError) > 1024 || len(lt.LastError) < 1020 {
		t.Errorf("last error is %d bytes", len(lt.LastError))
	}
}

func TestSnoozeReleaseIsDueAtOnce(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "x"})
	r := claim(t, d, "q", 1, time.Hour)
	settle(t, d, "q", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "x", Token: r.Timers[0].Token}, Kind: ontimedriver.Snooze})
	r = claim(t, d, "q", 1, time.Hour)
	if len(r.Timers) != 1 || r.Timers[0].Attempt != 1 {
		t.Fatalf("after release: %+v", r.Timers)
	}
}

// TestExtend runs in a bubble (testing/synctest): the 50 ms lease does not
// run out before the Extend on a loaded machine, and the sleep past it is
// the bubble's.
func TestExtend(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testExtend)
}

func testExtend(t *testing.T) {
	d, _ := open(t, nil)
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "x"})
	r := claim(t, d, "q", 1, 50*time.Millisecond)
	l := ontimedriver.Lease{ID: "x", Token: r.Timers[0].Token}
	errs, err := d.Extend(ctx, "q", []ontimedriver.Lease{l, {ID: "missing", Token: l.Token}}, time.Hour)
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ontimedriver.ErrLeaseLost) {
		t.Fatalf("Extend = %v, %v", errs, err)
	}
	time.Sleep(60 * time.Millisecond)
	if r2 := claim(t, d, "q", 1, time.Hour); len(r2.Timers) != 0 {
		t.Fatal("extended lease was claimed")
	}
	info, _ := d.Get(ctx, "q", "x")
	if info.State != ontimedriver.StateLeased || info.LeaseUntil.Before(time.Now().Add(50*time.Minute)) {
		t.Errorf("Get = %+v", info)
	}
	// The token still works.
	if errs := settle(t, d, "q", ontimedriver.Settlement{Lease: l, Kind: ontimedriver.Ack}); errs[0] != nil {
		t.Errorf("ack after extend: %v", errs[0])
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "a"}, ontimedriver.NewTimer{ID: "b"})
	claim(t, d, "q", 1, time.Hour) // a is leased
	for _, id := range []string{"a", "b"} {
		if err := d.Cancel(ctx, "q", id); err != nil {
			t.Errorf("Cancel %s: %v", id, err)
		}
	}
	if err := d.Cancel(ctx, "q", "a"); !errors.Is(err, ontimedriver.ErrNotFound) {
		t.Errorf("Cancel twice: %v", err)
	}
	if err := d.Cancel(ctx, "nope", "a"); !errors.Is(err, ontimedriver.ErrNotFound) {
		t.Errorf("Cancel in missing topic: %v", err)
	}
	if c, _ := d.Count(ctx, "q"); c != (ontimedriver.Counts{}) {
		t.Errorf("Count = %+v", c)
	}
	if r := claim(t, d, "q", 10, time.Hour); len(r.Timers) != 0 || !r.Next.IsZero() {
		t.Errorf("claim after cancel = %+v", r)
	}
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	base := time.Now().Add(time.Hour).Truncate(time.Second)
	var timers []ontimedriver.NewTimer
	for i := range 25 {
		// Pairs share a due time, so the id breaks ties.
		timers = append(timers, ontimedriver.NewTimer{ID: fmt.Sprintf("id-%02d", 24-i), At: base.Add(time.Duration(i/2) * time.Second)})
	}
	schedule(t, d, "q", timers...)
	var want []string
	for i := 0; i < 25; i += 2 {
		pair := []string{fmt.Sprintf("id-%02d", 24-i)}
		if i+1 < 25 {
			pair = append(pair, fmt.Sprintf("id-%02d", 24-i-1))
		}
		slices.Sort(pair)
		want = append(want, pair...)
	}
	var got []string
	cursor, pages := "", 0
	for {
		p, err := d.List(ctx, "q", ontimedriver.ListOptions{Limit: 10, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, ti := range p.Timers {
			got = append(got, ti.ID)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if !slices.Equal(got, want) || pages != 3 {
		t.Errorf("List in %d pages = %v, want %v", pages, got, want)
	}
	p, _ := d.List(ctx, "q", ontimedriver.ListOptions{Before: base.Add(2 * time.Second)})
	if len(p.Timers) != 4 || p.NextCursor != "" {
		t.Errorf("Before: %d timers, cursor %q", len(p.Timers), p.NextCursor)
	}
	p, _ = d.List(ctx, "q", ontimedriver.ListOptions{Limit: 25})
	if len(p.Timers) != 25 || p.NextCursor != "" {
		t.Errorf("exact page: %d timers, cursor %q", len(p.Timers), p.NextCursor)
	}
	// A leased timer is listed at its lease deadline.
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "now"})
	claim(t, d, "q", 1, 2*time.Hour)
	p, _ = d.List(ctx, "q", ontimedriver.ListOptions{Limit: 1000})
	if last := p.Timers[len(p.Timers)-1]; last.ID != "now" || last.State != ontimedriver.StateLeased {
		t.Errorf("last listed = %+v, want the leased timer", last)
	}
	if _, err := d.List(ctx, "q", ontimedriver.ListOptions{Cursor: "!!"}); !errors.Is(err, ontimedriver.ErrInvalid) {
		t.Errorf("bad cursor: %v", err)
	}
	if p, err := d.List(ctx, "none", ontimedriver.ListOptions{}); err != nil || len(p.Timers) != 0 || p.NextCursor != "" {
		t.Errorf("missing topic: %+v, %v", p, err)
	}
}

func TestCountAndTopics(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	if ts, err := d.Topics(ctx); err != nil || len(ts) != 0 {
		t.Fatalf("Topics = %v, %v", ts, err)
	}
	schedule(t, d, "b.topic", ontimedriver.NewTimer{ID: "1"}, ontimedriver.NewTimer{ID: "2"}, ontimedriver.NewTimer{ID: "3", Delay: time.Hour})
	schedule(t, d, "a/topic", ontimedriver.NewTimer{ID: "1"})
	schedule(t, d, "c", ontimedriver.NewTimer{ID: "1"})
	r := claim(t, d, "b.topic", 2, time.Hour)
	settle(t, d, "b.topic", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: r.Timers[0].ID, Token: r.Timers[0].Token}, Kind: ontimedriver.Dead})
	if c, _ := d.Count(ctx, "b.topic"); c != (ontimedriver.Counts{Scheduled: 1, Leased: 1, Dead: 1}) {
		t.Errorf("Count = %+v", c)
	}
	if err := d.Cancel(ctx, "c", "1"); err != nil {
		t.Fatal(err)
	}
	if ts, _ := d.Topics(ctx); !slices.Equal(ts, []string{"a/topic", "b.topic"}) {
		t.Errorf("Topics = %v", ts)
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	kill := func(id string) {
		t.Helper()
		schedule(t, d, "q", ontimedriver.NewTimer{ID: id, Payload: []byte(id)})
		r := claim(t, d, "q", 100, time.Hour)
		i := slices.Index(ids(r.Timers), id)
		if i < 0 {
			t.Fatalf("%s not claimed", id)
		}
		settle(t, d, "q", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: id, Token: r.Timers[i].Token}, Kind: ontimedriver.Dead, Reason: "r-" + id, Error: "e-" + id})
		time.Sleep(time.Millisecond) // distinct death instants
	}
	for _, id := range []string{"d1", "d2", "d3", "d4"} {
		kill(id)
	}
	// Paging and order of death.
	p1, _ := d.ListDead(ctx, "q", ontimedriver.ListOptions{Limit: 3})
	p2, _ := d.ListDead(ctx, "q", ontimedriver.ListOptions{Limit: 3, Cursor: p1.NextCursor})
	var got []string
	for _, dl := range append(p1.Dead, p2.Dead...) {
		got = append(got, dl.ID)
	}
	if !slices.Equal(got, []string{"d1", "d2", "d3", "d4"}) || p2.NextCursor != "" {
		t.Errorf("ListDead = %v (cursor %q)", got, p2.NextCursor)
	}
	pb, _ := d.ListDead(ctx, "q", ontimedriver.ListOptions{Before: p1.Dead[1].DiedAt})
	if len(pb.Dead) != 1 {
		t.Errorf("ListDead Before = %d letters, want 1", len(pb.Dead))
	}

	// d2 has a live namesake: it stays dead.
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "d2", Delay: time.Hour})
	n, err := d.ReplayDead(ctx, "q", []string{"d1", "d2", "nope"})
	if err != nil || n != 1 {
		t.Fatalf("ReplayDead = %d, %v", n, err)
	}
	info, err := d.Get(ctx, "q", "d1")
	if err != nil || info.Attempt != 0 || string(info.Payload) != "d1" || info.Due.After(time.Now()) {
		t.Errorf("replayed = %+v, %v", info, err)
	}
	if r := claim(t, d, "q", 10, time.Hour); !slices.Equal(ids(r.Timers), []string{"d1"}) {
		t.Errorf("claim after replay = %v", ids(r.Timers))
	}
	n, _ = d.PurgeDead(ctx, "q", []string{"d3", "d3", "x"})
	if n != 1 {
		t.Errorf("PurgeDead = %d, want 1", n)
	}
	if c, _ := d.Count(ctx, "q"); c.Dead != 2 {
		t.Errorf("dead count %d, want 2", c.Dead)
	}
	if err := d.Cancel(ctx, "q", "d2"); err != nil {
		t.Fatal(err)
	}
	n, _ = d.ReplayAllDead(ctx, "q")
	if n != 2 {
		t.Errorf("ReplayAllDead = %d, want 2", n)
	}
	kill("d5")
	kill("d6")
	if n, _ := d.PurgeAllDead(ctx, "q"); n != 2 {
		t.Errorf("PurgeAllDead = %d, want 2", n)
	}
	if c, _ := d.Count(ctx, "q"); c.Dead != 0 {
		t.Errorf("dead count %d, want 0", c.Dead)
	}
}

func TestSubscribe(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	ch, cancel, err := d.Subscribe(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	other, cancelOther, _ := d.Subscribe(ctx, "other")
	defer cancelOther()

	res := schedule(t, d, "q", ontimedriver.NewTimer{ID: "a", Delay: time.Hour})
	select {
	case at := <-ch:
		if !at.Equal(res[0].Due) {
			t.Errorf("notified %v, want %v", at, res[0].Due)
		}
	case <-time.After(time.Second):
		t.Fatal("no notification for the first timer")
	}
	// Later than the head: no notification.
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "b", Delay: 2 * time.Hour})
	select {
	case at := <-ch:
		t.Errorf("notified %v for a later timer", at)
	default:
	}
	// Two earlier ones while nobody reads: the buffer keeps the earliest.
	r1 := schedule(t, d, "q", ontimedriver.NewTimer{ID: "c", Delay: 30 * time.Minute})
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "d", Delay: 40 * time.Minute})
	r3 := schedule(t, d, "q", ontimedriver.NewTimer{ID: "e", Delay: 10 * time.Minute})
	_ = r1
	if at := <-ch; !at.Equal(r3[0].Due) {
		t.Errorf("buffered %v, want the earliest %v", at, r3[0].Due)
	}
	// A retry that becomes the head notifies.
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "now"})
	<-ch
	r := claim(t, d, "q", 1, time.Hour)
	settle(t, d, "q", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "now", Token: r.Timers[0].Token}, Kind: ontimedriver.Retry})
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Error("no notification for a retry at the head")
	}
	select {
	case at := <-other:
		t.Errorf("other topic notified %v", at)
	default:
	}
	cancel()
	cancel()
	if _, ok := <-ch; ok {
		t.Error("channel open after cancel")
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "a"})
	ch, cancel, _ := d.Subscribe(ctx, "q")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, ok := <-ch; ok {
		t.Error("subscription open after Close")
	}
	cancel()
	calls := map[string]error{}
	_, calls["Schedule"] = d.Schedule(ctx, "q", []ontimedriver.NewTimer{{ID: "b"}}, ontimedriver.Upsert)
	_, calls["Claim"] = d.Claim(ctx, "q", 1, time.Second)
	_, calls["Settle"] = d.Settle(ctx, "q", []ontimedriver.Settlement{{}})
	_, calls["Extend"] = d.Extend(ctx, "q", []ontimedriver.Lease{{}}, time.Second)
	calls["Cancel"] = d.Cancel(ctx, "q", "a")
	_, calls["Get"] = d.Get(ctx, "q", "a")
	_, calls["List"] = d.List(ctx, "q", ontimedriver.ListOptions{})
	_, calls["Count"] = d.Count(ctx, "q")
	_, calls["Topics"] = d.Topics(ctx)
	_, calls["ListDead"] = d.ListDead(ctx, "q", ontimedriver.ListOptions{})
	_, calls["ReplayDead"] = d.ReplayDead(ctx, "q", []string{"a"})
	_, calls["ReplayDeadEmpty"] = d.ReplayDead(ctx, "q", nil)
	_, calls["ReplayAllDead"] = d.ReplayAllDead(ctx, "q")
	_, calls["PurgeDead"] = d.PurgeDead(ctx, "q", []string{"a"})
	_, calls["PurgeDeadEmpty"] = d.PurgeDead(ctx, "q", nil)
	_, calls["PurgeAllDead"] = d.PurgeAllDead(ctx, "q")
	_, _, calls["Subscribe"] = d.Subscribe(ctx, "q")
	calls["Ping"] = d.Ping(ctx)
	for name, err := range calls {
		if !errors.Is(err, ontimedriver.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestCloseWhileWriting(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	var wg sync.WaitGroup
	var written atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := d.Schedule(ctx, "q", []ontimedriver.NewTimer{{ID: fmt.Sprintf("%d-%d", g, i)}}, ontimedriver.Upsert)
				if errors.Is(err, ontimedriver.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Schedule: %v", err)
					return
				}
				written.Add(1)
			}
		})
	}
	// Close while the writers are under way (32 timers written between
	// them), not after a sleep a loaded machine may spend before any ran.
	wait.For(t, 30*time.Second, func() bool { return written.Load() >= 8*4 }, "32 writes")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/store.db"
	d1, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	schedule(t, d1, "q", ontimedriver.NewTimer{ID: "a", Payload: []byte("A")}, ontimedriver.NewTimer{ID: "b", Delay: time.Hour})
	r := claim(t, d1, "q", 1, time.Hour)
	settle(t, d1, "q", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "a", Token: r.Timers[0].Token}, Kind: ontimedriver.Dead})
	schedule(t, d1, "q", ontimedriver.NewTimer{ID: "c"})
	r = claim(t, d1, "q", 1, time.Hour)
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}

	d2 := reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
	// The lease of the closed driver's process is dropped at Open: its
	// timer is due again at once, the attempt its claim counted kept, and
	// the old token refused. New tokens do not repeat old ones.
	if c, _ := d2.Count(ctx, "q"); c != (ontimedriver.Counts{Scheduled: 2, Leased: 0, Dead: 1}) {
		t.Errorf("Count after reopen = %+v", c)
	}
	if ti, err := d2.Get(ctx, "q", "c"); err != nil || ti.State != ontimedriver.StateScheduled || ti.Attempt != 1 {
		t.Errorf("c after reopen = %+v, %v; want scheduled, attempt 1", ti, err)
	}
	if errs := settle(t, d2, "q", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "c", Token: r.Timers[0].Token}}); !errors.Is(errs[0], ontimedriver.ErrLeaseLost) {
		t.Errorf("ack with a pre-restart token: %v, want ErrLeaseLost", errs[0])
	}
	r2 := claim(t, d2, "q", 1, time.Hour)
	if len(r2.Timers) != 1 || r2.Timers[0].ID != "c" || r2.Timers[0].Attempt != 2 {
		t.Fatalf("claim after reopen = %+v; want c at attempt 2", r2.Timers)
	}
	if r2.Timers[0].Token == r.Timers[0].Token {
		t.Error("token reused after reopen")
	}
	page, _ := d2.ListDead(ctx, "q", ontimedriver.ListOptions{})
	if len(page.Dead) != 1 || string(page.Dead[0].Payload) != "A" {
		t.Errorf("dead after reopen = %+v", page.Dead)
	}
}

// Concurrent claimers never get the same timer.
func TestConcurrentClaimsAreExclusive(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	const n = 500
	var timers []ontimedriver.NewTimer
	for i := range n {
		timers = append(timers, ontimedriver.NewTimer{ID: fmt.Sprint(i)})
	}
	schedule(t, d, "q", timers...)
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for {
				r, err := d.Claim(ctx, "q", 7, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(r.Timers) == 0 {
					return
				}
				mu.Lock()
				for _, ct := range r.Timers {
					seen[ct.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("claimed %d distinct timers, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("timer %s claimed %d times", id, k)
		}
	}
}

// A call that fails inside a shared transaction fails alone and leaves
// nothing behind; the calls batched with it succeed.
func TestFailedCallDoesNotSpoilItsBatch(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				id := fmt.Sprintf("ok-%d-%d", g, i)
				timers := []ontimedriver.NewTimer{{ID: id}}
				if g%4 == 0 {
					// An id over bbolt's key limit makes bbolt refuse the key mid-call.
					timers = append(timers, ontimedriver.NewTimer{ID: unstorableID})
				}
				_, err := d.Schedule(ctx, "q", timers, ontimedriver.Upsert)
				if g%4 == 0 {
					if err == nil {
						t.Errorf("call with an unstorable id succeeded")
					}
					if _, gerr := d.Get(ctx, "q", id); !errors.Is(gerr, ontimedriver.ErrNotFound) {
						t.Errorf("failed call left %s behind: %v", id, gerr)
					}
				} else if err != nil {
					t.Errorf("Schedule %s: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	if c, _ := d.Count(ctx, "q"); c.Scheduled != 12*20 {
		t.Errorf("Count = %+v, want %d scheduled", c, 12*20)
	}
}

func TestContextCancelled(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Schedule(cctx, "q", []ontimedriver.NewTimer{{ID: "a"}}, ontimedriver.Upsert); !errors.Is(err, context.Canceled) {
		t.Errorf("Schedule: %v", err)
	}
	if _, err := d.Get(cctx, "q", "a"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v", err)
	}
	if _, err := d.Get(ctx, "q", "a"); !errors.Is(err, ontimedriver.ErrNotFound) {
		t.Errorf("cancelled Schedule wrote: %v", err)
	}
}

func TestPayloadsAreCopies(t *testing.T) {
	t.Parallel()
	d, _ := open(t, nil)
	p := []byte("payload")
	schedule(t, d, "q", ontimedriver.NewTimer{ID: "a", Payload: p})
	p[0] = 'X'
	r := claim(t, d, "q", 1, time.Hour)
	if !bytes.Equal(r.Timers[0].Payload, []byte("payload")) {
		t.Errorf("payload = %q", r.Timers[0].Payload)
	}
	// Many more writes: the returned slice must not change under us.
	for i := range 50 {
		schedule(t, d, "q", ontimedriver.NewTimer{ID: fmt.Sprint(i), Payload: bytes.Repeat([]byte{'z'}, 5000)})
	}
	if !bytes.Equal(r.Timers[0].Payload, []byte("payload")) {
		t.Errorf("payload changed to %q", r.Timers[0].Payload)
	}
}
