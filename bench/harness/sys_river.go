package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverSystem drives riverqueue/river (pgx v5 driver) on the harness's
// PostgreSQL: Insert/InsertMany with ScheduledAt, a Client with one queue
// of MaxWorkers = W.
type riverSystem struct {
	rt    roundTrips
	pool  *pgxpool.Pool
	admin *pgxpool.Pool // uncounted: pending checks, resets
	ins   *river.Client[pgx.Tx]
	tuned bool
	cfg   Config
}

type benchArgs struct {
	B []byte `json:"b"`
}

func (benchArgs) Kind() string { return "bench" }

func riverSpecs(cfg Config) []sysSpec {
	open := func(tuned bool) func(e *env) (system, error) {
		return func(e *env) (system, error) {
			ctx := context.Background()
			pg, err := e.postgres(ctx)
			if err != nil {
				return nil, err
			}
			s := &riverSystem{tuned: tuned, cfg: e.cfg}
			pc, err := pgxpool.ParseConfig(pg.URL)
			if err != nil {
				return nil, err
			}
			pc.MaxConns = 20
			pc.ConnConfig.Tracer = &s.rt
			if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
				return nil, err
			}
			ac, _ := pgxpool.ParseConfig(pg.URL)
			ac.MaxConns = 2
			if s.admin, err = pgxpool.NewWithConfig(ctx, ac); err != nil {
				s.pool.Close()
				return nil, err
			}
			m, err := rivermigrate.New(riverpgxv5.New(s.admin), nil)
			if err != nil {
				s.close()
				return nil, err
			}
			if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
				s.close()
				return nil, fmt.Errorf("river migrate: %w", err)
			}
			s.ins, err = river.NewClient(riverpgxv5.New(s.pool), &river.Config{Logger: quietSlog()})
			if err != nil {
				s.close()
				return nil, err
			}
			return s, nil
		}
	}
	return []sysSpec{
		{
			Name: "river", Family: "river", Store: "postgres", Batch: true,
			Settings: "defaults (FetchCooldown 100ms, FetchPollInterval 1s, scheduler every 5s); MaxWorkers = W; pgxpool MaxConns 20",
			open:     open(false),
		},
		{
			Name: "river-tuned", Family: "river", Store: "postgres", Batch: true, Tuned: true,
			Settings: fmt.Sprintf("FetchCooldown %s, FetchPollInterval %s (the 5s scheduler interval is not configurable); MaxWorkers = W; pgxpool MaxConns 20",
				cfg.RiverFetchCooldown, cfg.RiverFetchPoll),
			open: open(true),
		},
	}
}

func quietSlog() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 4}))
}

func (s *riverSystem) publish(ctx context.Context, queue string, ts []timer, batch int) error {
	return riverPublish(ctx, s.ins, queue, ts, batch)
}

// riverPublish publishes ts with River's client (PostgreSQL or SQLite):
// Insert one by one, or InsertMany in batches of batch.
func riverPublish[TTx any](ctx context.Context, ins *river.Client[TTx], queue string, ts []timer, batch int) error {
	opts := func(t timer) *river.InsertOpts {
		o := &river.InsertOpts{Queue: queue}
		if !t.due.IsZero() {
			o.ScheduledAt = t.due
		}
		return o
	}
	if batch <= 1 {
		for _, t := range ts {
			if _, err := ins.Insert(ctx, benchArgs{B: t.body}, opts(t)); err != nil {
				return err
			}
		}
		return nil
	}
	params := make([]river.InsertManyParams, 0, batch)
	for lo := 0; lo < len(ts); lo += batch {
		params = params[:0]
		for _, t := range ts[lo:min(lo+batch, len(ts))] {
			params = append(params, river.InsertManyParams{Args: benchArgs{B: t.body}, InsertOpts: opts(t)})
		}
		if _, err := ins.InsertMany(ctx, params); err != nil {
			return err
		}
	}
	return nil
}

func (s *riverSystem) work(ctx context.Context, queue string, w int, h func([]byte)) (func(context.Context), error) {
	newClient := func(c *river.Config) (*river.Client[pgx.Tx], error) {
		return river.NewClient(riverpgxv5.New(s.pool), c)
	}
	return riverWork(ctx, newClient, queue, w, s.tuned, s.cfg, h)
}

// riverWork starts River workers (PostgreSQL or SQLite: newClient makes
// the client) for queue with MaxWorkers w; tuned applies the harness's
// fetch settings. It returns the stop func.
func riverWork[TTx any](ctx context.Context, newClient func(*river.Config) (*river.Client[TTx], error), queue string, w int, tuned bool, hc Config, h func([]byte)) (func(context.Context), error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, j *river.Job[benchArgs]) error {
		h(j.Args.B)
		return nil
	}))
	cfg := &river.Config{
		Queues:  map[string]river.QueueConfig{queue: {MaxWorkers: w}},
		Workers: workers,
		Logger:  quietSlog(),
	}
	if tuned {
		cfg.FetchCooldown = hc.RiverFetchCooldown
		cfg.FetchPollInterval = hc.RiverFetchPoll
	}
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	return func(ctx context.Context) {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	}, nil
}

func (s *riverSystem) pending(ctx context.Context, queue string) (int64, error) {
	var n int64
	err := s.admin.QueryRow(ctx,
		`SELECT count(*) FROM river_job WHERE queue = $1 AND state NOT IN ('completed', 'cancelled', 'discarded')`,
		queue).Scan(&n)
	return n, err
}

// reset empties the job table between phases, so that every phase starts
// from the same table size.
func (s *riverSystem) reset(ctx context.Context) error {
	_, err := s.admin.Exec(ctx, `TRUNCATE river_job`)
	return err
}

func (s *riverSystem) roundTrips() int64 { return s.rt.load() }

func (s *riverSystem) close() {
	if s.pool != nil {
		s.pool.Close()
	}
	if s.admin != nil {
		s.admin.Close()
	}
}
