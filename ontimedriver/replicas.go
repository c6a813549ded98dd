package ontimedriver

import (
	"context"
	"errors"
	"time"
)

// ReplicaAck asks a store that replicates its writes (Redis with
// replicas) to answer a Schedule only once Replicas replicas have
// acknowledged the write, waiting at most Timeout: without it a timer is
// acknowledged when the primary has it, and a failover right after can
// lose it (asynchronous replication). A driver that keeps no replicas
// ignores it.
type ReplicaAck struct {
	// Replicas is how many replicas must acknowledge; 0 asks for nothing.
	Replicas int
	// Timeout bounds the wait; 0 means the driver's default (ontimeredis:
	// 1 s).
	Timeout time.Duration
}

type replicaAckKey struct{}

// WithReplicaAck returns a context whose Schedule calls wait for ack (see
// ReplicaAck). ontime.WaitReplicas sets it for one publish.
func WithReplicaAck(ctx context.Context, ack ReplicaAck) context.Context {
	return context.WithValue(ctx, replicaAckKey{}, ack)
}

// ReplicaAckFrom returns the ReplicaAck of ctx, if it has one.
func ReplicaAckFrom(ctx context.Context) (ReplicaAck, bool) {
	ack, ok := ctx.Value(replicaAckKey{}).(ReplicaAck)
	return ack, ok
}

// ErrNotReplicated is returned (wrapped) by a Schedule that asked for a
// ReplicaAck when fewer replicas acknowledged the write within the
// timeout. The timers were written on the primary (a retry with the same
// ids does not duplicate them), but a failover may still lose them.
var ErrNotReplicated = errors.New("ontime: written, but fewer replicas acknowledged it than asked for")
