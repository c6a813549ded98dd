package server_test

import (
	"bytes"
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
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// FuzzCancelTimers sends arbitrary bodies to POST timers:cancel on a topic
// holding timers a, b and c: every answer is a 200 or a 4xx with a JSON
// error that has a code, never a 5xx or a panic; a refused request cancels
// nothing; a 200 answers each id of the list in order, and exactly the
// timers it answers 204 for are gone.
func FuzzCancelTimers(f *testing.F) {
	for _, s := range []string{
		`{"ids":["a"]}`, `{"ids":["a","b","zz","a"]}`, `{"ids":[]}`, `{}`, ``, `null`, `[]`,
		`{"ids":["a",""]}`, `{"ids":[".."]}`, `{"ids":["a"],"all":true}`, `{"ids":"a"}`,
		`{"ids":["a"],"ids":["b"]}`, `{"ids":["\ud800"]}`, `{"ids":["a"]} trailing`, `{"ids":[1]}`,
	} {
		f.Add([]byte(s))
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
	api := server.New(server.Options{Client: client, StoreKind: "embedded", MaxBodyBytes: 64 << 10, Logger: log})
	ctx := f.Context()
	var n atomic.Int64
	seeded := []string{"a", "b", "c"}
	f.Fuzz(func(t *testing.T, body []byte) {
		topic := fmt.Sprintf("fuzz-%d", n.Add(1)) // a fresh topic per input
		var timers []ontime.Timer
		for _, id := range seeded {
			timers = append(timers, ontime.Timer{ID: id, Delay: time.Hour})
		}
		if _, err := client.PublishBatch(ctx, topic, timers); err != nil {
			t.Fatal(err)
		}
		path := "/v1/topics/" + topic + "/timers:cancel"
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		left := map[string]bool{}
		for _, id := range seeded {
			if _, err := client.Get(ctx, topic, id); err == nil {
				left[id] = true
			}
		}
		switch {
		case rec.Code >= 500:
			t.Fatalf("%q: %d %s", body, rec.Code, rec.Body)
		case rec.Code >= 400:
			var e wire.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%q: %d with body %q, want a JSON error with code and message", body, rec.Code, rec.Body)
			}
			if len(left) != len(seeded) {
				t.Fatalf("%q: %d but timers were cancelled (left %v)", body, rec.Code, left)
			}
		case rec.Code == http.StatusOK:
			var in wire.CancelIn
			if err := json.Unmarshal(body, &in); err != nil {
				t.Fatalf("%q: 200 for a body that does not decode: %v", body, err)
			}
			var out wire.CancelResult
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Results) != len(in.IDs) {
				t.Fatalf("%q: 200 with %q, want %d results", body, rec.Body, len(in.IDs))
			}
			gone := map[string]bool{}
			for i, it := range out.Results {
				if it.ID != in.IDs[i] || (it.Status != 204 && it.Status != 404) {
					t.Fatalf("%q: result %d is %+v", body, i, it)
				}
				if it.Status == 204 {
					if gone[it.ID] {
						t.Fatalf("%q: %s cancelled twice", body, it.ID)
					}
					gone[it.ID] = true
				}
			}
			for _, id := range seeded {
				if left[id] == gone[id] {
					t.Fatalf("%q: %s left %v, answered cancelled %v", body, id, left[id], gone[id])
				}
			}
			if out.Cancelled != len(gone) {
				t.Fatalf("%q: cancelled %d, %d answered 204", body, out.Cancelled, len(gone))
			}
		default:
			t.Fatalf("%q: %d %s", body, rec.Code, rec.Body)
		}
	})
}
