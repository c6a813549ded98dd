//go:build linux

package chaos

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
)

// TestGarbageInNativeKeys writes two bad timers straight into the native
// Redis keys while good timers flow through a running worker: a record with
// no ontime header at all (the claim script dead-letters it) and a
// well-formed record whose envelope does not decode (the worker
// dead-letters it). Each must land in the dead letters exactly once with
// reason "undecodable", never reach the handler and never be retried, and
// every good timer must still be delivered. (The library conformance suite,
// ontimedriver/drivertest, covers the same through the driver API; this
// one writes the raw keys.)
func TestGarbageInNativeKeys(t *testing.T) {
	ctx := t.Context()
	srv := redistest.StartServer(t)
	rdb := srv.NewClient(t)
	prefix := redistest.Prefix(t)
	const topic = "garbage"
	client, _ := newStoreClient(t, rdb, prefix, nil)

	var mu sync.Mutex
	got := map[string]int{}
	w := ontime.NewWorker(client, nil)
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
	// The native layout: {prefix}{topic}:due (score = due ms) and
	// {prefix}{topic}:msg (id -> "<attempt>,<token>,<dueMs>,<errLen>:<err><envelope>").
	due := time.Now().Add(200 * time.Millisecond).UnixMilli()
	dueKey, msgKey := prefix+"{"+topic+"}:due", prefix+"{"+topic+"}:msg"
	bad := map[string]string{
		"no-header":    "this is not an ontime record",
		"bad-envelope": "0,," + strconv.FormatInt(due, 10) + ",0:" + "\x00garbage, not a BinaryMessageFormatV1 envelope",
	}
	for id, rec := range bad {
		if err := rdb.HSet(ctx, msgKey, id, rec).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZAdd(ctx, dueKey, redis.Z{Score: float64(due), Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}

	waitEmpty(t, client, topic, 30*time.Second)
	redistest.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= good
	}, "all good timers delivered")
	time.Sleep(300 * time.Millisecond) // a retry, if any, would show by now

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
	}
	sort.Strings(ids)
	if fmt.Sprint(ids) != "[bad-envelope no-header]" {
		t.Errorf("dead letters %v, want exactly [bad-envelope no-header]", ids)
	}
	n, err := client.Count(ctx, topic)
	if err != nil || n.Dead != 2 || n.Scheduled != 0 || n.Leased != 0 {
		t.Errorf("Count = %+v, %v; want 2 dead and nothing else", n, err)
	}
	t.Logf("good=%d delivered, garbage=%d dead-lettered as undecodable: %v", len(got), len(dl.Dead), ids)
}
