package harness

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// embeddedSystem drives ontime on its embedded store (ontimebolt, fsync
// on) in a file under a fresh temporary directory on the local disk: the
// same Client and Worker calls as ontimeSystem.
type embeddedSystem struct {
	dir    string
	drv    *ontimebolt.Driver
	client *ontime.Client
}

func embeddedSpecs(Config) []sysSpec {
	return []sysSpec{
		{
			Name: "ontime-embedded", Family: "ontime", Store: "bolt", Batch: true,
			Settings:  "embedded store (ontimebolt, bbolt file on local disk, fsync on); MaxConcurrency = W, ClaimBatch 256 (defaults)",
			Scenarios: []string{ScenarioEmbedded, ScenarioPublish},
			open:      func(e *env) (system, error) { return openEmbedded(e) },
		},
	}
}

func openEmbedded(*env) (*embeddedSystem, error) {
	dir, err := os.MkdirTemp(benchDataDir(), "ontime-bench-bolt-")
	if err != nil {
		return nil, err
	}
	s := &embeddedSystem{dir: dir}
	if s.drv, err = ontimebolt.Open(filepath.Join(dir, "timers.db"), &ontimebolt.Options{Logger: quietSlog()}); err != nil {
		s.close()
		return nil, err
	}
	if s.client, err = ontime.NewClient(s.drv, &ontime.Config{Logger: quietSlog()}); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// benchDataDir is where embedded stores keep their files: ONTIME_BENCH_DIR,
// else the system's temporary directory. It must be a real disk (not a
// tmpfs), or fsync costs nothing and the numbers mean little.
func benchDataDir() string {
	if d := os.Getenv("ONTIME_BENCH_DIR"); d != "" {
		return d
	}
	return os.TempDir()
}

func (s *embeddedSystem) publish(ctx context.Context, queue string, ts []timer, batch int) error {
	return clientPublish(ctx, s.client, queue, ts, batch)
}

func (s *embeddedSystem) work(ctx context.Context, queue string, w int, h func([]byte)) (func(context.Context), error) {
	return clientWork(s.client, queue, w, 0, h)
}

func (s *embeddedSystem) pending(ctx context.Context, queue string) (int64, error) {
	c, err := s.drv.Count(ctx, queue)
	if err != nil {
		return 0, err
	}
	return c.Scheduled + c.Leased, nil
}

// roundTrips is 0: the store is in process; there is no round trip to
// count.
func (s *embeddedSystem) roundTrips() int64 { return 0 }

// reset starts every phase on an empty file, as the Redis systems start on
// an emptied Redis: the file's size would otherwise grow run after run.
func (s *embeddedSystem) reset(context.Context) error {
	if s.drv != nil {
		if err := s.drv.Close(); err != nil {
			return err
		}
	}
	path := filepath.Join(s.dir, "timers.db")
	_ = os.Remove(path)
	var err error
	if s.drv, err = ontimebolt.Open(path, &ontimebolt.Options{Logger: quietSlog()}); err != nil {
		return err
	}
	s.client, err = ontime.NewClient(s.drv, &ontime.Config{Logger: quietSlog()})
	return err
}

func (s *embeddedSystem) close() {
	if s.drv != nil {
		_ = s.drv.Close()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// clientPublish publishes ts through an ontime Client: one Publish per
// timer when batch <= 1, else PublishBatch calls of up to batch timers.
func clientPublish(ctx context.Context, c *ontime.Client, queue string, ts []timer, batch int) error {
	if batch <= 1 {
		for _, t := range ts {
			var opts []ontime.PublishOption
			if !t.due.IsZero() {
				opts = append(opts, ontime.At(t.due))
			}
			if _, err := c.Publish(ctx, queue, t.body, opts...); err != nil {
				return err
			}
		}
		return nil
	}
	buf := make([]ontime.Timer, 0, batch)
	for lo := 0; lo < len(ts); lo += batch {
		buf = buf[:0]
		for _, t := range ts[lo:min(lo+batch, len(ts))] {
			buf = append(buf, ontime.Timer{Body: t.body, At: t.due})
		}
		res, err := c.PublishBatch(ctx, queue, buf)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
	}
	return nil
}

// clientWork runs a Worker on c with one topic of MaxConcurrency w; lease
// 0 is the default.
func clientWork(c *ontime.Client, queue string, w int, lease time.Duration, h func([]byte)) (func(context.Context), error) {
	wk := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quietSlog(), ShutdownTimeout: 10 * time.Second})
	err := ontime.Handle(wk, queue, func(_ context.Context, m *ontime.Message[[]byte]) error {
		h(m.Body)
		return nil
	}, &ontime.TopicOptions{MaxConcurrency: w, Lease: lease})
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- wk.Run(context.Background()) }()
	return func(ctx context.Context) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = wk.Stop(sctx)
		<-done
	}, nil
}
