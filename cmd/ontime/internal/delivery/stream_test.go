package delivery_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/delivery"
	"github.com/ontime-go/ontime/cmd/ontime/internal/store"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
)

// redisOpener opens clients for redis-stream targets and closes them at
// cleanup (registered before the dispatcher's, so it runs after).
func redisOpener(t *testing.T) delivery.RedisOpener {
	var mu sync.Mutex
	var clients []redis.UniversalClient
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range clients {
			_ = c.Close()
		}
	})
	return func(url string) (redis.UniversalClient, error) {
		c, err := store.NewRedisClient(url)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		clients = append(clients, c)
		mu.Unlock()
		return c, nil
	}
}

func streamTopic(url, stream string) config.Topic {
	return config.Topic{
		Retry: config.Retry{
			MinDelay: config.Duration(50 * time.Millisecond), MaxDelay: config.Duration(50 * time.Millisecond), MaxAttempts: -1,
		},
		Target: &config.Target{Type: config.TargetRedisStream, Redis: url, Stream: stream},
	}
}

// waitAttempts waits until the timer has failed at least n times with an
// error containing errText, and checks it is still there: scheduled or
// leased, not a dead letter.
func waitAttempts(t *testing.T, client *ontime.Client, topic, id string, n int, errText string) {
	t.Helper()
	var ti *ontime.TimerInfo
	wait.For(t, 20*time.Second, func() bool {
		var err error
		if ti, err = client.Get(t.Context(), topic, id); err != nil {
			t.Fatalf("the failing timer is gone: %v", err)
		}
		// A leased timer's Attempt is the delivery in progress, whose
		// outcome is not known yet: n failures are certain once a
		// scheduled timer shows n, or a leased one n+1.
		failed := ti.Attempt
		if ti.State == ontime.StateLeased {
			failed--
		}
		return failed >= n && strings.Contains(ti.LastError, errText)
	}, "attempt >= %d and a last error with %q: %s", n, errText, func() string { return fmt.Sprintf("%+v", ti) })
	c, err := client.Count(t.Context(), topic)
	if err != nil || c.Dead != 0 || c.Scheduled+c.Leased != 1 {
		t.Fatalf("count %+v, %v: want the timer still pending, no dead letter", c, err)
	}
}

// TestStreamTargetXADDFails: on the embedded store, a redis-stream target
// whose XADD fails (the stream key holds a string: WRONGTYPE) is a failed
// attempt: the timer is retried with a growing attempt, never dropped, and
// once the key is fixed it lands in the stream and is acked.
func TestStreamTargetXADDFails(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	ctx := context.Background()
	stream := fmt.Sprintf("wrongtype-%d", time.Now().UnixNano())
	if err := rdb.Set(ctx, stream, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Topics: map[string]config.Topic{"events": streamTopic(rs.URL(), stream)}}
	_, client, logs := newDispatcherWith(t, cfg, redisOpener(t))
	if _, err := client.Publish(t.Context(), "events", "payload", ontime.WithID("e1")); err != nil {
		t.Fatal(err)
	}
	waitAttempts(t, client, "events", "e1", 3, "WRONGTYPE")
	if !strings.Contains(logs.String(), `msg="delivery failed" topic=events id=e1 target=redis-stream`) {
		t.Errorf("the failures were not logged:\n%s", logs.String())
	}

	if err := rdb.Del(ctx, stream).Err(); err != nil {
		t.Fatal(err)
	}
	waitCount(t, client, "events", 0)
	msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("XRANGE %s: %v, %v; want one entry", stream, msgs, err)
	}
	v := msgs[0].Values
	if v["id"] != "e1" || v["topic"] != "events" || v["body"] != "payload" || v["content_type"] != "text/plain" {
		t.Errorf("entry %v", v)
	}
	if a, err := strconv.Atoi(fmt.Sprint(v["attempt"])); err != nil || a < 4 {
		t.Errorf("delivered at attempt %v; want 4 or more, after at least 3 failures", v["attempt"])
	}
}

// TestStreamTargetRedisDown: the target's redis-server is stopped; every
// XADD fails, and the timer stays in the embedded store with its attempts
// counted.
func TestStreamTargetRedisDown(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	url := rs.URL()
	rs.Stop()
	cfg := &config.Config{Topics: map[string]config.Topic{"events": streamTopic(url, "down")}}
	_, client, _ := newDispatcherWith(t, cfg, redisOpener(t))
	if _, err := client.Publish(t.Context(), "events", "payload", ontime.WithID("e1")); err != nil {
		t.Fatal(err)
	}
	waitAttempts(t, client, "events", "e1", 2, "XADD down")
}
