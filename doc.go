// Package ontime provides distributed timers and delayed messages: publish a
// message to a topic to be delivered in a duration or at an instant, and run
// handlers for topics in any number of worker processes. Each due timer is
// leased to exactly one worker at a time, delivered at least once, close to
// its due time and never before it, and removed only after its handler
// succeeds; a crashed worker's timers come back when their lease expires.
//
// # Stores
//
// A [Client] works on a store driver (package ontimedriver): Redis
// (ontimedriver/ontimeredis, native layout or the faststream-redis-timers
// compatible layout) or the embedded, single-machine bbolt store
// (ontimedriver/ontimebolt). The caller owns the driver and its client.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	drv, err := ontimeredis.New(rdb, nil)
//	client, err := ontime.NewClient(drv, nil)
//
// # Publishing
//
// [Client.Publish] schedules one message and returns its id; [In] and [At]
// set the due time, [WithID] a caller-chosen id (publishing an id that
// exists reschedules it and replaces its body; [IfAbsent] refuses instead,
// with [ErrExists]; an empty id is refused with [ErrInvalid]),
// [WithHeaders] and [WithCorrelationID] the envelope.
// [Client.PublishBatch] writes many timers in one store round trip per
// [BatchChunkSize] timers. Each such chunk is atomic, so a batch up to that
// size is written whole or not at all; a larger batch that fails part-way
// keeps the chunks written before the failure, and PublishBatch returns
// their results with a [*BatchError] that names the timers not written.
//
//	id, err := client.Publish(ctx, "invoices", Invoice{ID: 42}, ontime.In(30*24*time.Hour))
//
// Timers are inspected and managed with [Client.Get], [Client.List],
// [Client.Count], [Client.Topics] and [Client.Cancel]; [Client.CancelBatch]
// cancels many timers with a result per id, in one store round trip per
// [CancelChunkSize] ids, each chunk atomic (concurrent Cancel calls on a
// topic are merged into such calls by themselves); dead letters with
// [Client.DeadLetters], [Client.ReplayDeadLetters] and
// [Client.PurgeDeadLetters] (the ids given; none is refused with
// [ErrInvalid]), and [Client.ReplayAllDeadLetters] and
// [Client.PurgeAllDeadLetters] (every dead letter of the topic).
//
// # Handling
//
// A [Worker] runs handlers registered with [Handle]. The body is decoded into
// the handler's type parameter: []byte for raw bytes, string for text, any
// other type from JSON. A handler returns nil to ack, an error to retry after
// the topic's [RetryPolicy] backoff (dead-lettered past MaxAttempts), or
// [Snooze], [Drop], [DeadLetter] or [RetryAfter] (or wraps one). [Message]
// also has manual Ack, Nack, Drop, DeadLetter and Snooze methods. Drop
// deletes a timer and keeps it nowhere; DeadLetter keeps it aside in the
// topic's dead letters, with the reason "rejected". These outcomes are
// errors of exported types ([*SnoozeError], [*DropError],
// [*DeadLetterError], [*RetryAfterError]) that middleware can tell apart
// with errors.As or [OutcomeOf]. Package ontimetest runs a handler on a
// body, without a store, and reports its outcome.
//
//	w := ontime.NewWorker(client, nil)
//	ontime.Handle(w, "invoices", func(ctx context.Context, m *ontime.Message[Invoice]) error {
//		return send(ctx, m.Body)
//	}, &ontime.TopicOptions{MaxConcurrency: 20})
//	err := w.Run(ctx) // until ctx is cancelled; or call w.Stop(ctx)
//
// A worker sleeps until its topic's next due instant, is woken by the store
// when an earlier timer is published, and polls only as a fallback
// (TopicOptions.PollInterval), so an idle worker makes one store call per
// poll interval. While a handler runs, its lease is extended (heartbeat); if
// the lease is lost, or its deadline comes near without a successful
// extension (the store unreachable, or the heartbeat disabled), the
// handler's context is cancelled before another worker can claim the timer,
// and its result is not acked: two handlers of one timer never run at once,
// as long as handlers return when their context ends.
//
// [TopicOptions].Timeout bounds each attempt: the handler's context ends
// then (its cause [ErrTimeout]) and an attempt that runs past it has failed.
// Handlers' contexts carry the values of Run's context.
//
// # Middleware and hooks
//
// [WorkerConfig].Middleware wraps every handler call of a worker ([Middleware]:
// logging, timing, panic policies, turning errors into outcomes); a handler's
// panic reaches it as a [*PanicError]. [Config].Hooks plug observers into a
// Client and its workers without the library importing them: a
// [BeforePublishHook] may write headers into every published timer (a W3C
// traceparent), an [AfterPublishHook] sees what was written, a
// [DeliveryStartHook] gives the handler's context (a span from those
// headers), and a [DeliveryEndHook] gets every delivery's [Delivery] (topic,
// id, attempt, due and fire instants, headers) and [DeliveryResult] (the
// [Outcome], the error, the handler's duration); a [StoreCallHook] is told
// of every store call (its op, topic, duration and error). Metrics and
// tracing modules are built on them: ontimeprom (Prometheus) and ontimeotel
// (OpenTelemetry), each in its own module.
//
// [Worker.Health] tells whether the store answers (Healthy, with the error
// and the time it last changed) and whether wake-up notifications are
// working (Degraded: the worker still delivers, by polling, so timers may
// be up to one poll interval late). Each change of either is logged once.
//
// # Shutdown
//
// [Worker.Stop] (and Run, when its context ends) first stops claiming: no
// claim starts after the stop has begun. A claim already on its way to the
// store is not cut short (a cut claim could strand timers the store had
// leased until their leases expire); the timers it brings back are handed
// straight back to the store, due at once and without counting an attempt,
// so another worker takes them immediately. Running handlers are waited
// for until Stop's context ends (for Run, WorkerConfig.ShutdownTimeout);
// then their contexts are cancelled, and a handler that returns after that
// leaves its timer due again at once, again without counting an attempt.
// Outcomes the store has not taken when the context ends (a store outage
// during the stop) get one last try and are then given up: their timers are
// delivered again after their leases, never lost. Stop returns the
// context's error in either case (Run then returns an error wrapping it; it
// returns nil after a clean stop), and returns only once Run has returned.
// Stop on a Worker that never ran marks it stopped (Run then returns
// [ErrStopped]); calling it again is harmless.
//
// # Recurring timers
//
// [Client.PublishRecurring] publishes a timer with a schedule (package
// schedule: an interval, or cron with a time zone) that fires once per
// tick across every worker of its topic, with no leader and nothing in
// memory: a tick is claimed under a lease like any timer, and its
// settlement and the arming of the next tick are one atomic, fenced store
// operation, so a crash between them cannot lose or double the schedule.
// The handler sees the tick's scheduled instant and number
// ([Message].Tick), to be idempotent per tick. A failing tick is retried
// by the topic's retry policy; a dead-lettered tick is copied to the dead
// letters as id#N and the schedule goes on. Two ticks of one schedule
// never run at once: the next tick is armed when the running one settles,
// and ticks that fell due meanwhile, or during an outage, follow the
// schedule's [MissedPolicy] ([FireOnce], the default, or [FireEach] with
// a bound). [Jitter] spreads ticks over a window, never before the tick.
// Publishing the id again replaces the schedule (or is refused with
// [IfAbsent]); [Client.Pause], [Client.Resume] and [Client.Cancel] act on
// it; [Client.Get] shows it ([TimerInfo].Recurring). The native Redis
// layout and the embedded store keep recurring timers; the
// faststream-compatible layout refuses them ([ErrUnsupported]). See
// docs/recurring.md.
//
// # Retries and stores without attempt counters
//
// A failed handler's timer is retried after [RetryPolicy.Backoff] of its
// attempt number; a negative RetryPolicy.Jitter turns the jitter off (zero
// means the default, 0.2). MaxAttempts needs the store's attempt counter:
// with a store that keeps none (the faststream-compatible Redis layout)
// every delivery reports Attempt 1, so a timer whose handler keeps failing
// is retried forever, at the first backoff step (elsewhere that takes
// MaxAttempts: [RetryForever]); dead-letter such timers
// from the handler ([DeadLetter]) when that matters.
//
// # Guarantees
//
// Delivery is at least once. A timer is deleted only by an ack fenced with
// its lease token, so a handler that re-publishes its own id keeps the new
// timer, and a worker whose lease expired cannot delete what another worker
// now holds. What can duplicate: a timer whose handler finished but whose
// ack did not reach the store before the lease expired (worker crash, store
// outage longer than the lease, a handler that outlives its lease with the
// heartbeat disabled). What cannot be lost: a timer whose Publish returned
// nil stays in the store until an ack, a drop, a cancel or a re-publish of
// its id (with the embedded store, on disk; with Redis, as durable as the
// Redis persistence settings make it).
package ontime
