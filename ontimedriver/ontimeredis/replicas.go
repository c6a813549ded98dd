package ontimeredis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
)

// defaultWaitTimeout is the wait for replicas when none is given.
const defaultWaitTimeout = time.Second

// ack is the replica acknowledgement a Schedule waits for: the context's
// (ontimedriver.WithReplicaAck), else the driver's (Options.WaitReplicas).
func (d *Driver) ack(ctx context.Context) ontimedriver.ReplicaAck {
	a, ok := ontimedriver.ReplicaAckFrom(ctx)
	if !ok {
		a = ontimedriver.ReplicaAck{Replicas: d.opt.WaitReplicas, Timeout: d.opt.WaitTimeout}
	}
	if a.Timeout <= 0 {
		a.Timeout = defaultWaitTimeout
	}
	return a
}

// nodeFor returns the client of the one Redis that holds key: the client
// itself on one Redis (standalone, or Sentinel's failover client), the
// key's master on a Cluster.
func (d *Driver) nodeFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := d.rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("%w: waiting for replicas needs a *redis.Client or a *redis.ClusterClient, not %T", ontimedriver.ErrInvalid, d.rdb)
}

// evalWait is eval followed by WAIT on the same connection (one pipeline
// to the node that holds keys, one round trip): the script's writes are
// acknowledged by ack.Replicas replicas, or the call fails with an error
// wrapping ontimedriver.ErrNotReplicated (the writes stay on the
// primary). WAIT counts the replicas that have the connection's last
// write, so it must follow the script on its connection. The pipeline's
// reply is read within the client's ReadTimeout: ack.Timeout must be
// shorter.
func (d *Driver) evalWait(ctx context.Context, s *script, keys []string, ack ontimedriver.ReplicaAck, args ...any) (any, error) {
	if d.closed.Load() {
		return nil, errClosed
	}
	s = d.script(s)
	res, err := bounded(d, ctx, func(ctx context.Context) (any, error) {
		node, err := d.nodeFor(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		for _, full := range []bool{false, true} {
			pipe := node.Pipeline()
			var ev *redis.Cmd
			if full {
				ev = pipe.Eval(ctx, s.src, keys, args...)
			} else {
				ev = pipe.EvalSha(ctx, s.sha, keys, args...)
			}
			w := pipe.Do(ctx, "WAIT", ack.Replicas, max(ack.Timeout.Milliseconds(), 1)) // 0 would wait for ever
			_, _ = pipe.Exec(ctx)
			if err := ev.Err(); err != nil {
				if !full && redis.HasErrorPrefix(err, "NOSCRIPT") {
					continue
				}
				return nil, err
			}
			if err := w.Err(); err != nil {
				return nil, fmt.Errorf("WAIT after the write (it is on the primary): %w", err)
			}
			if got, _ := w.Int64(); got < int64(ack.Replicas) {
				return nil, fmt.Errorf("%w: %d of %d replicas within %v", ontimedriver.ErrNotReplicated, got, ack.Replicas, ack.Timeout)
			}
			return ev.Val(), nil
		}
		panic("unreachable")
	})
	// As eval does: a call that did not reach the node starts slot-map
	// reloads (a Cluster failover); a write that only missed its replicas
	// reached the node.
	if errors.Is(err, ontimedriver.ErrNotReplicated) {
		d.observe(keys, nil)
	} else {
		d.observe(keys, err)
	}
	if err != nil {
		return nil, fmt.Errorf("ontimeredis: %s: %w", s.name, err)
	}
	return res, nil
}
