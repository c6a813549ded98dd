package ontimeredis

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
)

// TestTopicOfKey: the topic of a script's first key, in both layouts, for
// a sharded key group, and none for the index and the registry.
func TestTopicOfKey(t *testing.T) {
	t.Parallel()
	open := func(o *Options) *Driver {
		rdb := redis.NewClient(&redis.Options{})
		d, err := New(rdb, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close(); _ = rdb.Close() })
		return d
	}
	native, compat := open(&Options{Prefix: "p:"}), open(&Options{Layout: Compatible})
	for _, c := range []struct {
		d         *Driver
		key, want string
	}{
		{native, native.keys("orders.eu").due, "orders.eu"},
		{native, native.keys("a:b/c").msg, "a:b/c"},
		{native, "p:{orders#3}:due", "orders"},
		{native, "p:{topics}:next", ""},
		{native, "p:topics", ""},
		{native, "other:{x}:due", ""},
		{compat, compat.keys("jobs").due, "jobs"},
		{compat, compat.keys("jobs").msg, "jobs"},
		{compat, "unrelated", ""},
	} {
		if got := c.d.topicOfKey(c.key); got != c.want {
			t.Errorf("topicOfKey(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}

// TestUnreachable: errors that say the node could not be reached (or the
// Cluster cannot serve the slot) count; Redis's answers and a caller who
// gave up do not.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{context.DeadlineExceeded, true},
		{redis.ErrClosed, false},
		{context.Canceled, false},
		{ontimedriver.ErrClosed, false},
		{errors.New("EOF"), true},
		{redisError("CLUSTERDOWN The cluster is down"), true},
		{redisError("NOPERM no permissions"), false},
		{redisError("ERR wrong number of arguments"), false},
		{nil, false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("unreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// redisError is a reply error as go-redis returns it.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// TestUnreachableScheduleWithWait: a Schedule that waits for replicas
// (evalWait) and cannot reach its node is observed like any other call:
// its topic is listed as unavailable (and on a Cluster the slot map is
// reloaded). It was not, so after a Cluster failover a publisher that
// waits for replicas kept calling the dead master (found by
// internal/chaos's TestFailoverClusterWaitReplicas).
func TestUnreachableScheduleWithWait(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}) // nothing listens there
	d, err := New(rdb, &Options{Prefix: "p:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(); _ = rdb.Close() })
	ctx := ontimedriver.WithReplicaAck(t.Context(), ontimedriver.ReplicaAck{Replicas: 1, Timeout: 100 * time.Millisecond})
	_, err = d.Schedule(ctx, "waits", []ontimedriver.NewTimer{{ID: "a", Delay: time.Hour, Payload: []byte("x")}}, ontimedriver.Upsert)
	if err == nil {
		t.Fatal("Schedule on a closed port succeeded")
	}
	got := d.UnavailableTopics()
	if len(got) != 1 || got[0].Topic != "waits" {
		t.Fatalf("UnavailableTopics() = %+v after a failed Schedule with WAIT, want topic waits (the error: %v)", got, err)
	}
}
