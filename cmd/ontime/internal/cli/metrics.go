package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/ontimeprom"
)

// newMetrics returns the server's own registry (never the global one) with
// the ontime metrics, the Go runtime's and the process's. The topics the
// configuration names ([topics.NAME], and serve_topics entries without a
// *) get their topic labels first and keep them, beyond
// metrics_max_topics: junk topics published first cannot take them.
func newMetrics(cfg *config.Config) (*prometheus.Registry, *ontimeprom.Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var named []string
	for t := range cfg.Topics {
		named = append(named, t)
	}
	for _, p := range cfg.ServeTopics {
		if !strings.Contains(p, "*") {
			named = append(named, p)
		}
	}
	slices.Sort(named)
	m, err := ontimeprom.New(reg, &ontimeprom.Options{MaxTopics: cfg.MetricsMaxTopics, Topics: slices.Compact(named)})
	if err != nil {
		return nil, nil, err
	}
	return reg, m, nil
}

// metricsHandler serves reg in the Prometheus exposition formats; a
// collector's error is logged and the rest is still served.
func metricsHandler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// serveMetrics serves reg at http://addr/metrics (and nothing else) until
// the returned func is called, which shuts the listener down.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metricsHandler(reg, log))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String(), "path", "/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
