package ontime

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Timer is one timer for PublishBatch. Exactly one of Delay and At may be
// set; neither means due now.
type Timer struct {
	// ID is the timer's id; empty means a fresh UUID (version 7:
	// time-ordered, 74 random bits; PublishResult.ID then tells which).
	ID string
	// Body is the message: a string (sent as text/plain), a []byte (raw, no
	// content type), nil (no body), a json.RawMessage (sent as is, as JSON)
	// or any other value, which is marshalled as compact JSON.
	Body any
	// Delay from now (the store's clock). Must not be negative.
	Delay time.Duration
	// At is an absolute due time; one in the past fires at once. It must
	// be within ontimedriver.MinDue..MaxDue (years 1970 to 9999).
	At time.Time
	// Headers are user headers. They are written in key order (the Python
	// writer keeps insertion order; readers see the same headers).
	Headers map[string]string
	// CorrelationID defaults to the timer id.
	CorrelationID string
}

// PublishOption tunes one Publish call.
type PublishOption func(*Timer, *publishMode)

type publishMode struct {
	// ack, when Replicas > 0, is the replica acknowledgement the write
	// waits for (WaitReplicas).
	ack      ontimedriver.ReplicaAck
	ifAbsent bool
	delaySet bool
	idSet    bool
	missed   *MissedPolicy  // OnMissed (PublishRecurring only)
	jitter   *time.Duration // Jitter (PublishRecurring only)
}

// In makes the timer due d from now, on the store's clock. A negative d is
// refused.
func In(d time.Duration) PublishOption {
	return func(t *Timer, m *publishMode) { t.Delay = d; m.delaySet = true }
}

// At makes the timer due at the instant t. An instant in the past fires at
// once. t must be within the supported range, 1970-01-01T00:00:00Z to
// 9999-12-31T23:59:59.999Z (ontimedriver.MinDue, MaxDue): Publish refuses
// anything else with ErrInvalid, naming the value.
func At(at time.Time) PublishOption {
	return func(t *Timer, _ *publishMode) { t.At = at }
}

// WithID sets the timer id. Publishing an id that exists reschedules that
// timer and replaces its body (unless IfAbsent). An empty id is refused
// with ErrInvalid (leave WithID out to get a random UUID): an id that came
// out empty is more likely a caller's bug than a wish for a random one.
func WithID(id string) PublishOption {
	return func(t *Timer, m *publishMode) { t.ID = id; m.idSet = true }
}

// WithHeaders adds user headers to the message.
func WithHeaders(h map[string]string) PublishOption {
	return func(t *Timer, _ *publishMode) {
		if t.Headers == nil {
			t.Headers = make(map[string]string, len(h))
		}
		for k, v := range h {
			t.Headers[k] = v
		}
	}
}

// WithHeader adds one user header to the message.
func WithHeader(key, value string) PublishOption {
	return WithHeaders(map[string]string{key: value})
}

// WithCorrelationID sets the correlation id (default: the timer id).
func WithCorrelationID(id string) PublishOption {
	return func(t *Timer, _ *publishMode) { t.CorrelationID = id }
}

// IfAbsent makes Publish refuse to overwrite a timer that exists: it returns
// ErrExists and writes nothing.
func IfAbsent() PublishOption {
	return func(_ *Timer, m *publishMode) { m.ifAbsent = true }
}

// WaitReplicas makes the publish wait until n replicas of the store have
// acknowledged the write, at most timeout (0: the driver's default, 1 s
// for Redis), and fail with an error wrapping
// ontimedriver.ErrNotReplicated when fewer did: the timer is then on the
// primary (publishing it again with its id does not duplicate it) but a
// failover may lose it. Without it a publish is acknowledged when the
// primary has it (see docs/guarantees.md for the loss window). The Redis
// driver waits with WAIT on the connection of the write, in the same round
// trip; a store without replicas ignores it. A publish that waits shares a
// store call only with concurrent publishes that wait for as many.
func WaitReplicas(n int, timeout time.Duration) PublishOption {
	return func(_ *Timer, m *publishMode) { m.ack = ontimedriver.ReplicaAck{Replicas: n, Timeout: timeout} }
}

// BatchWaitReplicas is WaitReplicas for PublishBatch: every chunk waits.
func BatchWaitReplicas(n int, timeout time.Duration) BatchOption {
	return func(m *publishMode) { m.ack = ontimedriver.ReplicaAck{Replicas: n, Timeout: timeout} }
}

// Publish schedules body for delivery to topic and returns the timer id.
// Without In or At the timer is due at once. Without WithID the id is a
// fresh UUID (version 7: time-ordered, 74 random bits).
//
// Concurrent Publish calls to one topic share store calls: a call made
// while another to the same topic is under way waits for it to end, then
// goes to the store in one call (one script, one transaction) with every
// other call that arrived meanwhile, each with its own result and error
// (ErrExists with IfAbsent is per timer). A call made while the topic is
// idle goes at once, alone, so a lone caller waits for nothing. Under load,
// after a shared call the next one waits briefly (at most an eighth of the
// last call's duration, 1 ms at most) for as many callers as it answered,
// so that callers publishing in a loop share one call rather than take
// turns. A caller whose ctx ends while it waits gets ctx's error and its
// timer is not written; one whose ctx ends while its timer is in a shared
// call gets ctx's error at once, and the timer may be written (the shared
// call is not cut short). Hooks see every Publish as its own PublishEvent.
//
// Publish is PublishBatch with one timer: a store failure is a
// *BatchError of one timer (Total 1), whose IDs name the timer, random id
// included, so that it can be published again without a duplicate.
func (c *Client) Publish(ctx context.Context, topic string, body any, opts ...PublishOption) (string, error) {
	t := Timer{Body: body}
	var m publishMode
	for _, o := range opts {
		o(&t, &m)
	}
	if m.delaySet && !t.At.IsZero() {
		return "", invalidf("both a delay (In) and an instant (At) were given; use one")
	}
	if m.idSet && t.ID == "" {
		return "", invalidf("WithID: the id is empty; leave WithID out for a random UUID")
	}
	if m.missed != nil || m.jitter != nil {
		return "", invalidf("OnMissed and Jitter apply to PublishRecurring, not Publish")
	}
	if m.ack.Replicas < 0 || m.ack.Timeout < 0 {
		return "", invalidf("WaitReplicas(%d, %v): want n >= 0 and timeout >= 0", m.ack.Replicas, m.ack.Timeout)
	}
	if m.ack.Replicas > 0 {
		ctx = ontimedriver.WithReplicaAck(ctx, m.ack)
	}
	full, err := c.fullTopic(topic)
	if err != nil {
		return "", err
	}
	res, err := c.publish(ctx, full, []Timer{t}, true, m.ifAbsent)
	if err != nil {
		return "", err
	}
	return res[0].ID, res[0].Err
}

// PublishResult is the outcome of one timer of PublishBatch.
type PublishResult struct {
	// ID is the timer's id: Timer.ID, or the UUID it was given.
	ID string
	// Due is the due time as the store keeps it (rounded up to the store's
	// precision). With IfAbsent and an id that exists, it is the existing
	// timer's due time where the store reports it, else zero.
	Due time.Time
	// Err is nil, ErrExists (with IfAbsent), or the reason this timer was
	// refused.
	Err error
}

// BatchOption tunes PublishBatch.
type BatchOption func(*publishMode)

// BatchIfAbsent makes PublishBatch leave existing ids untouched; their
// results carry ErrExists.
func BatchIfAbsent() BatchOption { return func(m *publishMode) { m.ifAbsent = true } }

// BatchChunkSize is the most timers PublishBatch writes in one store call.
// One call is atomic: one transaction of the embedded store, one Lua script
// of Redis, so its timers are written all together or not at all.
const BatchChunkSize = 500

// PublishBatch schedules many timers on one topic, in one store round trip
// per BatchChunkSize timers. Every timer is validated first: if any is
// invalid, the call returns an error naming it and writes nothing. Results
// are in the order of timers.
//
// A batch of up to BatchChunkSize timers is atomic: written whole or not at
// all. A batch of one timer shares a store call with concurrent publishes
// to the topic, as Publish does. A larger batch is written chunk by chunk, in order, and is not
// atomic: when the store fails on a chunk, the chunks before it stay
// written. PublishBatch then returns the results of those chunks (timers
// [0, Written)) and a *BatchError that says which timers were not
// confirmed and unwraps to the store's error. A store error does not
// always tell whether the failed chunk reached the store (a timeout after
// the request was sent), so BatchError.IDs lists the ids of every timer
// not confirmed, including the random ones: publishing them again with
// those ids does not duplicate the ones that did land (an id that exists is
// replaced, or with BatchIfAbsent left as it is).
func (c *Client) PublishBatch(ctx context.Context, topic string, timers []Timer, opts ...BatchOption) ([]PublishResult, error) {
	var m publishMode
	for _, o := range opts {
		o(&m)
	}
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if m.ack.Replicas < 0 || m.ack.Timeout < 0 {
		return nil, invalidf("BatchWaitReplicas(%d, %v): want n >= 0 and timeout >= 0", m.ack.Replicas, m.ack.Timeout)
	}
	if m.ack.Replicas > 0 {
		ctx = ontimedriver.WithReplicaAck(ctx, m.ack)
	}
	return c.publish(ctx, full, timers, false, m.ifAbsent)
}

// publish is the one publish path, for Publish (a batch of one) and
// PublishBatch: the timers get their ids, the publish hooks see them, and
// they are encoded and written. owned says that timers is the Client's to
// change (Publish built it), not the caller's.
func (c *Client) publish(ctx context.Context, full string, timers []Timer, owned, ifAbsent bool) ([]PublishResult, error) {
	hooks := c.hooks.publishHooks()
	timers = prepare(timers, owned, hooks)
	if !hooks {
		return c.write(ctx, full, timers, ifAbsent)
	}
	ev := &PublishEvent{Topic: full, Timers: timers, IfAbsent: ifAbsent}
	ctx = c.hooks.before(ctx, ev)
	ev.Results, ev.Err = c.write(ctx, full, ev.Timers, ifAbsent)
	c.hooks.after(ctx, ev)
	return ev.Results, ev.Err
}

// prepare gives every timer its id: a fresh UUID (newID) where it has
// none. This is the one place timer ids are made, before the hooks see the
// timers (they may record the ids) and before encoding. The caller's
// timers and header maps are never changed: unless owned, a batch that
// lacks an id, or that hooks will see (they may change the headers), is
// copied first, each copy with its own headers.
func prepare(timers []Timer, owned, hooks bool) []Timer {
	if !owned {
		copied := hooks
		for i := 0; !copied && i < len(timers); i++ {
			copied = timers[i].ID == ""
		}
		if copied {
			timers = append([]Timer(nil), timers...)
		}
	}
	for i := range timers {
		t := &timers[i]
		if t.ID == "" {
			t.ID = newID()
		}
		if hooks && !owned && t.Headers != nil {
			t.Headers = maps.Clone(t.Headers)
		}
	}
	return timers
}

// newID returns a fresh timer id: a UUID version 7 (RFC 9562), whose first
// 48 bits are the Unix time in milliseconds and whose other 74 are random.
// Ids made one after another sort in the order they were made, so a store
// that keeps timers in an ordered index (the embedded store's B+tree)
// writes the timers of a burst of publishes next to each other instead of
// on random pages.
func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString() // v7 cannot fail today; v4 is as unique
	}
	return id.String()
}

// write validates and encodes every timer, then writes them
// BatchChunkSize per store call, in order (see PublishBatch). A batch of
// one shares a store call with concurrent publishes to the topic
// (publishCoalescer).
func (c *Client) write(ctx context.Context, full string, timers []Timer, ifAbsent bool) ([]PublishResult, error) {
	nts, err := c.encodeAll(timers)
	if err != nil {
		return nil, err
	}
	mode := scheduleMode(ifAbsent)
	out := make([]PublishResult, len(nts))
	for start := 0; start < len(nts); start += BatchChunkSize {
		end := min(start+BatchChunkSize, len(nts))
		res, err := c.pub.schedule(ctx, c.drv, full, nts[start:end], mode)
		if err != nil {
			be := &BatchError{Topic: full, Written: start, Failed: end - start, Total: len(nts), Err: err}
			be.IDs = make([]string, len(nts)-start)
			for i := range be.IDs {
				be.IDs[i] = nts[start+i].ID
			}
			if start == 0 {
				return nil, be
			}
			return out[:start], be
		}
		for i, r := range res {
			out[start+i] = PublishResult{ID: nts[start+i].ID, Due: r.Due, Err: r.Err}
		}
	}
	return out, nil
}

// publishCoalescer shares store calls between concurrent one-timer
// publishes of a topic (see coalescer): one lane per topic, mode and
// replica acknowledgement, batches of up to BatchChunkSize timers, no id
// twice in a batch.
type publishCoalescer struct {
	coalescer[laneKey, []ontimedriver.NewTimer, []ontimedriver.ScheduleResult, publishCalls]
}

type laneKey struct {
	topic string
	mode  ontimedriver.ScheduleMode
	// ack is the replica acknowledgement the calls wait for
	// (WaitReplicas): a shared call waits for what each of its callers
	// asked.
	ack ontimedriver.ReplicaAck
}

// schedule writes nts to topic through drv in one store call and returns
// their results (each Err is the timer's own, such as ErrExists) and the
// store call's error. A batch of one timer shares a store call with the
// concurrent callers of the same topic and mode when one is under way
// (contexts work as coalescer says); a larger batch makes its own call (it
// must stay atomic: see PublishBatch).
func (pc *publishCoalescer) schedule(ctx context.Context, drv ontimedriver.Driver, topic string, nts []ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	if len(nts) != 1 {
		return scheduleCall(ctx, drv, topic, nts, mode)
	}
	ack, _ := ontimedriver.ReplicaAckFrom(ctx)
	return pc.do(ctx, drv, laneKey{topic, mode, ack}, nts)
}

// publishCalls is publishCoalescer's batcher. An item is a one-timer
// slice (the caller's own: a lone call passes it to the store as is); its
// result is the one-element slice of the store call's results for it.
type publishCalls struct{}

var _ batcher[laneKey, []ontimedriver.NewTimer, []ontimedriver.ScheduleResult] = publishCalls{}

func (publishCalls) chunk() int                            { return BatchChunkSize }
func (publishCalls) distinct() bool                        { return true }
func (publishCalls) id(nts []ontimedriver.NewTimer) string { return nts[0].ID }

func (publishCalls) one(ctx context.Context, drv ontimedriver.Driver, key laneKey, nts []ontimedriver.NewTimer) ([]ontimedriver.ScheduleResult, error) {
	return scheduleCall(ctx, drv, key.topic, nts, key.mode)
}

func (publishCalls) many(ctx context.Context, drv ontimedriver.Driver, key laneKey, batch []*pending[[]ontimedriver.NewTimer, []ontimedriver.ScheduleResult]) error {
	nts := make([]ontimedriver.NewTimer, len(batch))
	for i, p := range batch {
		nts[i] = p.req[0]
	}
	res, err := scheduleCall(ctx, drv, key.topic, nts, key.mode)
	if err != nil {
		return err
	}
	for i, p := range batch {
		p.res = res[i : i+1 : i+1]
	}
	return nil
}

// scheduleCall writes nts in one store call and checks that the store
// answered for each.
func scheduleCall(ctx context.Context, drv ontimedriver.Driver, topic string, nts []ontimedriver.NewTimer, mode ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	res, err := drv.Schedule(ctx, topic, nts, mode)
	if err == nil && len(res) != len(nts) {
		err = errResultCount(len(res), len(nts))
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func errResultCount(got, want int) error {
	return fmt.Errorf("the store returned %d results for %d timers", got, want)
}

func scheduleMode(ifAbsent bool) ontimedriver.ScheduleMode {
	if ifAbsent {
		return ontimedriver.IfAbsent
	}
	return ontimedriver.Upsert
}

// encodeAll validates and encodes every timer; nothing is written.
func (c *Client) encodeAll(timers []Timer) ([]ontimedriver.NewTimer, error) {
	nts := make([]ontimedriver.NewTimer, len(timers))
	for i := range timers {
		nt, err := c.encodeTimer(&timers[i])
		if err != nil {
			if len(timers) > 1 {
				return nil, fmt.Errorf("timer %d: %w", i, err)
			}
			return nil, err
		}
		nts[i] = nt
	}
	return nts, nil
}

// encodeTimer validates and encodes a timer that has its id (prepare).
func (c *Client) encodeTimer(t *Timer) (ontimedriver.NewTimer, error) {
	if t.Delay < 0 {
		return ontimedriver.NewTimer{}, invalidf("delay %s is negative", t.Delay)
	}
	if t.Delay > 0 && !t.At.IsZero() {
		return ontimedriver.NewTimer{}, invalidf("both a delay and an instant were given; use one")
	}
	if !t.At.IsZero() {
		if err := ontimedriver.ValidateDue(t.At); err != nil {
			return ontimedriver.NewTimer{}, err
		}
	}
	if err := ontimedriver.ValidateID(t.ID); err != nil {
		return ontimedriver.NewTimer{}, err
	}
	corr := t.CorrelationID
	if corr == "" {
		corr = t.ID
	}
	payload, err := encodePayload(corr, t.Body, t.Headers)
	if err != nil {
		return ontimedriver.NewTimer{}, err
	}
	if c.maxBody > 0 && len(payload) > c.maxBody {
		return ontimedriver.NewTimer{}, invalidf("message is %d bytes encoded, the limit is %d", len(payload), c.maxBody)
	}
	return ontimedriver.NewTimer{ID: t.ID, At: t.At, Delay: t.Delay, Payload: payload}, nil
}

// FireNow makes a scheduled timer due at once and returns its new due time:
// the next claim delivers it. Its body, headers, attempt count and last
// error are kept (a timer waiting for a retry is retried now). A timer
// already due keeps its due time. It returns ErrNotFound when there is no
// such timer (a dead letter is replayed with ReplayDeadLetters instead) and
// ErrLeased when a worker is delivering it. With the faststream-compatible
// Redis layout, which cannot tell a timer being delivered, that timer is
// made due again and delivered twice.
func (c *Client) FireNow(ctx context.Context, topic, id string) (time.Time, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return time.Time{}, err
	}
	if err := ontimedriver.ValidateID(id); err != nil {
		return time.Time{}, err
	}
	return c.drv.FireNow(ctx, full, id)
}
