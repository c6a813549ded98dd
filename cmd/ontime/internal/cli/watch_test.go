package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/cmd/ontime/internal/store"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
)

// TestWatchRedisJSON: `ontime watch --redis URL --json` prints each timer as
// the event JSON a server's stream carries (the Event schema of the OpenAPI
// document), not as a watch line, and acks it.
func TestWatchRedisJSON(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	spec, err := apitest.Load(server.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("watchjson%d:", time.Now().UnixNano())
	const topic = "wj"

	var stdout, stderr apitest.SyncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, []string{"watch", topic, "--redis", rs.URL(), "--redis-prefix", prefix, "--json"},
			strings.NewReader(""), &stdout, &stderr, func(string) (string, bool) { return "", false })
	}()

	st, err := store.OpenRedis(store.RedisOptions{URL: rs.URL(), Prefix: prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	client, err := ontime.NewClient(st.Driver, nil)
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(300 * time.Millisecond).UTC().Truncate(time.Millisecond)
	if _, err := client.Publish(t.Context(), topic, map[string]int{"n": 7}, ontime.WithID("j1"), ontime.At(due),
		ontime.WithHeaders(map[string]string{"k": "v"}), ontime.WithCorrelationID("corr-1")); err != nil {
		t.Fatal(err)
	}

	wait.For(t, 15*time.Second, func() bool { return strings.Contains(stdout.String(), "\n") },
		"watch to print a line; stderr:\n%s", func() string { return stderr.String() })
	line := strings.TrimSuffix(stdout.String(), "\n")
	if err := spec.CheckSchema("Event", []byte(line)); err != nil {
		t.Errorf("line %q: %v", line, err)
	}
	var ev wire.Event
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("watch --redis --json printed %q, not JSON: %v", line, err)
	}
	if ev.ID != "j1" || ev.Topic != topic || !ev.DueAt.Equal(due) || ev.Attempt != 1 || ev.Headers["k"] != "v" ||
		ev.CorrelationID != "corr-1" || ev.ContentType != "application/json" || string(ev.Body) != `{"n":7}` {
		t.Errorf("event %s", line)
	}
	// Acked once printed.
	var n ontime.Counts
	wait.For(t, 15*time.Second, func() bool {
		var err error
		if n, err = client.Count(t.Context(), topic); err != nil {
			t.Fatal(err)
		}
		return n.Scheduled+n.Leased == 0
	}, "the timer acked: %s", func() string { return fmt.Sprintf("%+v", n) })
	cancel()
	select {
	case code := <-exit:
		if code != ExitOK {
			t.Errorf("watch exited %d; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch did not stop after its context ended")
	}
}
