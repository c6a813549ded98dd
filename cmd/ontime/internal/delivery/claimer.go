package delivery

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/envelope"
	"github.com/ontime-go/ontime/ontimedriver"
)

// The claimer leases timers from the store for the confirming watchers of
// a topic, as many as they have room for, the way a JetStream pull
// consumer fetches: the lease is the ack wait. It runs beside the topic's
// worker, whose handlers also hand timers to the watchers but wait for
// each confirmation in one of the topic's handler slots (concurrency):
// with watchers that stop reading, those slots fill up, while the
// claimer's timers wait for their confirmation in the store, not in the
// server, so watchers that do read keep getting timers.
//
// A confirmed timer is acked with its lease token; an unconfirmed one is
// due again at once (a failed attempt, dead-lettered past max_attempts);
// one that never reached a watcher is handed back without counting.
// Deliveries are reported to the Client's hooks (metrics, the dashboard's
// activity) as a worker reports its own.

// claimBatch caps one claim.
const claimBatch = 64

// claimPoll bounds how long the claimer sleeps without asking the store
// (a fallback to the store's wake-up notifications).
const claimPoll = time.Second

// storeHold is a timer the claimer leased.
type storeHold struct {
	lease    ontimedriver.Lease
	leaseEnd time.Time // the lease deadline, on this process's clock
	d        *ontime.Delivery
	ctx      context.Context // from the hooks' DeliveryStart
}

// claimer claims for one topic's watchers while they are connected.
type claimer struct {
	tr   *topicRun
	stop <-chan struct{}
	more chan struct{} // buffer 1: room changed
}

func newClaimer(tr *topicRun, stop <-chan struct{}) *claimer {
	return &claimer{tr: tr, stop: stop, more: make(chan struct{}, 1)}
}

// wake tells the claimer the watchers' room changed.
func (c *claimer) wake() { signal(c.more) }

func (c *claimer) run() {
	tr := c.tr
	drv := tr.d.o.Client.Driver()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	var woken <-chan time.Time
	if ch, unsub, err := drv.Subscribe(ctx, tr.name); err == nil {
		defer unsub()
		woken = ch
	} else {
		tr.d.log.Warn("watch: no wake-ups from the store; polling", "topic", tr.name, "err", err)
	}
	sleep := time.NewTimer(time.Hour)
	defer sleep.Stop()
	failing := false
	for {
		// Until woken; while watchers hold events, check again for a
		// stall (wantClaims) now and then.
		wait := min(stallAfter, tr.ackWait/4)
		if want := min(tr.wantClaims(), claimBatch); want > 0 {
			n, next, err := c.claim(ctx, want)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				if !failing {
					tr.d.log.Warn("watch: claim failed", "topic", tr.name, "err", err)
				}
				failing, wait = true, claimPoll
			case n == want:
				failing = false
				continue // more may be due
			default:
				failing, wait = false, min(next, claimPoll)
			}
		}
		sleep.Reset(wait)
		select {
		case <-c.stop:
			return
		case <-c.more:
		case <-woken:
		case <-sleep.C:
		}
		sleep.Stop()
	}
}

// claim leases up to want due timers and queues them for the watchers.
// next is how long until the topic's next timer becomes claimable.
func (c *claimer) claim(ctx context.Context, want int) (n int, next time.Duration, err error) {
	tr := c.tr
	drv := tr.d.o.Client.Driver()
	res, err := drv.Claim(ctx, tr.name, want, tr.ackWait)
	if err != nil {
		return 0, 0, err
	}
	local := time.Now()
	next = claimPoll
	if !res.Next.IsZero() {
		next = max(res.Next.Sub(res.Now), 0)
	}
	// Looked up through any wrapper (the Client's StoreCall observer), as
	// the library does.
	lenient := ontimedriver.AcceptsLegacyPayloads(drv)
	policy := tr.retry()
	var settle settlements
	var holds []*hold
	for i := range res.Timers {
		t := &res.Timers[i]
		sh := &storeHold{
			lease:    ontimedriver.Lease{ID: t.ID, Token: t.Token},
			leaseEnd: local.Add(t.LeaseUntil.Sub(res.Now)),
			d:        &ontime.Delivery{Topic: tr.name, ID: t.ID, Attempt: t.Attempt, Due: t.Due, FiredAt: res.Now, LeaseUntil: t.LeaseUntil},
		}
		h := &hold{store: sh, msg: &Message{ID: t.ID, Topic: tr.name, Due: t.Due, Attempt: t.Attempt}}
		env, derr := decode(t.Payload, lenient)
		if derr == nil {
			h.msg.CorrelationID, h.msg.ContentType, h.msg.Headers = env.Split()
			if h.msg.CorrelationID == "" {
				h.msg.CorrelationID = t.ID
			}
			h.msg.Body = env.Body
			sh.d.CorrelationID, sh.d.ContentType, sh.d.Headers = h.msg.CorrelationID, h.msg.ContentType, h.msg.Headers
		}
		sh.ctx = tr.d.hooks.start(context.Background(), sh.d)
		switch {
		case derr != nil:
			tr.d.log.Warn("watch: stored envelope does not decode; dead-lettering", "topic", tr.name, "id", t.ID, "err", derr)
			h.msg.Body = nil
			settle = append(settle, settlement{h, holdUndecodable})
		case t.Attempt > 1 && exhausted(policy, t.Attempt-1):
			tr.d.log.Warn("watch: past the last attempt without an outcome; dead-lettering", "topic", tr.name, "id", t.ID, "attempt", t.Attempt)
			settle = append(settle, settlement{h, holdExhausted})
		default:
			holds = append(holds, h)
		}
	}
	if len(settle) > 0 {
		tr.settleStore(settle)
	}
	for _, h := range holds {
		tr.tapCopy(h.msg)
	}
	tr.wmu.Lock()
	if tr.session == nil {
		// The watchers left meanwhile: hand the timers back.
		tr.wmu.Unlock()
		back := make(settlements, len(holds))
		for i, h := range holds {
			back[i] = settlement{h, holdNobody}
		}
		tr.settleStore(back)
		return len(res.Timers), next, nil
	}
	for _, h := range holds {
		heap.Push(&tr.queue, h)
	}
	if len(holds) > 0 {
		signal(tr.kick)
	}
	tr.wmu.Unlock()
	return len(res.Timers), next, nil
}

// More results of store holds, beyond those of watch.go.
const (
	holdUndecodable holdResult = iota + 100 // the stored envelope does not decode
	holdExhausted                           // claimed past max_attempts
)

// retry is the topic's retry policy, with the library's defaults.
func (tr *topicRun) retry() config.Retry {
	return tr.d.o.Config.TopicConfig(tr.name).Retry
}

// exhausted reports whether attempt was the last one allowed (the
// library's rule: max_attempts 0 means 25, -1 forever).
func exhausted(p config.Retry, attempt int) bool {
	maxAttempts := int(p.MaxAttempts)
	if maxAttempts == 0 {
		maxAttempts = 25
	}
	return maxAttempts > 0 && attempt >= maxAttempts
}

// settleStore applies the results of the claimer's holds in one store
// call, and reports them to the hooks.
func (tr *topicRun) settleStore(s settlements) {
	ops := make([]ontimedriver.Settlement, 0, len(s))
	idx := make([]int, 0, len(s))
	results := make([]ontime.DeliveryResult, len(s))
	policy := tr.retry()
	for i, x := range s {
		sh := x.h.store
		op := ontimedriver.Settlement{Lease: sh.lease}
		r := &results[i]
		switch x.r {
		case holdConfirmed:
			op.Kind, r.Outcome = ontimedriver.Ack, ontime.OutcomeAcked
			tr.d.delivered.Add(1)
		case holdUnconfirmed:
			tr.d.failed.Add(1)
			r.Err = errUnconfirmed
			if exhausted(policy, sh.d.Attempt) {
				op.Kind, op.Reason, op.Error = ontimedriver.Dead, ontimedriver.ReasonMaxAttempts, errUnconfirmed.Error()
				r.Outcome, r.Reason = ontime.OutcomeDeadLettered, ontimedriver.ReasonMaxAttempts
			} else {
				op.Kind, op.Error, r.Outcome = ontimedriver.Retry, errUnconfirmed.Error(), ontime.OutcomeRetried
			}
		case holdNobody:
			op.Kind, r.Outcome = ontimedriver.Snooze, ontime.OutcomeSnoozed
		case holdReleased:
			op.Kind, r.Outcome = ontimedriver.Snooze, ontime.OutcomeReleased
		case holdUndecodable:
			op.Kind, op.Reason, r.Outcome, r.Reason = ontimedriver.Dead, ontimedriver.ReasonUndecodable, ontime.OutcomeDeadLettered, ontimedriver.ReasonUndecodable
			r.Err = errors.New("the stored envelope does not decode")
			op.Error = r.Err.Error()
		case holdExhausted:
			op.Kind, op.Reason, r.Outcome, r.Reason = ontimedriver.Dead, ontimedriver.ReasonMaxAttempts, ontime.OutcomeDeadLettered, ontimedriver.ReasonMaxAttempts
			r.Err = errors.New("the earlier deliveries ended without an outcome")
			op.Error = r.Err.Error()
		case holdLapsed:
			r.Outcome = ontime.OutcomeLeaseLost
			continue // nothing to tell the store: the lease ran out
		}
		ops = append(ops, op)
		idx = append(idx, i)
	}
	for i, x := range s {
		tr.d.hooks.end(x.h.store.ctx, x.h.store.d, results[i])
	}
	if len(ops) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs, err := tr.d.o.Client.Driver().Settle(ctx, tr.name, ops)
	if err != nil {
		// The leases run out, and the store hands the timers out again.
		tr.d.log.Warn("watch: settling failed; the timers are delivered again when their leases end", "topic", tr.name, "n", len(ops), "err", err)
		return
	}
	for j, e := range errs {
		if e != nil {
			tr.d.log.Info("watch: settle refused (lease lost: the timer was re-published or is delivered again)", "topic", tr.name, "id", ops[j].ID, "outcome", results[idx[j]].Outcome, "err", e)
		}
	}
}

// decode reads a stored envelope the way the library does.
func decode(payload []byte, lenient bool) (*envelope.Message, error) {
	if lenient {
		return envelope.Decode(payload)
	}
	return envelope.DecodeBinary(payload)
}

// hookSet calls the Client's delivery hooks.
type hookSet struct {
	starts []ontime.DeliveryStartHook
	ends   []ontime.DeliveryEndHook
	log    *slog.Logger
}

func newHookSet(hooks []any, log *slog.Logger) hookSet {
	s := hookSet{log: log}
	for _, h := range hooks {
		if x, ok := h.(ontime.DeliveryStartHook); ok {
			s.starts = append(s.starts, x)
		}
		if x, ok := h.(ontime.DeliveryEndHook); ok {
			s.ends = append(s.ends, x)
		}
	}
	return s
}

// start runs every start hook, each with its own recover, as the library
// does: a panicking hook skips none of the others, so start and end hooks
// stay paired (in-flight gauges do not drift).
func (s hookSet) start(ctx context.Context, d *ontime.Delivery) context.Context {
	for _, h := range s.starts {
		ctx = s.startOne(ctx, h, d)
	}
	return ctx
}

func (s hookSet) startOne(ctx context.Context, h ontime.DeliveryStartHook, d *ontime.Delivery) (out context.Context) {
	out = ctx
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("watch: a DeliveryStart hook panicked", "topic", d.Topic, "id", d.ID, "panic", p)
		}
	}()
	return h.DeliveryStart(ctx, d)
}

// end runs every end hook, each with its own recover.
func (s hookSet) end(ctx context.Context, d *ontime.Delivery, r ontime.DeliveryResult) {
	for _, h := range s.ends {
		func() {
			defer func() {
				if p := recover(); p != nil {
					s.log.Error("watch: a DeliveryEnd hook panicked", "topic", d.Topic, "id", d.ID, "panic", p)
				}
			}()
			h.DeliveryEnd(ctx, d, r)
		}()
	}
}
