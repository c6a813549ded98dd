package ontimeredis

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Failover on a Redis Cluster.
//
// go-redis's ClusterClient learns that a slot moved to another master
// (a replica promoted after its master died) only from a MOVED or ASK reply,
// or when it reloads the slot map on its own (every ReloadInterval, a
// minute by default). A dead master answers neither: every call on its
// slots fails with "connection refused" (or a timeout) until that reload,
// although the replica serves them within seconds. So the driver asks for
// a reload itself: after a call fails without a reply from Redis, or with
// CLUSTERDOWN, it reloads the map at once and then every reloadEvery while
// such errors keep coming (and for reloadFor after the last one), so the
// first call after the promotion goes to the new master whatever the
// callers' own retry pace. Reloads are cheap (CLUSTER SLOTS on one live
// node) and go-redis runs at most one at a time.

const (
	// reloadEvery is the pace of slot-map reloads during an outage.
	reloadEvery = 200 * time.Millisecond
	// reloadFor is how long reloads go on after the last failed call.
	reloadFor = 5 * time.Second
	// faultTTL is how long a topic whose calls failed stays listed by
	// UnavailableTopics without a new failure or a success.
	faultTTL = 10 * time.Second
)

var _ ontimedriver.TopicFaults = (*Driver)(nil)

// unreachable reports whether err says the store could not be reached
// (or a Cluster could not serve the slot), rather than being a reply of
// Redis to the command or the caller giving up.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ontimedriver.ErrClosed) || errors.Is(err, redis.ErrClosed) {
		return false
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		return strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN") ||
			strings.HasPrefix(msg, "MASTERDOWN") || strings.HasPrefix(msg, "LOADING")
	}
	return true
}

// reloader reloads a ClusterClient's slot map during an outage.
type reloader struct {
	rc *redis.ClusterClient // nil: not a Cluster
	// after runs after each reload (the hub checks where its sharded
	// subscriptions belong); set before the first call of failed.
	after func()

	mu      sync.Mutex
	last    time.Time // last failed call
	running bool
	stopped bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

func (r *reloader) init(rdb redis.UniversalClient) {
	r.rc, _ = rdb.(*redis.ClusterClient)
	r.stop = make(chan struct{})
}

// failed notes a call that could not reach its node.
func (r *reloader) failed() {
	if r.rc == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = time.Now()
	if r.running || r.stopped {
		return
	}
	r.running = true
	r.wg.Add(1)
	go r.loop()
}

func (r *reloader) loop() {
	defer r.wg.Done()
	t := time.NewTicker(reloadEvery)
	defer t.Stop()
	for {
		r.rc.ReloadState(context.Background())
		if r.after != nil {
			r.after()
		}
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		if time.Since(r.last) > reloadFor {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
}

func (r *reloader) close() {
	r.mu.Lock()
	if !r.stopped {
		r.stopped = true
		close(r.stop)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// faults tracks the topics whose calls fail (see UnavailableTopics).
type faults struct {
	// any is true while m may hold an entry, so that a call that succeeds
	// takes no lock when no topic is faulty (the common case).
	any atomic.Bool
	mu  sync.Mutex
	m   map[string]*ontimedriver.TopicFault
}

func (f *faults) note(topic string, err error) {
	if topic == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.m, topic)
		f.any.Store(len(f.m) > 0)
		return
	}
	f.any.Store(true)
	now := time.Now()
	if f.m == nil {
		f.m = map[string]*ontimedriver.TopicFault{}
	}
	ft := f.m[topic]
	if ft == nil || now.Sub(ft.Last) > faultTTL {
		ft = &ontimedriver.TopicFault{Topic: topic, Since: now}
		f.m[topic] = ft
	}
	ft.Last, ft.Err = now, err.Error()
}

func (f *faults) list() []ontimedriver.TopicFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	out := []ontimedriver.TopicFault{}
	for t, ft := range f.m {
		if now.Sub(ft.Last) > faultTTL {
			delete(f.m, t)
			continue
		}
		out = append(out, *ft)
	}
	f.any.Store(len(f.m) > 0)
	slices.SortFunc(out, func(a, b ontimedriver.TopicFault) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}

// UnavailableTopics lists the topics whose last call failed because Redis
// (on a Cluster: the master of the topic's slot) could not be reached, for
// at most 10 s after the last such failure; a call on the topic that
// succeeds removes it at once. See ontimedriver.TopicFaults.
func (d *Driver) UnavailableTopics() []ontimedriver.TopicFault { return d.faults.list() }

// observe notes the outcome of a call on the keys ks: a failure that did
// not reach Redis starts slot-map reloads (a Cluster) and marks the
// topic unavailable; a success clears it.
func (d *Driver) observe(ks []string, err error) {
	if err != nil && !unreachable(err) {
		return
	}
	if err != nil {
		d.reload.failed()
	} else if !d.faults.any.Load() {
		return
	}
	if len(ks) > 0 {
		d.faults.note(d.topicOfKey(ks[0]), err)
	}
}

// topicOfKey returns the topic a script's first key belongs to, "" for
// keys of no one topic (the index, the registry).
func (d *Driver) topicOfKey(k string) string {
	if d.compat {
		for _, base := range []string{d.opt.TimelineBase + ":", d.opt.PayloadsBase + ":", d.opt.DeadBase + ":"} {
			if t, ok := strings.CutPrefix(k, base); ok {
				return t
			}
		}
		return ""
	}
	rest, ok := strings.CutPrefix(k, d.opt.Prefix+"{")
	if !ok {
		return ""
	}
	t, _, ok := strings.Cut(rest, "}")
	if !ok || t == "topics" {
		return ""
	}
	// A shard of a topic ({topic#i}): topics never hold '#'.
	t, _, _ = strings.Cut(t, "#")
	return t
}
