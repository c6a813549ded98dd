package dashboard_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/dashboard"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

func get(t *testing.T, url, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestHandler: the page names the API base it was given, every asset is
// served with its type and a strict Content-Security-Policy, an unchanged
// asset answers 304, and unknown paths and other methods are refused.
func TestHandler(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.StripPrefix("/ui", dashboard.Handler("/")))
	defer srv.Close()
	resp, body := get(t, srv.URL+"/ui/", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `<meta name="ontime-api" content="/">`) {
		t.Fatalf("page: %d\n%s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	for name, ctype := range map[string]string{"app.js": "text/javascript", "app.css": "text/css", "favicon.svg": "image/svg+xml"} {
		resp, body := get(t, srv.URL+"/ui/"+name, "")
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || body == "" {
			t.Errorf("%s: %d %q", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		req, _ := http.NewRequest("GET", srv.URL+"/ui/"+name, nil)
		req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
		r2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r2.Body.Close()
		if r2.StatusCode != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", name, r2.StatusCode)
		}
	}
	if resp, _ := get(t, srv.URL+"/ui/nope.js", ""); resp.StatusCode != 404 {
		t.Errorf("unknown asset: %d", resp.StatusCode)
	}
	resp, err := http.Post(srv.URL+"/ui/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

// TestNew: mounted in another server, New serves the page, and the API it
// calls below it, with the given tokens; Activity hooked into the client
// fills the topics' last minute.
func TestNew(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	drv, err := ontimebolt.Open(filepath.Join(t.TempDir(), "ontime.db"), &ontimebolt.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	act := dashboard.NewActivity()
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: log, Hooks: []any{act}})
	if err != nil {
		t.Fatal(err)
	}
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: log})
	done := make(chan struct{})
	ontime.Handle(w, "jobs", func(ctx context.Context, m *ontime.Message[string]) error {
		close(done)
		return nil
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = w.Stop(sctx)
	}()

	mux := http.NewServeMux()
	mux.Handle("/ontime/", http.StripPrefix("/ontime", dashboard.New(client, &dashboard.Options{Tokens: []string{"tok"}, Activity: act, Logger: log})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, body := get(t, srv.URL+"/ontime/", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `content="api/"`) {
		t.Fatalf("page: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := get(t, srv.URL+"/ontime/api/v1/topics", ""); resp.StatusCode != 401 {
		t.Errorf("API without a token: %d, want 401", resp.StatusCode)
	}
	if _, err := client.Publish(ctx, "jobs", "x"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the job was not delivered")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body := get(t, srv.URL+"/ontime/api/v1/topics", "tok")
		if resp.StatusCode != 200 {
			t.Fatalf("topics: %d %s", resp.StatusCode, body)
		}
		if strings.Contains(body, `"topic":"jobs"`) && strings.Contains(body, `"fired":1`) && strings.Contains(body, `"published":1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics: %s, want jobs with one publish and one delivery", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, body := get(t, srv.URL+"/ontime/api/v1/stats", "tok"); resp.StatusCode != 200 || !strings.Contains(body, `"store":"embedded"`) {
		t.Errorf("stats: %d %s", resp.StatusCode, body)
	}
}

// TestDependsOnTheLibraryAlone: embedding the dashboard pulls no package of
// the CLI's module, no Kafka client and no TOML decoder.
func TestDependsOnTheLibraryAlone(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/ontime-go/ontime/dashboard").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages: %q", len(deps), out)
	}
	for _, p := range deps {
		for _, bad := range []string{"github.com/ontime-go/ontime/cmd/", "github.com/twmb/franz-go", "github.com/BurntSushi/toml", "github.com/ontime-go/ontime/kafkadelay", "github.com/prometheus/"} {
			if strings.HasPrefix(p, bad) {
				t.Errorf("the dashboard depends on %s", p)
			}
		}
	}
}
