package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// BenchResult is what bench-api measured.
type BenchResult struct {
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"requests_per_sec"`
	P50Ms       float64 `json:"p50_ms"`
	P90Ms       float64 `json:"p90_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	Concurrency int     `json:"concurrency"`
	BodyBytes   int     `json:"body_bytes"`
}

func newBenchAPICmd(e *env) *cobra.Command {
	var (
		o           clientOpts
		duration    time.Duration
		concurrency int
		topic       string
		delay       string
		bodyBytes   int
	)
	cmd := &cobra.Command{
		Use:   "bench-api",
		Short: "Measure publish requests/s and latency of a running server",
		Long: `Send POST /v1/topics/TOPIC/timers from --concurrency connections for
--duration and report requests/s and latency percentiles. The timers are due
after --delay (default 1h) so that deliveries do not compete with publishes;
cancel them afterwards with a fresh server or by letting them fire.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.fill(e.lookup)
			if concurrency < 1 || duration <= 0 {
				return usageErr("--concurrency and --duration must be positive")
			}
			res, err := benchAPI(cmd.Context(), o.server, o.token, topic, delay, bodyBytes, concurrency, duration)
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(e.stdout, res)
			}
			fmt.Fprintf(e.stdout, "%d requests in %.1fs, %d errors, %d connections, %d-byte bodies\n",
				res.Requests, res.Seconds, res.Errors, res.Concurrency, res.BodyBytes)
			fmt.Fprintf(e.stdout, "%.0f requests/s; latency p50 %.2fms p90 %.2fms p99 %.2fms max %.2fms\n",
				res.PerSecond, res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.server, "server", "", "server URL (env ONTIME_SERVER)")
	f.StringVar(&o.token, "token", "", "bearer token (env ONTIME_TOKEN)")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.DurationVar(&duration, "duration", 10*time.Second, "how long to send")
	f.IntVar(&concurrency, "concurrency", 32, "parallel connections")
	f.StringVar(&topic, "topic", "bench", "topic to publish to")
	f.StringVar(&delay, "delay", "1h", "delay of each timer")
	f.IntVar(&bodyBytes, "body-bytes", 100, "body size")
	return cmd
}

func benchAPI(ctx context.Context, server, token, topic, delay string, bodyBytes, conc int, dur time.Duration) (*BenchResult, error) {
	body, err := json.Marshal(map[string]string{"body": strings.Repeat("x", bodyBytes), "delay": delay})
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(server, "/")
	u, err := url.Parse(base + topicPath(topic) + "/timers")
	if err != nil {
		return nil, usageErr("--server %q: %v", server, err)
	}
	var send []func(context.Context) error // one per connection
	if u.Scheme == "http" && u.User == nil {
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
		req := benchRequest(u.Host, u.EscapedPath(), token, body)
		for range conc {
			bc := &benchConn{addr: addr, req: req, timeout: benchTimeout}
			defer bc.close()
			send = append(send, bc.do)
		}
	} else {
		tr := &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc, IdleConnTimeout: time.Minute}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: benchTimeout}
		for range conc {
			send = append(send, func(ctx context.Context) error { return benchHTTPClient(ctx, hc, u.String(), token, body) })
		}
	}

	// Warm up a connection and check that the server answers.
	if err := send[0](ctx); err != nil {
		return nil, &exitError{code: ExitUnavailable, err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	lats := make([][]time.Duration, conc)
	errs := make([]int, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := make([]time.Duration, 0, 1<<14)
			for ctx.Err() == nil {
				t0 := time.Now()
				err := send[i](ctx)
				if ctx.Err() != nil {
					break
				}
				if err != nil {
					errs[i]++
					continue
				}
				l = append(l, time.Since(t0))
			}
			lats[i] = l
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	res := &BenchResult{Concurrency: conc, BodyBytes: bodyBytes, Seconds: elapsed.Seconds()}
	for i := range lats {
		all = append(all, lats[i]...)
		res.Errors += errs[i]
	}
	slices.Sort(all)
	res.Requests = len(all)
	res.PerSecond = float64(len(all)) / elapsed.Seconds()
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		i := int(p * float64(len(all)-1))
		return float64(all[i]) / float64(time.Millisecond)
	}
	res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs = pct(0.50), pct(0.90), pct(0.99), pct(1)
	return res, nil
}

// benchTimeout bounds one request of bench-api.
const benchTimeout = 30 * time.Second

// benchHTTPClient sends one request through net/http (https servers).
func benchHTTPClient(ctx context.Context, hc *http.Client, url, token string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
