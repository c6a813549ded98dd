package harness

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // database/sql driver "sqlite" (pure Go)
)

// riverSQLiteSystem drives riverqueue/river on SQLite (riversqlite, with
// the pure-Go modernc.org/sqlite driver) in a file under a fresh temporary
// directory on the local disk: WAL journal, synchronous=FULL (every commit
// fsyncs the WAL, as every ontimebolt commit fsyncs its file), one open
// connection for River as its driver documentation advises.
type riverSQLiteSystem struct {
	dir   string
	db    *sql.DB // River's pool: one connection
	admin *sql.DB // uncounted: pending checks (WAL readers run beside the writer)
	ins   *river.Client[*sql.Tx]
	tuned bool
	cfg   Config
}

// sqliteDSN opens path with WAL, synchronous=FULL and a busy timeout (the
// admin pool reads beside River's writer).
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
}

func riverSQLiteSpecs(cfg Config) []sysSpec {
	open := func(tuned bool) func(e *env) (system, error) {
		return func(e *env) (system, error) { return openRiverSQLite(e, tuned) }
	}
	return []sysSpec{
		{
			Name: "river-sqlite", Family: "river", Store: "sqlite", Batch: true,
			Settings:  "riversqlite + modernc.org/sqlite, WAL, synchronous=FULL, 1 connection; River defaults (FetchCooldown 100ms, FetchPollInterval 1s); MaxWorkers = W",
			Scenarios: []string{ScenarioEmbedded},
			open:      open(false),
		},
		{
			Name: "river-sqlite-tuned", Family: "river", Store: "sqlite", Batch: true, Tuned: true,
			Settings: fmt.Sprintf("as river-sqlite, with FetchCooldown %s, FetchPollInterval %s",
				cfg.RiverFetchCooldown, cfg.RiverFetchPoll),
			Scenarios: []string{ScenarioEmbedded},
			open:      open(true),
		},
	}
}

func openRiverSQLite(e *env, tuned bool) (*riverSQLiteSystem, error) {
	dir, err := os.MkdirTemp(benchDataDir(), "ontime-bench-sqlite-")
	if err != nil {
		return nil, err
	}
	s := &riverSQLiteSystem{dir: dir, tuned: tuned, cfg: e.cfg}
	if err := s.openDB(context.Background()); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *riverSQLiteSystem) openDB(ctx context.Context) error {
	dsn := sqliteDSN(filepath.Join(s.dir, "river.db"))
	var err error
	if s.db, err = sql.Open("sqlite", dsn); err != nil {
		return err
	}
	s.db.SetMaxOpenConns(1)
	if s.admin, err = sql.Open("sqlite", dsn); err != nil {
		return err
	}
	s.admin.SetMaxOpenConns(1)
	m, err := rivermigrate.New(riversqlite.New(s.db), nil)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	s.ins, err = river.NewClient(riversqlite.New(s.db), &river.Config{Logger: quietSlog()})
	return err
}

func (s *riverSQLiteSystem) publish(ctx context.Context, queue string, ts []timer, batch int) error {
	return riverPublish(ctx, s.ins, queue, ts, batch)
}

func (s *riverSQLiteSystem) work(ctx context.Context, queue string, w int, h func([]byte)) (func(context.Context), error) {
	newClient := func(c *river.Config) (*river.Client[*sql.Tx], error) {
		return river.NewClient(riversqlite.New(s.db), c)
	}
	return riverWork(ctx, newClient, queue, w, s.tuned, s.cfg, h)
}

func (s *riverSQLiteSystem) pending(ctx context.Context, queue string) (int64, error) {
	var n int64
	err := s.admin.QueryRowContext(ctx,
		`SELECT count(*) FROM river_job WHERE queue = ? AND state NOT IN ('completed', 'cancelled', 'discarded')`,
		queue).Scan(&n)
	return n, err
}

// reset empties the job table between phases.
func (s *riverSQLiteSystem) reset(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM river_job`)
	return err
}

// roundTrips is 0: SQLite is in process.
func (s *riverSQLiteSystem) roundTrips() int64 { return 0 }

func (s *riverSQLiteSystem) close() {
	if s.db != nil {
		_ = s.db.Close()
	}
	if s.admin != nil {
		_ = s.admin.Close()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}
