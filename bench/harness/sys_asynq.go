package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynqSystem drives hibiken/asynq on the harness's Redis: Enqueue with
// ProcessAt (or nothing, for due now), a Server with Concurrency = W.
type asynqSystem struct {
	rt    roundTrips
	rdb   *redis.Client
	admin *redis.Client // uncounted: pending checks
	cli   *asynq.Client
	insp  *asynq.Inspector
	tuned bool
	cfg   Config
}

func asynqSpecs(cfg Config) []sysSpec {
	open := func(tuned bool) func(e *env) (system, error) {
		return func(e *env) (system, error) {
			s := &asynqSystem{tuned: tuned, cfg: e.cfg}
			s.rdb = e.newRedis(&s.rt, 64)
			s.cli = asynq.NewClientFromRedisClient(s.rdb)
			s.admin = e.newRedis(nil, 4)
			s.insp = asynq.NewInspectorFromRedisClient(s.admin)
			return s, nil
		}
	}
	return []sysSpec{
		{
			Name: "asynq", Family: "asynq", Store: "redis",
			Settings: "defaults (TaskCheckInterval 1s, DelayedTaskCheckInterval 5s); Concurrency = W",
			open:     open(false),
		},
		{
			Name: "asynq-tuned", Family: "asynq", Store: "redis", Tuned: true,
			Settings: fmt.Sprintf("TaskCheckInterval %s, DelayedTaskCheckInterval %s; Concurrency = W",
				cfg.AsynqTaskCheck, cfg.AsynqDelayedCheck),
			open: open(true),
		},
	}
}

func (s *asynqSystem) publish(ctx context.Context, queue string, ts []timer, _ int) error {
	// asynq has no batch enqueue: one Enqueue (one Lua script) per task.
	for _, t := range ts {
		opts := []asynq.Option{asynq.Queue(queue)}
		if !t.due.IsZero() {
			opts = append(opts, asynq.ProcessAt(t.due))
		}
		if _, err := s.cli.EnqueueContext(ctx, asynq.NewTask("bench", t.body), opts...); err != nil {
			return err
		}
	}
	return nil
}

type quietAsynqLogger struct{}

func (quietAsynqLogger) Debug(...any) {}
func (quietAsynqLogger) Info(...any)  {}
func (quietAsynqLogger) Warn(...any)  {}
func (quietAsynqLogger) Error(...any) {}
func (quietAsynqLogger) Fatal(...any) {}

func (s *asynqSystem) work(_ context.Context, queue string, w int, h func([]byte)) (func(context.Context), error) {
	cfg := asynq.Config{
		Concurrency:     w,
		Queues:          map[string]int{queue: 1},
		Logger:          quietAsynqLogger{},
		LogLevel:        asynq.FatalLevel,
		ShutdownTimeout: 5 * time.Second,
	}
	if s.tuned {
		cfg.TaskCheckInterval = s.cfg.AsynqTaskCheck
		cfg.DelayedTaskCheckInterval = s.cfg.AsynqDelayedCheck
	}
	srv := asynq.NewServerFromRedisClient(s.rdb, cfg)
	err := srv.Start(asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		h(t.Payload())
		return nil
	}))
	if err != nil {
		return nil, err
	}
	return func(context.Context) { srv.Shutdown() }, nil
}

func (s *asynqSystem) pending(_ context.Context, queue string) (int64, error) {
	qi, err := s.insp.GetQueueInfo(queue)
	if err != nil {
		return 0, err
	}
	return int64(qi.Pending + qi.Active + qi.Scheduled + qi.Retry + qi.Aggregating), nil
}

func (s *asynqSystem) roundTrips() int64 { return s.rt.load() }

func (s *asynqSystem) close() {
	_ = s.cli.Close()
	_ = s.insp.Close()
	_ = s.rdb.Close()
	_ = s.admin.Close()
}
