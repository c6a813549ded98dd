package ontime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ontime-go/ontime/internal/testkit"
	"github.com/ontime-go/ontime/ontimedriver"
)

// The worker of package ontimetest: handlers are registered on it as on a
// Worker (it is a Registrar), and each Work runs one delivery on the
// executor, with no store and no claim loop, and reports its outcome.

func init() {
	testkit.NewWorker = newTestWorker
	testkit.EncodeBody = encodeBody
}

type testWorker struct {
	env      workerEnv
	defaults TopicOptions

	mu       sync.Mutex
	topics   map[string]testHandler
	patterns []testPattern // in registration order
}

type testHandler struct {
	h    rawHandler
	opts TopicOptions
}

type testPattern struct {
	pattern string
	testHandler
}

func newTestWorker(cfg testkit.Config) (testkit.Worker, error) {
	hooks, err := newHookSet(cfg.Hooks)
	if err != nil {
		return nil, fmt.Errorf("ontimetest: %w", err)
	}
	w := &testWorker{topics: map[string]testHandler{}}
	if mws, ok := cfg.Middleware.([]Middleware); ok {
		for _, m := range mws {
			if m != nil {
				w.env.middleware = append(w.env.middleware, m)
			}
		}
	}
	if d, ok := cfg.Defaults.(TopicOptions); ok {
		w.defaults = d
	}
	w.defaults = w.defaults.withDefaults()
	w.env.log = cfg.Logger
	if w.env.log == nil {
		w.env.log = slog.New(slog.DiscardHandler)
	}
	w.env.hooks = &hooks
	return w, nil
}

func (w *testWorker) register(topic string, h rawHandler, opts *TopicOptions) error {
	if err := ontimedriver.ValidateTopic(topic); err != nil {
		return fmt.Errorf("Handle: %w", err)
	}
	o, err := resolveOptions(topic, opts, w.defaults)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.topics[topic]; dup {
		return fmt.Errorf("%w: Handle: topic %q already has a handler", ErrInvalid, topic)
	}
	w.topics[topic] = testHandler{h, o}
	return nil
}

func (w *testWorker) registerPattern(pattern string, h rawHandler, opts *TopicOptions) error {
	if err := ontimedriver.ValidatePattern(pattern); err != nil {
		return fmt.Errorf("HandleTopics: %w", err)
	}
	o, err := resolveOptions(pattern, opts, w.defaults)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.patterns = append(w.patterns, testPattern{pattern, testHandler{h, o}})
	return nil
}

// handler finds topic's handler as a Worker would: its own, else the
// first pattern registered that matches it.
func (w *testWorker) handler(topic string) (testHandler, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h, ok := w.topics[topic]; ok {
		return h, nil
	}
	for _, p := range w.patterns {
		if ontimedriver.MatchTopic(p.pattern, topic) {
			return p.testHandler, nil
		}
	}
	return testHandler{}, fmt.Errorf("%w: ontimetest: no handler registered for topic %q", ErrInvalid, topic)
}

// testSink takes a test delivery's settlements and answers manual ones
// with reply.
type testSink struct{ reply error }

func (s testSink) submit(r settleReq) {
	if r.reply != nil {
		r.reply <- s.reply
	}
}

// delivery builds the executor and the delivery of d.
func (w *testWorker) delivery(ctx context.Context, d testkit.Delivery) (*executor, *delivery, error) {
	th, err := w.handler(d.Topic)
	if err != nil {
		return nil, nil, err
	}
	if d.ID == "" {
		return nil, nil, invalidf("ontimetest: the delivery's id is empty")
	}
	if err := ontimedriver.ValidateID(d.ID); err != nil {
		return nil, nil, err
	}
	payload := d.Payload
	if payload == nil {
		corr := d.CorrelationID
		if corr == "" {
			corr = d.ID
		}
		if payload, err = encodePayload(corr, d.Body, d.Headers); err != nil {
			return nil, nil, err
		}
	}
	ex := newExecutor(executorConfig{
		topic: d.Topic, handler: th.h, middleware: w.env.middleware, hooks: w.env.hooks,
		retry: th.opts.Retry, timeout: th.opts.Timeout, lenient: d.Lenient, log: w.env.log,
		sink: testSink{reply: d.SettleErr},
	})
	now := time.Now()
	due := d.Due
	if due.IsZero() {
		due = now
	}
	attempt := max(d.Attempt, 1)
	ct := ontimedriver.ClaimedTimer{ID: d.ID, Token: "ontimetest", Due: due, Attempt: attempt, LeaseUntil: now.Add(th.opts.Lease), Payload: payload}
	return ex, ex.newDelivery(ctx, &ct, now, now.Add(th.opts.Lease)), nil
}

func (w *testWorker) Work(ctx context.Context, d testkit.Delivery) (any, error) {
	ex, dl, err := w.delivery(ctx, d)
	if err != nil {
		return nil, err
	}
	defer dl.cancel()
	return ex.execute(dl), nil
}

func (w *testWorker) Build(ctx context.Context, d testkit.Delivery) (func() (any, bool), error) {
	ex, dl, err := w.delivery(ctx, d)
	if err != nil {
		return nil, err
	}
	env, err := decodePayload(ex.lenient, dl.t.Payload)
	if err != nil {
		return nil, fmt.Errorf("ontimetest: %w", err)
	}
	dl.info = Delivery{Topic: d.Topic, ID: dl.t.ID, Attempt: dl.t.Attempt, Due: dl.t.Due, FiredAt: dl.firedAt, LeaseUntil: dl.t.LeaseUntil}
	dl.info.CorrelationID, dl.info.ContentType, dl.info.Headers = splitHeaders(env, dl.t.ID)
	if err := ex.handler(dl.ctx, dl, env); err != nil {
		var ue *undecodableError
		if errors.As(err, &ue) {
			return nil, fmt.Errorf("ontimetest: %w", err)
		}
		return nil, err
	}
	return func() (any, bool) {
		m := dl.manual.Load()
		if m == nil {
			return DeliveryResult{}, false
		}
		return DeliveryResult{Outcome: m.outcome, Delay: m.delay, Reason: m.reason, Err: m.err}, true
	}, nil
}
