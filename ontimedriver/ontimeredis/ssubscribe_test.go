package ontimeredis_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// TestShardedPubSubCluster: on a Cluster of 3 masters + 3 replicas (node
// timeout 2 s), wake-ups travel by sharded pub/sub, and follow a failover.
//
//   - A topic's subscriber and a pattern subscriber hold shard channels on
//     the master of their slots (PUBSUB SHARDCHANNELS there lists them;
//     PUBSUB CHANNELS and NUMPAT on every node list nothing of ours), and
//     a schedule wakes both.
//   - The master of the topic's slot (also the master of the topic index's
//     slot, where the pattern subscribers listen) is SIGKILLed. Within
//     about a second of its replica's promotion both subscriptions are on
//     the promoted replica (PUBSUB SHARDNUMSUB there), a schedule wakes
//     both subscribers again, and a timer published for now + 300 ms is
//     delivered on time by an idle worker (Handle) and an idle pattern
//     worker (HandleTopics), both polling every 30 s: only the wake-up can
//     bring it that soon.
func TestShardedPubSubCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.StartCluster(t, 3, redistest.WithReplicas(3), redistest.NodeTimeout(2*time.Second))
	prefix := redistest.Prefix(t)
	open := func() *ontimeredis.Driver {
		d, err := ontimeredis.New(cluster.NewClient(t), &ontimeredis.Options{Prefix: prefix, Logger: quiet, ClusterTopicIndex: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	rc := cluster.NewClient(t)
	masterOf := func(key string) string {
		cl, err := rc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return cl.Options().Addr
	}
	topicsWake := prefix + "{topics}:wake"
	victim := masterOf(topicsWake)
	// Topics whose slots the victim owns: one served by Handle, one by a
	// pattern worker, and one for the subscribers below.
	onVictim := func(kind string) string {
		for i := 0; ; i++ {
			if topic := fmt.Sprintf("ssub.%s.%d", kind, i); masterOf(prefix+"{"+topic+"}:wake") == victim {
				return topic
			}
		}
	}
	handled, patterned, watched := onVictim("h"), onVictim("p"), onVictim("w")
	watchedWake := prefix + "{" + watched + "}:wake"
	vi := slices.IndexFunc(cluster.Servers, func(s *redistest.Server) bool { return s.Addr == victim })
	master, replica := cluster.Servers[vi], cluster.Replicas[vi]
	mc, repc := master.NewClient(t), replica.NewClient(t)

	d := open()
	wakes, cancel, err := d.Subscribe(ctx, watched)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	twakes, tcancel, err := d.SubscribeTopics(ctx, "ssub.w.*")
	if err != nil {
		t.Fatal(err)
	}
	defer tcancel()

	// The sharded path: shard channels on the owning master, no classic
	// channel or pattern anywhere.
	shardChannels, err := mc.Do(ctx, "PUBSUB", "SHARDCHANNELS", prefix+"*").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{watchedWake, topicsWake} {
		if !slices.Contains(shardChannels, ch) {
			t.Errorf("PUBSUB SHARDCHANNELS on the owning master = %q, want %q in it", shardChannels, ch)
		}
	}
	for _, n := range cluster.Nodes() {
		c := n.NewClient(t)
		if chans, err := c.PubSubChannels(ctx, prefix+"*").Result(); err != nil || len(chans) > 0 {
			t.Errorf("PUBSUB CHANNELS on %s = %q, %v: want no classic channel", n.Addr, chans, err)
		}
		if np, err := c.PubSubNumPat(ctx).Result(); err != nil || np > 0 {
			t.Errorf("PUBSUB NUMPAT on %s = %d, %v: want no pattern", n.Addr, np, err)
		}
	}

	pub := open()
	// A schedule on a topic the pattern does not match wakes nobody; one
	// on the watched topic wakes both subscribers.
	// (The publisher's first call after the failover may still go to the
	// dead master: it fails, and the driver reloads the slot map.)
	schedule := func(topic string, at time.Time) {
		t.Helper()
		var err error
		wait.For(t, 10*time.Second, func() bool {
			_, err = pub.Schedule(ctx, topic, []ontimedriver.NewTimer{{ID: fmt.Sprint(at.UnixNano()), At: at, Payload: []byte("p")}}, ontimedriver.Upsert)
			return err == nil
		}, "a schedule on %s (%v)", topic, func() string { return fmt.Sprint(err) })
	}
	// expectWakes schedules a timer on the watched topic earlier than its
	// head, and wants a wake-up with its due time on both subscribers.
	// Subscribe's buffer holds one wake-up, and a zero one ("look
	// again", sent when a subscription is lost and when it is back)
	// stands for any that comes after it: when one arrived instead, it
	// tries again with an earlier timer. It reports whether the pattern
	// subscriber was told to look again meanwhile.
	head := time.Now().Add(2 * time.Hour)
	expectWakes := func(what string) (lookAgain bool) {
		t.Helper()
		var want int64
		for attempt := 0; ; attempt++ {
			head = head.Add(-time.Minute)
			want = head.UnixMilli()
			schedule(watched, time.UnixMilli(want))
			if waitWake(wakes, want, 3*time.Second) {
				break
			}
			if attempt == 4 {
				t.Fatalf("%s: no wake-up at %d ms on Subscribe(%q)", what, want, watched)
			}
		}
		timeout := time.After(10 * time.Second)
		for got := false; !got; {
			select {
			case w := <-twakes:
				if w.Topic != "" && w.Topic != watched {
					t.Errorf("%s: SubscribeTopics(\"ssub.w.*\") woke for %q", what, w.Topic)
				}
				lookAgain = lookAgain || w.Topic == ""
				got = w.Topic == watched && w.Due.UnixMilli() == want
			case <-timeout:
				t.Fatalf("%s: no wake-up of %q at %d ms on SubscribeTopics", what, watched, want)
			}
		}
		return lookAgain
	}
	schedule("other.1", time.UnixMilli(time.Now().Add(time.Hour).UnixMilli()))
	expectWakes("before the kill")

	// Idle workers, polling every 30 s.
	wd := open()
	wc, err := ontime.NewClient(wd, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	type delivery struct {
		id string
		at time.Time
	}
	got := make(chan delivery, 16)
	record := func(_ context.Context, m *ontime.Message[string]) error {
		got <- delivery{m.ID, time.Now()}
		return nil
	}
	w := ontime.NewWorker(wc, &ontime.WorkerConfig{Logger: quiet, ShutdownTimeout: time.Second})
	opts := &ontime.TopicOptions{PollInterval: 30 * time.Second}
	if err := ontime.Handle(w, handled, record, opts); err != nil {
		t.Fatal(err)
	}
	if err := ontime.HandleTopics(w, "ssub.p.*", record, opts); err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()
	defer func() {
		stopWorker()
		if err := <-werr; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	pc, err := ontime.NewClient(pub, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// deliver publishes a timer on each worked topic and waits for both;
	// it returns how late the later one was.
	deliver := func(what string, in time.Duration) time.Duration {
		t.Helper()
		due := time.Now().Add(in)
		want := map[string]string{} // id → topic
		for _, topic := range []string{handled, patterned} {
			var id string
			var err error
			wait.For(t, 10*time.Second, func() bool {
				id, err = pc.Publish(ctx, topic, "x", ontime.At(due))
				return err == nil
			}, "%s: a publish on %s (%v)", what, topic, func() string { return fmt.Sprint(err) })
			want[id] = topic
		}
		var late time.Duration
		timeout := time.After(15 * time.Second)
		for len(want) > 0 {
			select {
			case dl := <-got:
				if _, ok := want[dl.id]; ok {
					delete(want, dl.id)
					late = max(late, dl.at.Sub(due))
				}
			case <-timeout:
				t.Fatalf("%s: not delivered within 15 s (the workers poll every 30 s): %v (id → topic; %s is served by Handle, %s by HandleTopics)", what, want, handled, patterned)
			}
		}
		return late
	}
	if late := deliver("before the kill", 300*time.Millisecond); late > 2*time.Second {
		t.Errorf("before the kill: delivered %v late", late)
	}

	killed := time.Now()
	master.Kill()
	wait.For(t, 60*time.Second, func() bool {
		role, err := repc.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	}, "the replica of the killed master promoted")
	promoted := time.Now()
	// The watched topic's channel (Subscribe), the handled topic's (the
	// worker), and the topic-wake channel twice (SubscribeTopics, the
	// pattern worker).
	numsub := func(ch string) int64 {
		a, err := repc.Do(ctx, "PUBSUB", "SHARDNUMSUB", ch).Slice()
		if err != nil || len(a) != 2 {
			return 0
		}
		n, _ := a[1].(int64)
		return n
	}
	wait.For(t, 30*time.Second, func() bool {
		return numsub(watchedWake) >= 1 && numsub(prefix+"{"+handled+"}:wake") >= 1 && numsub(topicsWake) >= 2
	}, "the subscriptions on the promoted replica")
	resub := time.Since(promoted)
	t.Logf("promoted %v after the kill; subscriptions on the promoted replica %v after the promotion",
		promoted.Sub(killed).Round(time.Millisecond), resub.Round(time.Millisecond))
	// About a second; more only on a very busy machine.
	if resub > 3*time.Second {
		t.Errorf("subscriptions back %v after the promotion, want about 1 s", resub)
	}

	if !expectWakes("after the failover") {
		t.Error("SubscribeTopics: no empty wake-up (look again) around the failover")
	}
	// The workers are healthy again once a timer due now is delivered
	// (their outage back-off may have delivered it); then they sleep for
	// their poll interval, and only a wake-up delivers the next in time.
	deliver("after the failover, due now", 0)
	late := deliver("after the failover, due in 300 ms", 300*time.Millisecond)
	t.Logf("after the failover: a timer published for now + 300 ms delivered %v late", late.Round(time.Millisecond))
	if late > 2*time.Second {
		t.Errorf("after the failover: delivered %v late: not woken (the workers poll every 30 s)", late)
	}
}

// TestClassicPubSubCluster: with Options.ClassicPubSub a driver on a
// Cluster subscribes with SUBSCRIBE (no shard channel), and wake-ups
// arrive.
func TestClassicPubSubCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.StartCluster(t, 3)
	prefix := redistest.Prefix(t)
	d, err := ontimeredis.New(cluster.NewClient(t), &ontimeredis.Options{Prefix: prefix, Logger: quiet, ClassicPubSub: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	wakes, cancel, err := d.Subscribe(ctx, "classic")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	var classic []string
	for _, n := range cluster.Nodes() {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		chans, _ := c.PubSubChannels(ctx, prefix+"*").Result()
		shard, _ := c.Do(ctx, "PUBSUB", "SHARDCHANNELS", prefix+"*").StringSlice()
		_ = c.Close()
		classic = append(classic, chans...)
		if len(shard) > 0 {
			t.Errorf("PUBSUB SHARDCHANNELS on %s = %q with ClassicPubSub", n.Addr, shard)
		}
	}
	if !slices.Equal(classic, []string{prefix + "{classic}:wake"}) {
		t.Errorf("classic channels = %q, want the topic's wake channel on one node", classic)
	}
	scheduleAndWake(t, d, "classic", wakes)
}

// TestShardedPubSubSlotMove: when the slot of a subscribed wake channel
// moves to another master (CLUSTER SETSLOT ... NODE, as a resharding ends),
// Redis drops the subscription on the old master (sunsubscribe); the
// driver subscribes again on the new one, and a schedule wakes the
// subscriber.
func TestShardedPubSubSlotMove(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.StartCluster(t, 3)
	prefix := redistest.Prefix(t)
	d, err := ontimeredis.New(cluster.NewClient(t), &ontimeredis.Options{Prefix: prefix, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	const topic = "moving"
	channel := prefix + "{" + topic + "}:wake"
	rc := cluster.NewClient(t)
	slot, err := rc.ClusterKeySlot(ctx, channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The hub sends one SSUBSCRIBE per slot by its own slot hash: Redis's.
	for _, k := range []string{channel, prefix + "{topics}:wake", "no-tag", "{}:x", "a{b}c{d}", "{x#1.2}:wake", "x{", "{{a}}"} {
		want, err := rc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := ontimeredis.SlotOf(k); int64(got) != want {
			t.Errorf("slot of %q = %d, Redis says %d", k, got, want)
		}
	}
	from, err := rc.MasterForKey(ctx, channel)
	if err != nil {
		t.Fatal(err)
	}
	var src, dst *redistest.Server
	var others []*redistest.Server
	for _, s := range cluster.Servers {
		switch {
		case s.Addr == from.Options().Addr:
			src = s
		case dst == nil:
			dst = s
		default:
			others = append(others, s)
		}
	}
	dc := dst.NewClient(t)
	dstID, err := dc.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	wakes, cancel, err := d.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	numsub := func(c *redis.Client) int64 {
		a, err := c.Do(ctx, "PUBSUB", "SHARDNUMSUB", channel).Slice()
		if err != nil || len(a) != 2 {
			return 0
		}
		n, _ := a[1].(int64)
		return n
	}
	if n := numsub(src.NewClient(t)); n != 1 {
		t.Fatalf("SHARDNUMSUB on the slot's master = %d, want 1", n)
	}
	// The slot holds no key (a fresh prefix): it moves without MIGRATE.
	for _, s := range append([]*redistest.Server{dst, src}, others...) {
		if err := s.NewClient(t).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err(); err != nil {
			t.Fatalf("CLUSTER SETSLOT on %s: %v", s.Addr, err)
		}
	}
	moved := time.Now()
	wait.For(t, 15*time.Second, func() bool { return numsub(dc) == 1 }, "the subscription on the slot's new master")
	t.Logf("subscribed on the new master %v after the move", time.Since(moved).Round(time.Millisecond))
	// A zero wake-up (sent when the subscription was lost and when it was
	// back) may stand for the next one in Subscribe's buffer: then try
	// again with an earlier timer.
	head := time.Now().Add(2 * time.Hour)
	for attempt := 0; ; attempt++ {
		head = head.Add(-time.Minute)
		want := head.UnixMilli()
		var serr error
		wait.For(t, 10*time.Second, func() bool {
			_, serr = d.Schedule(ctx, topic, []ontimedriver.NewTimer{{ID: fmt.Sprint(attempt), At: time.UnixMilli(want), Payload: []byte("p")}}, ontimedriver.Upsert)
			return serr == nil
		}, "a schedule after the move (%v)", func() string { return fmt.Sprint(serr) })
		if waitWake(wakes, want, 3*time.Second) {
			return
		}
		if attempt == 4 {
			t.Fatal("no wake-up after the slot moved")
		}
	}
}

// scheduleAndWake schedules a timer an hour ahead on topic (empty) and
// checks the next wake-up on wakes is its due time (a zero one would say
// the connection was rebuilt).
func scheduleAndWake(t *testing.T, d *ontimeredis.Driver, topic string, wakes <-chan time.Time) {
	t.Helper()
	at := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	if _, err := d.Schedule(t.Context(), topic, []ontimedriver.NewTimer{{ID: "a", At: at, Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-wakes:
		if !w.Equal(at) {
			t.Errorf("wake-up at %v, want %v", w, at)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up")
	}
}

// waitWake reads wake-ups until one at want (ms), at most timeout.
func waitWake(wakes <-chan time.Time, want int64, timeout time.Duration) bool {
	t := time.After(timeout)
	for {
		select {
		case w := <-wakes:
			if w.UnixMilli() == want {
				return true
			}
		case <-t:
			return false
		}
	}
}

// TestShardedPubSubUnsubscribe: cancelled subscriptions of several slots
// of one master leave that master (SHARDNUMSUB 0), while a subscription
// that stays on the same connection is not disturbed (no zero wake-up,
// which a rebuilt connection would send) and still wakes.
func TestShardedPubSubUnsubscribe(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.StartCluster(t, 3)
	prefix := redistest.Prefix(t)
	d, err := ontimeredis.New(cluster.NewClient(t), &ontimeredis.Options{Prefix: prefix, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	rc := cluster.NewClient(t)
	wakeOf := func(topic string) string { return prefix + "{" + topic + "}:wake" }
	master := func(topic string) *redis.Client {
		cl, err := rc.MasterForKey(ctx, wakeOf(topic))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	// Five topics on the master of "stay".
	mc := master("stay")
	var gone []string
	for i := 0; len(gone) < 4; i++ {
		if topic := fmt.Sprintf("gone.%d", i); master(topic).Options().Addr == mc.Options().Addr {
			gone = append(gone, topic)
		}
	}
	stay, cancelStay, err := d.Subscribe(ctx, "stay")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelStay()
	var cancels []func()
	for _, topic := range gone {
		_, c, err := d.Subscribe(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, c)
	}
	shardChannels := func() []string {
		chans, _ := mc.Do(ctx, "PUBSUB", "SHARDCHANNELS", prefix+"*").StringSlice()
		slices.Sort(chans)
		return chans
	}
	if got := shardChannels(); len(got) != 5 {
		t.Fatalf("SHARDCHANNELS = %q, want 5", got)
	}
	for _, c := range cancels {
		c()
	}
	wait.For(t, 10*time.Second, func() bool { return slices.Equal(shardChannels(), []string{wakeOf("stay")}) },
		"only %s subscribed (%v)", wakeOf("stay"), func() string { return fmt.Sprint(shardChannels()) })
	scheduleAndWake(t, d, "stay", stay)
}
