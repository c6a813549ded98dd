package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/delivery"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// FuzzCreateTimer sends arbitrary bodies to POST /v1/topics/{topic}/timers
// and to the batch endpoint: every answer is a success or a 4xx with a JSON
// error that has a code, never a 5xx or a panic, and a timer is stored only
// when the answer says so (a refused batch stores none of its timers).
func FuzzCreateTimer(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","body":"x","delay":"90s"}`,
		`{"body":{"n":1},"at":"2030-01-01T00:00:00Z","headers":{"k":"v"},"correlation_id":"c","if_absent":true}`,
		`{"body_base64":"AP8=","delay":"1s"}`,
		`{"delay":"-1s"}`, `{"delay":"1s","at":"2030-01-01T00:00:00Z"}`, `{"at":"2030-01-01T00:00:00"}`,
		`{"id":"","delay":"1s"}`, `{"id":"a\u0001","delay":"1s"}`, `{"unknown":1,"delay":"1s"}`,
		`[{"id":"b","delay":"1h"},{"delay":"x"}]`, `{`, ``, `null`, `{"delay":"1s"} trailing`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	drv, err := ontimebolt.Open(filepath.Join(f.TempDir(), "fuzz.db"), &ontimebolt.Options{Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = drv.Close() })
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	cfg := &config.Config{}
	cfg.Fill()
	if err := cfg.Validate(); err != nil {
		f.Fatal(err)
	}
	disp, err := delivery.New(delivery.Options{Client: client, Config: cfg, Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	done := make(chan struct{})
	f.Cleanup(func() { close(done) })
	api := server.New(server.Options{Client: client, Dispatcher: disp.API(), StoreKind: "embedded", MaxBodyBytes: 64 << 10, Logger: log, Done: done})
	ctx := context.Background()
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body []byte, batch bool) {
		topic := fmt.Sprintf("fuzz-%d", n.Add(1)) // a fresh topic per input
		path := "/v1/topics/" + topic + "/timers"
		if batch {
			path += ":batch"
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		after, err := client.Count(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		grew := after.Scheduled+after.Leased > 0
		switch {
		case rec.Code >= 500:
			t.Fatalf("%s %q: %d %s", path, body, rec.Code, rec.Body)
		case rec.Code >= 400:
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%s %q: %d with body %q, want a JSON error with code and message", path, body, rec.Code, rec.Body)
			}
			if grew {
				t.Fatalf("%s %q: %d but a timer was stored", path, body, rec.Code)
			}
		case rec.Code == http.StatusCreated && !batch:
			var c struct {
				ID    string    `json:"id"`
				DueAt time.Time `json:"due_at"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil || c.ID == "" {
				t.Fatalf("%s %q: 201 with body %q", path, body, rec.Body)
			}
			if _, err := client.Get(ctx, topic, c.ID); err != nil {
				t.Fatalf("%s %q: 201 for %q but Get: %v", path, body, c.ID, err)
			}
		}
	})
}
