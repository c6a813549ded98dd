package ontime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ontime-go/ontime/envelope"
	"github.com/ontime-go/ontime/ontimedriver"
)

// Config configures a Client. The zero value (or nil) means the defaults.
type Config struct {
	// Prefix is glued in front of every topic this Client and its Workers
	// touch, with no separator (the faststream convention: prefix
	// "billing:" and topic "invoices" give the full topic
	// "billing:invoices"). Default "".
	Prefix string
	// Logger receives the library's logs. Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes refuses publishes whose encoded envelope is larger.
	// Default 1 MiB; negative means no limit.
	MaxBodyBytes int
	// Hooks observe and extend the Client and the Workers built from it,
	// so that a module (metrics, tracing, audit) can be plugged in without
	// the library importing it. Each value implements one or more of
	// [BeforePublishHook], [AfterPublishHook], [DeliveryStartHook],
	// [DeliveryEndHook] and [StoreCallHook]; NewClient refuses a value
	// that implements none.
	// Hooks run on the calling goroutine (the publisher's, the handler's):
	// keep them fast and never block in them. A delivery hook's panic is
	// logged and the delivery goes on (the hooks after it in that call are
	// skipped); a publish hook's panic reaches the caller of Publish. Hooks of one kind run in the
	// order given here; those that end something (AfterPublish,
	// DeliveryEnd) run in reverse order, so that spans nest. Default none.
	Hooks []any
}

// Client publishes, cancels and inspects timers on one store. It is safe
// for concurrent use. Workers are built from a Client with NewWorker.
type Client struct {
	drv     ontimedriver.Driver // orig, or orig wrapped for StoreCallHooks
	orig    ontimedriver.Driver
	prefix  string
	log     *slog.Logger
	maxBody int
	lenient bool
	hooks   hookSet
	pub     publishCoalescer
}

// NewClient returns a Client on the store behind d. The Client does not own
// d: closing d is the caller's job, after every Worker has stopped.
func NewClient(d ontimedriver.Driver, cfg *Config) (*Client, error) {
	if d == nil {
		return nil, invalidf("NewClient: driver is nil")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.Prefix != "" {
		// The prefix must itself be a valid topic fragment.
		if err := ontimedriver.ValidateTopic(c.Prefix); err != nil {
			return nil, fmt.Errorf("Config.Prefix: %w", err)
		}
	}
	hooks, err := newHookSet(c.Hooks)
	if err != nil {
		return nil, fmt.Errorf("NewClient: %w", err)
	}
	drv := d
	if len(hooks.store) > 0 {
		drv = &observedDriver{Driver: d, hooks: hooks.store, log: c.Logger}
	}
	return &Client{
		drv:     drv,
		orig:    d,
		prefix:  c.Prefix,
		log:     c.Logger,
		maxBody: c.MaxBodyBytes,
		lenient: ontimedriver.AcceptsLegacyPayloads(drv),
		hooks:   hooks,
	}, nil
}

// Driver returns the store the Client was built on.
func (c *Client) Driver() ontimedriver.Driver { return c.orig }

// fullTopic applies the client prefix and validates the result.
func (c *Client) fullTopic(topic string) (string, error) {
	if topic == "" {
		return "", invalidf("topic is empty")
	}
	full := c.prefix + topic
	if err := ontimedriver.ValidateTopic(full); err != nil {
		return "", err
	}
	return full, nil
}

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
	ifAbsent bool
	delaySet bool
	idSet    bool
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
	full, err := c.fullTopic(topic)
	if err != nil {
		return "", err
	}
	if !c.hooks.publishHooks() {
		r, err := c.publishOne(ctx, full, t, m.ifAbsent)
		return r.ID, err
	}
	if t.ID == "" {
		t.ID = newID()
	}
	ev := &PublishEvent{Topic: full, Timers: []Timer{t}, IfAbsent: m.ifAbsent}
	ctx = c.hooks.before(ctx, ev)
	r, err := c.publishOne(ctx, full, ev.Timers[0], m.ifAbsent)
	if r.ID != "" {
		ev.Results = []PublishResult{r}
	}
	ev.Err = err
	c.hooks.after(ctx, ev)
	return r.ID, err
}

// publishOne validates, encodes and writes one timer. Its result has an ID
// when the timer reached the store and the store answered for it. The
// write shares a store call with concurrent publishes to the same topic
// when one is under way (see publishCoalescer).
func (c *Client) publishOne(ctx context.Context, full string, t Timer, ifAbsent bool) (PublishResult, error) {
	nt, err := c.encodeTimer(&t)
	if err != nil {
		return PublishResult{}, err
	}
	res, err := c.pub.schedule(ctx, c.drv, full, nt, scheduleMode(ifAbsent))
	if err != nil {
		return PublishResult{}, fmt.Errorf("ontime: publish to %q: %w", full, err)
	}
	return PublishResult{ID: nt.ID, Due: res.Due, Err: res.Err}, res.Err
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
	if !c.hooks.publishHooks() {
		return c.publishBatch(ctx, full, timers, m.ifAbsent)
	}
	// The hooks get copies: they may change the headers, and the caller's
	// timers and maps stay as they were.
	ev := &PublishEvent{Topic: full, Timers: make([]Timer, len(timers)), IfAbsent: m.ifAbsent}
	for i, t := range timers {
		if t.ID == "" {
			t.ID = newID()
		}
		if t.Headers != nil {
			t.Headers = maps.Clone(t.Headers)
		}
		ev.Timers[i] = t
	}
	ctx = c.hooks.before(ctx, ev)
	ev.Results, ev.Err = c.publishBatch(ctx, full, ev.Timers, m.ifAbsent)
	c.hooks.after(ctx, ev)
	return ev.Results, ev.Err
}

func (c *Client) publishBatch(ctx context.Context, full string, timers []Timer, ifAbsent bool) ([]PublishResult, error) {
	nts, err := c.encodeAll(timers)
	if err != nil {
		return nil, err
	}
	mode := scheduleMode(ifAbsent)
	if len(nts) == 1 {
		// One timer: shared with concurrent publishes like Publish (the
		// server's single-timer endpoint comes this way).
		r, err := c.pub.schedule(ctx, c.drv, full, nts[0], mode)
		if err != nil {
			return nil, &BatchError{Topic: full, Failed: 1, Total: 1, IDs: []string{nts[0].ID}, Err: err}
		}
		return []PublishResult{{ID: nts[0].ID, Due: r.Due, Err: r.Err}}, nil
	}
	out := make([]PublishResult, len(nts))
	for start := 0; start < len(nts); start += BatchChunkSize {
		end := min(start+BatchChunkSize, len(nts))
		res, err := c.drv.Schedule(ctx, full, nts[start:end], mode)
		if err == nil && len(res) != end-start {
			err = errResultCount(len(res), end-start)
		}
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
	id := t.ID
	if id == "" {
		id = newID()
	} else if err := ontimedriver.ValidateID(id); err != nil {
		return ontimedriver.NewTimer{}, err
	}
	body, ct, err := encodeBody(t.Body)
	if err != nil {
		return ontimedriver.NewTimer{}, err
	}
	corr := t.CorrelationID
	if corr == "" {
		corr = id
	}
	var hs []envelope.Header
	if len(t.Headers) > 0 {
		keys := make([]string, 0, len(t.Headers))
		for k := range t.Headers {
			if k == "" {
				return ontimedriver.NewTimer{}, invalidf("a header key is empty")
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		hs = make([]envelope.Header, len(keys))
		for i, k := range keys {
			hs[i] = envelope.Header{Key: k, Value: t.Headers[k]}
		}
	}
	payload, err := envelope.AppendEncode(make([]byte, 0, 64+len(body)+len(corr)), corr, ct, hs, body)
	if err != nil {
		return ontimedriver.NewTimer{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.maxBody > 0 && len(payload) > c.maxBody {
		return ontimedriver.NewTimer{}, invalidf("message is %d bytes encoded, the limit is %d", len(payload), c.maxBody)
	}
	return ontimedriver.NewTimer{ID: id, At: t.At, Delay: t.Delay, Payload: payload}, nil
}

// encodeBody follows the faststream writer: text → text/plain, bytes → no
// content type, anything else → compact JSON without HTML escaping.
func encodeBody(body any) ([]byte, string, error) {
	switch b := body.(type) {
	case nil:
		return nil, "", nil
	case string:
		return []byte(b), envelope.ContentTypeText, nil
	case []byte:
		return b, "", nil
	case json.RawMessage:
		if !json.Valid(b) {
			return nil, "", invalidf("body is a json.RawMessage that is not valid JSON")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil {
			return nil, "", invalidf("body: %v", err)
		}
		return buf.Bytes(), envelope.ContentTypeJSON, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, "", invalidf("body of type %T does not marshal to JSON: %v", body, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), envelope.ContentTypeJSON, nil
}

// Cancel deletes a scheduled or leased timer. It returns ErrNotFound when
// there is none.
func (c *Client) Cancel(ctx context.Context, topic, id string) error {
	full, err := c.fullTopic(topic)
	if err != nil {
		return err
	}
	if err := ontimedriver.ValidateID(id); err != nil {
		return err
	}
	return c.drv.Cancel(ctx, full, id)
}

// State is where a timer is.
type State = ontimedriver.State

// Timer states.
const (
	// StateScheduled is a timer waiting for its due time (or due and not
	// yet claimed).
	StateScheduled = ontimedriver.StateScheduled
	// StateLeased is a timer a worker has claimed and holds until its
	// lease deadline.
	StateLeased = ontimedriver.StateLeased
)

// TimerInfo is a stored timer as Get and List show it.
type TimerInfo struct {
	// ID is the timer id.
	ID string
	// Topic is the topic as the caller named it (without the Client's
	// prefix).
	Topic string
	// Due is the time the timer is scheduled for.
	Due time.Time
	// State is StateScheduled or StateLeased.
	State State
	// LeaseUntil is the lease deadline while a worker holds the timer.
	LeaseUntil time.Time
	// Attempt counts deliveries since the timer was (re)scheduled.
	Attempt int
	// LastError is the error of the last failed delivery, if any.
	LastError string
	// CorrelationID is the envelope's correlation id (the timer id when the
	// envelope has none).
	CorrelationID string
	// ContentType is the envelope's content type (ontime writes
	// "text/plain" for text, "application/json" for JSON, none for bytes).
	ContentType string
	// Headers holds the user headers (not correlation_id or content-type).
	Headers map[string]string
	// Body is the message body.
	Body []byte
	// DecodeError is set when the stored envelope does not decode; Body
	// then holds the raw stored bytes.
	DecodeError string
}

func (c *Client) info(topic string, ti *ontimedriver.TimerInfo) TimerInfo {
	out := TimerInfo{
		ID: ti.ID, Topic: topic, Due: ti.Due, State: ti.State, LeaseUntil: ti.LeaseUntil,
		Attempt: ti.Attempt, LastError: ti.LastError,
	}
	env, err := c.decode(ti.Payload)
	if err != nil {
		out.Body = ti.Payload
		out.DecodeError = err.Error()
		return out
	}
	out.CorrelationID, out.ContentType, out.Headers = splitHeaders(env)
	if out.CorrelationID == "" {
		out.CorrelationID = out.ID // envelopes without one (legacy, raw)
	}
	out.Body = env.Body
	return out
}

func (c *Client) decode(payload []byte) (*envelope.Message, error) {
	return decodePayload(c.lenient, payload)
}

// decodePayload decodes a stored payload: leniently (envelope.Decode:
// legacy JSON forms, raw bodies) for a store whose payloads other programs
// may have written (ontimedriver.LegacyPayloads), else strictly
// (envelope.DecodeBinary).
func decodePayload(lenient bool, payload []byte) (*envelope.Message, error) {
	if lenient {
		return envelope.Decode(payload)
	}
	return envelope.DecodeBinary(payload)
}

// splitHeaders separates the well-known headers from user headers.
func splitHeaders(env *envelope.Message) (corr, ct string, user map[string]string) {
	for _, h := range env.Headers {
		switch h.Key {
		case "correlation_id":
			corr = h.Value
		case "content-type":
			ct = h.Value
		default:
			if user == nil {
				user = make(map[string]string, len(env.Headers))
			}
			user[h.Key] = h.Value
		}
	}
	return corr, ct, user
}

// Get returns one scheduled or leased timer, or ErrNotFound.
func (c *Client) Get(ctx context.Context, topic, id string) (*TimerInfo, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if err := ontimedriver.ValidateID(id); err != nil {
		return nil, err
	}
	ti, err := c.drv.Get(ctx, full, id)
	if err != nil {
		return nil, err
	}
	info := c.info(topic, ti)
	return &info, nil
}

// ListOptions pages List and DeadLetters.
type ListOptions = ontimedriver.ListOptions

// TimerPage is a page of List.
type TimerPage struct {
	// Timers are this page's timers, in due order.
	Timers []TimerInfo
	// NextCursor goes into ListOptions.Cursor for the next page; empty on
	// the last page.
	NextCursor string
}

// List returns a topic's timers ordered by when they become due (a leased
// timer by its lease deadline), paged.
func (c *Client) List(ctx context.Context, topic string, opts ListOptions) (*TimerPage, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if opts.Limit < 0 {
		return nil, invalidf("limit %d is negative", opts.Limit)
	}
	p, err := c.drv.List(ctx, full, opts)
	if err != nil {
		return nil, err
	}
	out := &TimerPage{Timers: make([]TimerInfo, len(p.Timers)), NextCursor: p.NextCursor}
	for i := range p.Timers {
		out.Timers[i] = c.info(topic, &p.Timers[i])
	}
	return out, nil
}

// Counts counts a topic's timers by state.
type Counts = ontimedriver.Counts

// Count counts a topic's timers.
func (c *Client) Count(ctx context.Context, topic string) (Counts, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return Counts{}, err
	}
	return c.drv.Count(ctx, full)
}

// CountDue counts a topic's timers by when they become due (a leased timer
// by its lease deadline, as List orders them), between consecutive bounds:
// the result has len(bounds)+1 counts, [0] the timers due before
// bounds[0] (overdue ones, when bounds[0] is now), [i] those due in
// [bounds[i-1], bounds[i]), and the last those due at or after the last
// bound. It reads the store's due index only, in one round trip, so it is
// how a dashboard draws "how many fall due per minute" without loading the
// timers. bounds must be strictly increasing, 1 to
// ontimedriver.MaxDueBounds of them (ErrInvalid otherwise).
func (c *Client) CountDue(ctx context.Context, topic string, bounds []time.Time) ([]int64, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if err := ontimedriver.ValidateDueBounds(bounds); err != nil {
		return nil, err
	}
	return c.drv.CountDue(ctx, full, bounds)
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

// Topics lists the topics under the Client's prefix that hold timers or
// dead letters, without the prefix, sorted.
func (c *Client) Topics(ctx context.Context) ([]string, error) {
	all, err := c.drv.Topics(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0:0]
	for _, t := range all {
		if rest, ok := strings.CutPrefix(t, c.prefix); ok && rest != "" {
			out = append(out, rest)
		}
	}
	return out, nil
}

// DeadLetterInfo is a timer that was given up on, as DeadLetters shows it.
type DeadLetterInfo struct {
	// ID is the timer id.
	ID string
	// Topic is the topic as the caller named it (without the Client's
	// prefix).
	Topic string
	// Due is the due time the timer had when it was given up on.
	Due time.Time
	// DiedAt is when the timer was moved to the dead letters.
	DiedAt time.Time
	// Attempt is the number of deliveries the timer had.
	Attempt int
	// Reason says why: "max_attempts" (the retry policy gave up),
	// "rejected" (the handler returned DeadLetter or called
	// Message.DeadLetter) or "undecodable" (the stored message does not
	// decode).
	Reason string
	// LastError is the error of the last delivery, if any.
	LastError string
	// CorrelationID is the envelope's correlation id (the timer id when the
	// envelope has none).
	CorrelationID string
	// ContentType is the envelope's content type (ontime writes
	// "text/plain" for text, "application/json" for JSON, none for bytes).
	ContentType string
	// Headers holds the user headers (not correlation_id or content-type).
	Headers map[string]string
	// Body is the message body.
	Body []byte
	// DecodeError is set when the stored envelope does not decode; Body
	// then holds the raw stored bytes.
	DecodeError string
}

// DeadLetterPage is a page of DeadLetters.
type DeadLetterPage struct {
	// Dead are this page's dead letters, oldest first.
	Dead []DeadLetterInfo
	// NextCursor goes into ListOptions.Cursor for the next page; empty on
	// the last page.
	NextCursor string
}

// DeadLetters lists a topic's dead letters, oldest first, paged.
func (c *Client) DeadLetters(ctx context.Context, topic string, opts ListOptions) (*DeadLetterPage, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if opts.Limit < 0 {
		return nil, invalidf("limit %d is negative", opts.Limit)
	}
	p, err := c.drv.ListDead(ctx, full, opts)
	if err != nil {
		return nil, err
	}
	out := &DeadLetterPage{Dead: make([]DeadLetterInfo, len(p.Dead)), NextCursor: p.NextCursor}
	for i, d := range p.Dead {
		di := DeadLetterInfo{ID: d.ID, Topic: topic, Due: d.Due, DiedAt: d.DiedAt, Attempt: d.Attempt, Reason: d.Reason, LastError: d.Error}
		if env, err := c.decode(d.Payload); err != nil {
			di.Body, di.DecodeError = d.Payload, err.Error()
		} else {
			di.CorrelationID, di.ContentType, di.Headers = splitHeaders(env)
			if di.CorrelationID == "" {
				di.CorrelationID = d.ID // envelopes without one (legacy, raw)
			}
			di.Body = env.Body
		}
		out.Dead[i] = di
	}
	return out, nil
}

// ReplayDeadLetters moves the dead letters named by ids back to scheduled,
// due at once, with their attempt counters reset. It returns how many were
// replayed; an id that is not a dead letter, or whose id is in use by a
// live timer, is skipped. An empty ids is refused with ErrInvalid and
// replays nothing (a filtered list that came out empty must not mean
// "all"): ReplayAllDeadLetters replays every one.
func (c *Client) ReplayDeadLetters(ctx context.Context, topic string, ids ...string) (int, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, invalidf("ReplayDeadLetters: no ids given; ReplayAllDeadLetters replays every dead letter of the topic")
	}
	return c.drv.ReplayDead(ctx, full, ids)
}

// ReplayAllDeadLetters moves every dead letter of the topic back to
// scheduled, as ReplayDeadLetters does, and returns how many were
// replayed.
func (c *Client) ReplayAllDeadLetters(ctx context.Context, topic string) (int, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return 0, err
	}
	return c.drv.ReplayAllDead(ctx, full)
}

// PurgeDeadLetters deletes the dead letters named by ids and returns how
// many were deleted (ids that are not dead letters are skipped). An empty
// ids is refused with ErrInvalid and deletes nothing (a filtered list that
// came out empty must not wipe the topic): PurgeAllDeadLetters deletes
// every one.
func (c *Client) PurgeDeadLetters(ctx context.Context, topic string, ids ...string) (int, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, invalidf("PurgeDeadLetters: no ids given; PurgeAllDeadLetters deletes every dead letter of the topic")
	}
	return c.drv.PurgeDead(ctx, full, ids)
}

// PurgeAllDeadLetters deletes every dead letter of the topic and returns
// how many there were.
func (c *Client) PurgeAllDeadLetters(ctx context.Context, topic string) (int, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return 0, err
	}
	return c.drv.PurgeAllDead(ctx, full)
}

// Ping checks that the store is reachable.
func (c *Client) Ping(ctx context.Context) error { return c.drv.Ping(ctx) }

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
