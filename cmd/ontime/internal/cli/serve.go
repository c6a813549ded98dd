package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/delivery"
	"github.com/ontime-go/ontime/cmd/ontime/internal/store"
	"github.com/ontime-go/ontime/dashboard"
	"github.com/ontime-go/ontime/internal/activity"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimeprom"
)

// serveFlags maps flag names to config keys.
var serveFlags = map[string]string{
	"listen":                  "listen",
	"data-dir":                "data_dir",
	"redis":                   "redis",
	"redis-layout":            "redis_layout",
	"redis-prefix":            "redis_prefix",
	"redis-tls-ca":            "redis_tls_ca",
	"redis-tls-cert":          "redis_tls_cert",
	"redis-tls-key":           "redis_tls_key",
	"redis-shards":            "redis_shards",
	"redis-classic-pubsub":    "redis_classic_pubsub",
	"wait-replicas":           "wait_replicas",
	"wait-timeout":            "wait_timeout",
	"max-body-bytes":          "max_body_bytes",
	"read-timeout":            "read_timeout",
	"max-inflight-bytes":      "max_inflight_bytes",
	"min-body-rate":           "min_body_rate",
	"tokens":                  "tokens",
	"read-tokens":             "read_tokens",
	"write-tokens":            "write_tokens",
	"admin-tokens":            "admin_tokens",
	"allowed-hosts":           "allowed_hosts",
	"serve-topics":            "serve_topics",
	"discover-interval":       "discover_interval",
	"shutdown-timeout":        "shutdown_timeout",
	"metrics-sample-interval": "metrics_sample_interval",
	"metrics-max-topics":      "metrics_max_topics",
	"log-level":               "log_level",
	"log-format":              "log_format",
}

func newServeCmd(e *env) *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API and the delivery workers",
		Long: `Run the HTTP API and the workers that deliver fired timers to each topic's
target (log by default). Configuration: defaults, then the TOML file
(--config or ONTIME_CONFIG), then ONTIME_* variables, then flags.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadServeConfig(cmd.Flags(), configPath, e.lookup)
			if err != nil {
				return &exitError{code: ExitUsage, err: err}
			}
			return serve(cmd.Context(), cfg, e.stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "TOML config file (env ONTIME_CONFIG)")
	f.String("listen", config.DefaultListen, "HTTP listen address (env ONTIME_LISTEN)")
	f.String("data-dir", config.DefaultDataDir, "embedded store directory (env ONTIME_DATA_DIR)")
	f.String("redis", "", "use Redis at this URL instead of the embedded store (env ONTIME_REDIS)")
	f.String("redis-layout", "native", "Redis layout: native or compat (env ONTIME_REDIS_LAYOUT)")
	f.String("redis-prefix", "", "Redis key prefix (env ONTIME_REDIS_PREFIX)")
	f.String("redis-tls-ca", "", "PEM CA certificates to trust for a rediss URL instead of the system's (env ONTIME_REDIS_TLS_CA)")
	f.String("redis-tls-cert", "", "PEM client certificate for a rediss URL (env ONTIME_REDIS_TLS_CERT)")
	f.String("redis-tls-key", "", "PEM key of --redis-tls-cert (env ONTIME_REDIS_TLS_KEY)")
	f.String("redis-shards", "", `sharded topics: comma-separated topic-or-pattern=count ("clicks=3,orders.*=2"; env ONTIME_REDIS_SHARDS)`)
	f.Bool("redis-classic-pubsub", false, "Redis Cluster: wake-ups by classic pub/sub (PUBLISH) instead of sharded (SPUBLISH, Redis 7.0+) (env ONTIME_REDIS_CLASSIC_PUBSUB)")
	f.Int("wait-replicas", 0, "publishes wait until this many Redis replicas have them (WAIT); 0: the primary only (env ONTIME_WAIT_REPLICAS)")
	f.Duration("wait-timeout", time.Second, "bound of the wait for replicas (env ONTIME_WAIT_TIMEOUT)")
	f.Int64("max-body-bytes", config.DefaultMaxBodyBytes, "largest message body (env ONTIME_MAX_BODY_BYTES)")
	f.Duration("read-timeout", config.DefaultReadTimeout, "how long a client may take to send a request body (env ONTIME_READ_TIMEOUT)")
	f.Int64("max-inflight-bytes", 0, "request bytes read at once before 503 overloaded (default: 4 of the largest requests; env ONTIME_MAX_INFLIGHT_BYTES)")
	f.Int64("min-body-rate", 0, "slowest a request body may arrive, bytes/s over 2 s windows, before 408 (default 16384; negative: none; env ONTIME_MIN_BODY_RATE)")
	f.String("tokens", "", "comma-separated bearer tokens with the admin role; turns auth on (env ONTIME_TOKENS)")
	f.String("read-tokens", "", "comma-separated bearer tokens that may only read (GET, /metrics, watch) (env ONTIME_READ_TOKENS)")
	f.String("write-tokens", "", "comma-separated bearer tokens that may also publish, cancel and fire (env ONTIME_WRITE_TOKENS)")
	f.String("admin-tokens", "", "comma-separated bearer tokens that may do everything (env ONTIME_ADMIN_TOKENS)")
	f.String("allowed-hosts", "", `host names clients reach the server by, besides its address and localhost ("*.example.com"; "*": any) (env ONTIME_ALLOWED_HOSTS)`)
	f.String("serve-topics", "", `topics delivered besides the configured ones: comma-separated names or patterns with * and ? (default "*" native, none compat; env ONTIME_SERVE_TOPICS)`)
	f.Duration("discover-interval", config.DefaultDiscover, "how often to look for new topics matching serve-topics (env ONTIME_DISCOVER_INTERVAL)")
	f.Duration("shutdown-timeout", config.DefaultShutdownTimeout, "graceful stop bound (env ONTIME_SHUTDOWN_TIMEOUT)")
	f.Duration("metrics-sample-interval", config.DefaultMetricsSample, "how often /metrics counts the timers of every topic (env ONTIME_METRICS_SAMPLE_INTERVAL)")
	f.Int("metrics-max-topics", config.DefaultMetricsTopics, `topic labels /metrics hands out before counting topics under "(other)"; negative: no cap (env ONTIME_METRICS_MAX_TOPICS)`)
	f.String("log-level", "info", "debug, info, warn or error (env ONTIME_LOG_LEVEL)")
	f.String("log-format", "text", "text or json (env ONTIME_LOG_FORMAT)")
	return cmd
}

// loadServeConfig applies defaults < file < env < flags.
func loadServeConfig(fs *pflag.FlagSet, path string, lookup func(string) (string, bool)) (*config.Config, error) {
	var cfg config.Config
	if path == "" {
		path, _ = lookup("ONTIME_CONFIG")
	}
	if path != "" {
		if err := cfg.LoadFile(path); err != nil {
			return nil, err
		}
	}
	if err := cfg.ApplyEnv(lookup); err != nil {
		return nil, err
	}
	var errs []error
	fs.Visit(func(f *pflag.Flag) {
		if key, ok := serveFlags[f.Name]; ok {
			if err := cfg.Set(key, f.Value.String()); err != nil {
				errs = append(errs, fmt.Errorf("--%s: %w", f.Name, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.Fill()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if lim := server.BatchRequestLimit(cfg.MaxBodyBytes); cfg.MaxInflightBytes != 0 && cfg.MaxInflightBytes < lim {
		return nil, fmt.Errorf("max_inflight_bytes %d is below the largest request the API takes (%d, from max_body_bytes): such a request could never be read", cfg.MaxInflightBytes, lim)
	}
	return &cfg, nil
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	o := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// openStore opens the configured store.
func openStore(cfg *config.Config, log *slog.Logger) (*store.Store, error) {
	if cfg.Redis != "" {
		return store.OpenRedis(store.RedisOptions{
			URL: cfg.Redis, Layout: cfg.RedisLayout, Prefix: cfg.RedisPrefix,
			TLS:    store.RedisTLS{CAFile: cfg.RedisTLSCA, CertFile: cfg.RedisTLSCert, KeyFile: cfg.RedisTLSKey},
			Shards: cfg.RedisShards, WaitReplicas: cfg.WaitReplicas, WaitTimeout: cfg.WaitTimeout.D(),
			ClassicPubSub: cfg.RedisClassicPubSub,
		}, log)
	}
	return store.OpenEmbedded(cfg.DataDir, log)
}

// libraryBodyLimit is the envelope cap given to the library: the API checks
// bodies itself (MaxBodyBytes); the envelope adds headers.
func libraryBodyLimit(maxBody int64) int { return int(maxBody) + 1<<20 }

func serve(ctx context.Context, cfg *config.Config, stderr io.Writer) error {
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	store.RouteRedisLogs(log)
	st, err := openStore(cfg, log)
	if err != nil {
		return &exitError{code: ExitUnavailable, err: fmt.Errorf("open store: %w", err)}
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Warn("closing the store", "err", err)
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if err := st.Driver.Ping(pctx); err != nil {
		log.Warn("the store is not reachable yet; /readyz reports it", "err", err)
	}
	cancel()
	recent := activity.New() // each topic's last minute, for GET /v1/topics and the dashboard
	reg, metrics, err := newMetrics(cfg)
	if err != nil {
		return err
	}
	if err := registerTopicFaults(reg, st.Driver); err != nil {
		return err
	}
	hooks := []any{recent, metrics}
	client, err := ontime.NewClient(st.Driver, &ontime.Config{Logger: log, MaxBodyBytes: libraryBodyLimit(cfg.MaxBodyBytes), Hooks: hooks})
	if err != nil {
		return err
	}
	disp, err := delivery.New(delivery.Options{
		Client: client, Config: cfg, Logger: log, OpenRedis: st.RedisFor, Hooks: hooks,
		WatchWorker: func(w *ontime.Worker) func() { return metrics.WatchWorker(w) },
	})
	if err != nil {
		return &exitError{code: ExitUsage, err: err}
	}
	done := make(chan struct{})
	topics := make([]string, 0, len(cfg.Topics))
	for t := range cfg.Topics {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	api := server.New(server.Options{
		Client: client, Dispatcher: disp.API(), Activity: recent, StoreKind: st.Kind, MaxBodyBytes: cfg.MaxBodyBytes,
		Tokens: cfg.Tokens, RoleTokens: roleTokens(cfg), AllowedHosts: cfg.AllowedHosts, Topics: topics, Logger: log, Done: done,
		ReadTimeout: cfg.ReadTimeout.D(), MaxInflightBytes: cfg.MaxInflightBytes, MinBodyRate: cfg.MinBodyRate,
		Metrics: metricsHandler(reg, log),
	})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return &exitError{code: ExitUnavailable, err: err}
	}
	srv := server.NewHTTPServer(withDashboard(api), log)
	sampleCtx, stopSampler := context.WithCancel(context.WithoutCancel(ctx))
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		// The topics it delivers: listed and filtered with serve_topics;
		// with none, the configured ones by name, so that the compat
		// layout's keyspace is never scanned (as discovery does not).
		// At most metrics_max_topics topics are counted per pass, and on
		// a store with a topic index (which may hold 100,000 topics)
		// only those the server has published or delivered: a list and
		// a count of every topic each pass would cost the store more
		// than everything else an idle server does.
		so := &ontimeprom.SampleOptions{Interval: cfg.MetricsSampleInterval.D(), Filter: cfg.Serves, MaxTopics: max(cfg.MetricsMaxTopics, 0)}
		_, so.Labelled = ontimedriver.IndexedTopics(st.Driver)
		if len(cfg.ServeTopics) == 0 {
			if len(topics) == 0 {
				return
			}
			so.Topics, so.Filter = topics, nil
		}
		metrics.RunSampler(sampleCtx, st.Driver, so)
	}()
	defer func() { stopSampler(); <-sampled }() // before the store closes
	if err := applySchedules(ctx, client, cfg.Schedules, log); err != nil {
		return &exitError{code: ExitUnavailable, err: err}
	}
	if err := disp.Start(); err != nil {
		return &exitError{code: ExitUsage, err: err}
	}
	for _, d := range cfg.Schedules {
		disp.Ensure(d.Topic)
	}
	where := cfg.DataDir
	if st.Kind == store.KindRedis {
		where = redactURL(cfg.Redis)
	}
	log.Info("ontime serving", "addr", ln.Addr().String(), "store", st.Kind, "at", where, "auth", cfg.AuthOn(),
		"dashboard", "http://"+ln.Addr().String()+"/ui/")
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout.D().String())
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout.D())
	defer scancel()
	close(done) // ends watch streams; their in-flight timers go back to the store
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	if err := disp.Shutdown(sctx); err != nil {
		log.Warn("workers did not stop in time; their timers are redelivered when the leases expire", "err", err)
	}
	log.Info("stopped")
	return nil
}

// roleTokens returns the tokens of the read_tokens, write_tokens and
// admin_tokens keys with their roles (tokens, the older key, are admin:
// server.Options.Tokens).
func roleTokens(cfg *config.Config) []server.Token {
	var out []server.Token
	for _, l := range []struct {
		list []string
		role server.Role
	}{{cfg.ReadTokens, server.RoleRead}, {cfg.WriteTokens, server.RoleWrite}, {cfg.AdminTokens, server.RoleAdmin}} {
		for _, t := range l.list {
			out = append(out, server.Token{Secret: t, Role: l.role})
		}
	}
	return out
}

// withDashboard serves the dashboard's page at /ui/ (its assets hold no
// data and need no token; the page sends the user's token with every API
// call) and everything else with the API.
func withDashboard(api http.Handler) http.Handler {
	page := http.StripPrefix("/ui", dashboard.Handler("/"))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/ui":
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		case strings.HasPrefix(r.URL.Path, "/ui/"):
			page.ServeHTTP(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}
