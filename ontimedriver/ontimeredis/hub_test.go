package ontimeredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// TestHubNotHeldAcrossTheNetwork: the wake-up hub's lock is never held
// across a network call. Redis is reached through a proxy; the pub/sub
// connection is lost while the link does not answer, so go-redis sits
// redialling it (a dial whose handshake gets no reply, with no read
// timeout: as long as the link stays down). Meanwhile another topic's
// cancel returns at once (its UNSUBSCRIBE is queued), and a Subscribe
// honours its context. The hub used to send SUBSCRIBE and UNSUBSCRIBE
// under its lock, so both waited for the link: a worker stopping its
// topics took up to a second per topic, and every subscriber waited
// behind one stuck command whatever its context said.
func TestHubNotHeldAcrossTheNetwork(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := redistest.StartServer(t)
	px := redistest.StartProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr, ReadTimeout: -1, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	// Cleanups run last first: the link comes back before the driver
	// closes (go-redis closes the pub/sub connection under the lock its
	// stuck dial holds).
	t.Cleanup(px.Heal)

	_, cancelA, err := d.Subscribe(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	before := px.Accepted()
	px.Partition()
	px.Reset()
	wait.For(t, 10*time.Second, func() bool { return px.Accepted() > before }, "go-redis to redial the pub/sub connection")

	cancelled := make(chan struct{})
	go func() {
		cancelA()
		close(cancelled)
	}()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("a topic's cancel waited for the network (10s, and the link is still down)")
	}

	sctx, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	subscribed := make(chan error, 1)
	go func() {
		_, cancel, err := d.Subscribe(sctx, "b")
		if err == nil {
			cancel()
		}
		subscribed <- err
	}()
	select {
	case err := <-subscribed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Subscribe with a 200ms context while the link is down: %v, want the context's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Subscribe ignored its 200ms context: it waited for the network (10s, and the link is still down)")
	}
}
