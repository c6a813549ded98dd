//go:build linux

package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
)

// TestGarbageInNativeKeys writes two bad timers straight into the native
// Redis keys while good timers flow through a running worker: a record with
// no ontime header at all (the claim script dead-letters it), and a record
// with a valid header whose envelope starts with the BinaryMessageFormatV1
// magic but does not decode (the script hands it to the worker, whose
// envelope decoder fails, and the worker dead-letters it). Each must land
// in the dead letters exactly once with reason "undecodable", through the
// path named above (told apart by the error text), with its bytes kept;
// neither may reach the handler or be retried, and every good timer must
// still be delivered. (The library conformance suite, ontimedriver/drivertest,
// covers the same through the driver API; this one writes the raw keys.)
func TestGarbageInNativeKeys(t *testing.T) {
	ctx := t.Context()
	srv := redistest.StartServer(t)
	rdb := readmeClient(t, srv.Addr)
	prefix := redistest.Prefix(t)
	const topic = "garbage"
	client, _ := newStoreClient(t, rdb, prefix, nil)

	var mu sync.Mutex
	got := map[string]int{}
	var wlog syncBuffer
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: slog.New(slog.NewTextHandler(&wlog, nil))})
	if err := ontime.Handle(w, topic, func(_ context.Context, m *ontime.Message[[]byte]) error {
		mu.Lock()
		got[m.ID]++
		mu.Unlock()
		return nil
	}, &ontime.TopicOptions{Lease: time.Second, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(context.WithoutCancel(ctx)) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	const good = 300
	timers := make([]ontime.Timer, good)
	for i := range timers {
		timers[i] = ontime.Timer{ID: fmt.Sprintf("g%03d", i), Body: []byte("ok"), Delay: time.Duration(i) * 3 * time.Millisecond}
	}
	if _, err := client.PublishBatch(ctx, topic, timers); err != nil {
		t.Fatal(err)
	}
	// The native layout (ontimedriver/ontimeredis/lua/common.lua):
	// {prefix}{topic}:due (score = due ms) and {prefix}{topic}:msg
	// (id -> "<attempt>,<dueMs>,<errLen>:<err><envelope>").
	due := time.Now().Add(200 * time.Millisecond).UnixMilli()
	dueKey, msgKey := prefix+"{"+topic+"}:due", prefix+"{"+topic+"}:msg"
	// The envelope: the BinaryMessageFormatV1 magic and version 1, then a
	// headers_start offset far past the end of the buffer.
	garbageEnv := "\x89BIN\r\n\x1a\n" + "\x00\x01" + "\xff\xff\xff\xf0" + "\x00\x00\x00\x12" + "garbage"
	bad := map[string]struct {
		rec     string // the stored record
		payload string // what the dead letter must keep
		errText string // in its error: which path dead-lettered it
	}{
		"no-header": {
			rec: "this is not an ontime record", payload: "this is not an ontime record",
			errText: "no well-formed ontime header",
		},
		"bad-envelope": {
			rec: "0," + strconv.FormatInt(due, 10) + ",0:" + garbageEnv, payload: garbageEnv,
			errText: "header block out of range",
		},
	}
	for id, b := range bad {
		rec := b.rec
		if err := rdb.HSet(ctx, msgKey, id, rec).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZAdd(ctx, dueKey, redis.Z{Score: float64(due), Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}

	waitEmpty(t, client, topic, 30*time.Second)
	wait.For(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= good
	}, "all good timers delivered")
	// No sleep for a retry to show: waitEmpty saw no timer scheduled or
	// leased, and a retry of a bad timer would be one; a handler call is
	// counted before its timer is settled.

	mu.Lock()
	defer mu.Unlock()
	for id := range bad {
		if got[id] != 0 {
			t.Errorf("%s reached the handler %d times", id, got[id])
		}
	}
	for _, tm := range timers {
		if got[tm.ID] == 0 {
			t.Errorf("good timer %s was not delivered", tm.ID)
		}
	}
	dl, err := client.DeadLetters(ctx, topic, ontime.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range dl.Dead {
		ids = append(ids, d.ID)
		if d.Reason != "undecodable" {
			t.Errorf("dead letter %s: reason %q, want undecodable (error %q)", d.ID, d.Reason, d.LastError)
		}
		b, ok := bad[d.ID]
		if !ok {
			continue
		}
		if !strings.Contains(d.LastError, b.errText) {
			t.Errorf("dead letter %s: error %q, want one that contains %q", d.ID, d.LastError, b.errText)
		}
		if string(d.Body) != b.payload || d.DecodeError == "" {
			t.Errorf("dead letter %s keeps %q (decode error %q), want the stored bytes %q, which do not decode", d.ID, d.Body, d.DecodeError, b.payload)
		}
	}
	sort.Strings(ids)
	if fmt.Sprint(ids) != "[bad-envelope no-header]" {
		t.Errorf("dead letters %v, want exactly [bad-envelope no-header]", ids)
	}
	// The worker's decode path ran once, for the bad envelope only (the
	// claim script handled the record without a header).
	for id, want := range map[string]int{"bad-envelope": 1, "no-header": 0} {
		n := 0
		for _, line := range strings.Split(wlog.String(), "\n") {
			if strings.Contains(line, "stored envelope does not decode") && strings.Contains(line, " id="+id+" ") {
				n++
			}
		}
		if n != want {
			t.Errorf("the worker logged %d times that %s does not decode, want %d:\n%s", n, id, want, wlog.String())
		}
	}
	n, err := client.Count(ctx, topic)
	if err != nil || n.Dead != 2 || n.Scheduled != 0 || n.Leased != 0 {
		t.Errorf("Count = %+v, %v; want 2 dead and nothing else", n, err)
	}
	t.Logf("good=%d delivered, garbage=%d dead-lettered as undecodable: %v", len(got), len(dl.Dead), ids)
}
