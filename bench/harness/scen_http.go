package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HTTPRun is one run of `ontime bench-api` against one server.
type HTTPRun struct {
	PerSecond F   `json:"requests_per_sec"`
	P50       F   `json:"p50_ms"`
	P99       F   `json:"p99_ms"`
	Requests  int `json:"requests"`
	Errors    int `json:"errors"`
	// CPU time per request, µs: the server process, the load generator
	// and (Redis store) redis-server. NaN where not measured.
	ServerCPU  F `json:"server_cpu_us"`
	LoadgenCPU F `json:"loadgen_cpu_us"`
	RedisCPU   F `json:"redis_cpu_us"`
	// DeliveredPerSecond is, with a short Config.HTTPDelay, every timer
	// published over HTTP and delivered to its target, per second, from
	// the first request to the moment the topic is empty (NaN with the
	// default delay: nothing is delivered during the run).
	DeliveredPerSecond F `json:"delivered_per_sec"`
}

// httpDrainMax is the longest Config.HTTPDelay at which the HTTP scenario
// waits for the server to deliver what it published, and how long it
// waits at most.
const httpDrainMax = time.Minute

// HTTPResult holds the runs of one server build on one store.
type HTTPResult struct {
	// Store is "redis" or "embedded".
	Store string `json:"store"`
	// Build is "ontime" (this tree) or "ontime@REF" (Config.HTTPBaseline).
	Build  string    `json:"build"`
	Runs   []HTTPRun `json:"runs"`
	Median HTTPRun   `json:"median"`
	Err    string    `json:"error,omitempty"`
}

// httpBuild is one ontime binary the HTTP scenario serves with.
type httpBuild struct {
	name string
	bin  string
}

// http measures POST /v1/topics/{topic}/timers on `ontime serve`, on the
// harness's Redis and on the embedded store, with `ontime bench-api`
// (HTTPConcurrency connections for HTTPFor, 100-byte bodies, timers due in
// an hour), next to the same scenario served by the build at
// Config.HTTPBaseline when one is given. The server and the load
// generator are separate processes on the same CPUs.
func (b *bench) http(ctx context.Context) {
	cfg := b.cfg
	b.logf("== http: %d connections for %s, %d runs, timers due in %s, stores %v, baseline %q", cfg.HTTPConcurrency, cfg.HTTPFor, cfg.Runs, cfg.HTTPDelay, cfg.HTTPStores, cfg.HTTPBaseline)
	tmp, err := os.MkdirTemp(benchDataDir(), "ontime-bench-http-")
	if err != nil {
		b.errorf("http: %v", err)
		return
	}
	defer os.RemoveAll(tmp)
	builds, err := b.httpBuilds(ctx, tmp, true)
	if err != nil {
		b.errorf("http: %v", err)
		return
	}
	var res []*HTTPResult
	for _, store := range cfg.HTTPStores {
		for _, bd := range builds {
			res = append(res, &HTTPResult{Store: store, Build: bd.name})
		}
	}
	loadgen := builds[0].bin // the same client for every server
	for run := range cfg.Runs {
		i := 0
		for _, store := range cfg.HTTPStores {
			for _, bd := range builds {
				r := res[i]
				i++
				if r.Err != "" || ctx.Err() != nil {
					continue
				}
				hr, err := b.httpRun(ctx, tmp, bd, loadgen, store, run)
				if err != nil {
					r.Err = err.Error()
					b.errorf("http %s %s run %d: %v", bd.name, store, run+1, err)
					continue
				}
				b.logf("http %-14s %-8s run %d: %s req/s, p50 %s ms, p99 %s ms, %d errors; CPU µs/request: server %s, load generator %s, redis %s; delivered end to end %s/s",
					bd.name, store, run+1, fmtRate(hr.PerSecond), f2(hr.P50), f2(hr.P99), hr.Errors, f2(hr.ServerCPU), f2(hr.LoadgenCPU), f2(hr.RedisCPU), fmtRate(hr.DeliveredPerSecond))
				r.Runs = append(r.Runs, hr)
			}
		}
	}
	for _, r := range res {
		pick := func(f func(HTTPRun) F) F {
			v := make([]float64, len(r.Runs))
			for i, x := range r.Runs {
				v[i] = float64(f(x))
			}
			return F(median(v))
		}
		r.Median = HTTPRun{
			PerSecond:          pick(func(x HTTPRun) F { return x.PerSecond }),
			P50:                pick(func(x HTTPRun) F { return x.P50 }),
			P99:                pick(func(x HTTPRun) F { return x.P99 }),
			ServerCPU:          pick(func(x HTTPRun) F { return x.ServerCPU }),
			LoadgenCPU:         pick(func(x HTTPRun) F { return x.LoadgenCPU }),
			RedisCPU:           pick(func(x HTTPRun) F { return x.RedisCPU }),
			DeliveredPerSecond: pick(func(x HTTPRun) F { return x.DeliveredPerSecond }),
		}
		b.rep.HTTP = append(b.rep.HTTP, *r)
	}
}

// httpBuilds builds the ontime binary of this tree (or takes
// Config.OntimeBin) and, when withBaseline and Config.HTTPBaseline are set, the one at that git ref
// (extracted with git archive into tmp).
func (b *bench) httpBuilds(ctx context.Context, tmp string, withBaseline bool) ([]httpBuild, error) {
	root, err := repoRoot()
	if err != nil && (b.cfg.OntimeBin == "" || (withBaseline && b.cfg.HTTPBaseline != "")) {
		return nil, err
	}
	cur := b.cfg.OntimeBin
	if cur == "" {
		cur = filepath.Join(tmp, "ontime")
		b.logf("building ontime from %s", root)
		if err := goBuild(ctx, root, cur); err != nil {
			return nil, err
		}
	}
	builds := []httpBuild{{name: "ontime", bin: cur}}
	if ref := b.cfg.HTTPBaseline; ref != "" && withBaseline {
		src := filepath.Join(tmp, "baseline-src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return nil, err
		}
		b.logf("building ontime at %s", ref)
		archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", ref)
		untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
		pipe, err := archive.StdoutPipe()
		if err != nil {
			return nil, err
		}
		untar.Stdin = pipe
		var aerr, terr bytes.Buffer
		archive.Stderr, untar.Stderr = &aerr, &terr
		if err := untar.Start(); err != nil {
			return nil, err
		}
		if err := archive.Run(); err != nil {
			_ = untar.Wait()
			return nil, fmt.Errorf("git archive %s: %v: %s", ref, err, aerr.String())
		}
		if err := untar.Wait(); err != nil {
			return nil, fmt.Errorf("untar %s: %v: %s", ref, err, terr.String())
		}
		bin := filepath.Join(tmp, "ontime-baseline")
		if err := goBuild(ctx, src, bin); err != nil {
			return nil, fmt.Errorf("build %s: %w", ref, err)
		}
		builds = append(builds, httpBuild{name: "ontime@" + ref, bin: bin})
	}
	return builds, nil
}

// repoRoot finds the ontime tree: the working directory or a parent that
// holds go.work and cmd/ontime.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "cmd", "ontime")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the ontime tree (go.work and cmd/ontime) is not here or above: run from the repository, or pass -ontime-bin")
		}
		dir = parent
	}
}

func goBuild(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/ontime")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/ontime in %s: %v: %s", root, err, b)
	}
	return nil
}

// httpRun starts `ontime serve` on store, measures it with bench-api and
// stops it.
func (b *bench) httpRun(ctx context.Context, tmp string, bd httpBuild, loadgen, store string, run int) (HTTPRun, error) {
	port, err := freePort()
	if err != nil {
		return HTTPRun{}, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"serve", "--listen", addr, "--log-level", "warn"}
	dataDir := ""
	switch store {
	case "redis":
		args = append(args, "--redis", "redis://"+b.redis.Addr, "--redis-prefix", fmt.Sprintf("benchhttp%d:", queueSeq.Add(1)))
	default:
		dataDir = filepath.Join(tmp, fmt.Sprintf("data-%s-%d", strings.ReplaceAll(bd.name, "@", "-"), run))
		args = append(args, "--data-dir", dataDir)
	}
	cmd := exec.Command(bd.bin, args...)
	cmd.Env = serveEnv()
	srv, err := startChild(cmd)
	if err != nil {
		return HTTPRun{}, err
	}
	defer func() {
		srv.stop(syscall.SIGTERM, 10*time.Second)
		if dataDir != "" {
			_ = os.RemoveAll(dataDir)
		}
	}()
	url := "http://" + addr
	if err := waitHealthy(ctx, url, srv); err != nil {
		return HTTPRun{}, err
	}
	topic := fmt.Sprintf("bench%d", queueSeq.Add(1))
	lg := exec.CommandContext(ctx, loadgen, "bench-api", "--server", url, "--json",
		"--concurrency", strconv.Itoa(b.cfg.HTTPConcurrency), "--duration", b.cfg.HTTPFor.String(),
		"--topic", topic, "--body-bytes", strconv.Itoa(b.cfg.BodySize), "--delay", b.cfg.HTTPDelay.String())
	lg.Env = serveEnv()
	var out, errb bytes.Buffer
	lg.Stdout, lg.Stderr = &out, &errb
	srvCPU0, redisCPU0 := procCPU(srv.cmd.Process.Pid), nan
	if store == "redis" {
		redisCPU0 = F(redisCPU(ctx, b.admin))
	}
	start := time.Now()
	err = lg.Run()
	var took time.Duration // until every timer was delivered
	if err == nil && b.cfg.HTTPDelay < httpDrainMax {
		if derr := waitDrained(ctx, url, topic); derr != nil {
			b.errorf("http %s %s run %d: %v", bd.name, store, run+1, derr)
		} else {
			took = time.Since(start)
		}
	}
	srvCPU1 := procCPU(srv.cmd.Process.Pid)
	redisCPU1 := nan
	if store == "redis" {
		redisCPU1 = F(redisCPU(ctx, b.admin))
	}
	if err != nil {
		return HTTPRun{}, fmt.Errorf("bench-api: %v: %s; server: %s", err, errb.String(), srv.out.String())
	}
	var r struct {
		Requests  int     `json:"requests"`
		Errors    int     `json:"errors"`
		PerSecond float64 `json:"requests_per_sec"`
		P50       float64 `json:"p50_ms"`
		P99       float64 `json:"p99_ms"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return HTTPRun{}, fmt.Errorf("bench-api output %q: %w", out.String(), err)
	}
	hr := HTTPRun{PerSecond: F(r.PerSecond), P50: F(r.P50), P99: F(r.P99), Requests: r.Requests, Errors: r.Errors,
		ServerCPU: nan, LoadgenCPU: nan, RedisCPU: nan, DeliveredPerSecond: nan}
	if took > 0 {
		// The warm-up request's timer is delivered too.
		hr.DeliveredPerSecond = F(float64(r.Requests+1-r.Errors) / took.Seconds())
	}
	if n := float64(r.Requests); n > 0 {
		// The warm-up request and the server's idle work are included.
		hr.ServerCPU = F((srvCPU1 - srvCPU0) * 1e6 / n)
		hr.LoadgenCPU = F((lg.ProcessState.UserTime() + lg.ProcessState.SystemTime()).Seconds() * 1e6 / n)
		hr.RedisCPU = (redisCPU1 - redisCPU0) * 1e6 / F(n)
	}
	return hr, nil
}

// waitDrained waits until the server's topic holds no timer (scheduled or
// leased): every timer published was delivered to its target and acked.
func waitDrained(ctx context.Context, url, topic string) error {
	deadline := time.Now().Add(httpDrainMax)
	for {
		n, err := topicPending(ctx, url, topic)
		if err == nil && n == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("topic %s not drained after %s: %d pending, %v", topic, httpDrainMax, n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// topicPending is the topic's scheduled plus leased timers, from GET
// /v1/topics.
func topicPending(ctx context.Context, url, topic string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/topics", nil)
	if err != nil {
		return -1, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1, fmt.Errorf("GET /v1/topics: %s", resp.Status)
	}
	var topics []struct {
		Topic     string `json:"topic"`
		Scheduled int64  `json:"scheduled"`
		Leased    int64  `json:"leased"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&topics); err != nil {
		return -1, err
	}
	for _, t := range topics {
		if t.Topic == topic {
			return t.Scheduled + t.Leased, nil
		}
	}
	return 0, nil // no timer and no dead letter left: not listed
}

// serveEnv is the environment of the server and the load generator: the
// harness's, without ONTIME_* settings that would change what is measured.
func serveEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "ONTIME_") })
}

func waitHealthy(ctx context.Context, url string, srv *child) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !srv.alive() {
			return fmt.Errorf("ontime serve exited: %s", srv.out.String())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("ontime serve not healthy after 30s: %v; %s", err, srv.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
