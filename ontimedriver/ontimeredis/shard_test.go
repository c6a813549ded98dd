package ontimeredis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

func TestShardCountRules(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // New does not connect
	t.Cleanup(func() { _ = rdb.Close() })
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Shards: map[string]int{
		"orders.*": 4, "orders.eu.*": 2, "orders.eu.big": 8, "*.audit": 3,
	}})
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{
		"orders.eu.big": 8, // exact
		"orders.eu.x":   2, // the pattern with the most literal characters
		"orders.us":     4,
		"x.audit":       3,
		"orders.audit":  4, // "orders.*" has more literal characters than "*.audit"
		"other":         1,
	} {
		if got := d.ShardCount(topic); got != want {
			t.Errorf("ShardCount(%q) = %d, want %d", topic, got, want)
		}
	}
	for name, o := range map[string]ontimeredis.Options{
		"zero":       {Shards: map[string]int{"a": 0}},
		"too many":   {Shards: map[string]int{"a": 1025}},
		"bad topic":  {Shards: map[string]int{"a b": 2}},
		"bad glob":   {Shards: map[string]int{"a b*": 2}},
		"compatible": {Layout: ontimeredis.Compatible, Shards: map[string]int{"a": 2}},
	} {
		if _, err := ontimeredis.New(rdb, &o); !errors.Is(err, ontimedriver.ErrInvalid) {
			t.Errorf("%s: New: %v, want ErrInvalid", name, err)
		}
	}
}

// TestShardSlots checks the driver's slot hash against Redis's, and that
// the shards of a topic with as many shards as masters land on distinct
// masters of a Cluster, with the timers spread evenly.
func TestShardSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := redistest.StartCluster(t, 3)
	rdb := cluster.NewClient(t)
	prefix := redistest.Prefix(t)
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: prefix, Logger: quiet, Shards: map[string]int{"hot": 3, "wide": 7}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	for _, topic := range []string{"hot", "wide"} {
		for _, name := range ontimeredis.ShardNames(d, topic) {
			slot, err := rdb.ClusterKeySlot(ctx, prefix+"{"+name+"}:due").Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(ontimeredis.CRC16(name) % 16384); slot != want {
				t.Errorf("slot of %q: Redis says %d, the driver %d", name, slot, want)
			}
		}
	}
	masters := map[string]string{} // address → shard
	for i, name := range ontimeredis.ShardNames(d, "hot") {
		c, err := rdb.MasterForKey(ctx, prefix+"{"+name+"}:due")
		if err != nil {
			t.Fatal(err)
		}
		addr := c.Options().Addr
		if other, ok := masters[addr]; ok {
			t.Errorf("shards %s and %d of hot on one master %s", other, i, addr)
		}
		masters[addr] = fmt.Sprint(i)
	}
	const n = 3000
	timers := make([]ontimedriver.NewTimer, n)
	for i := range timers {
		timers[i] = ontimedriver.NewTimer{ID: fmt.Sprintf("t%d", i), Delay: time.Hour, Payload: []byte("p")}
	}
	if _, err := d.Schedule(ctx, "hot", timers, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	for i, name := range ontimeredis.ShardNames(d, "hot") {
		got, err := rdb.ZCard(ctx, prefix+"{"+name+"}:due").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got < n/3*9/10 || got > n/3*11/10 {
			t.Errorf("shard %d holds %d of %d timers, want %d ± 10 %%", i, got, n, n/3)
		}
	}
	c, err := d.Count(ctx, "hot")
	if err != nil || c.Scheduled != n {
		t.Errorf("Count(hot) = %+v, %v, want %d scheduled", c, err, n)
	}
	for i := range 30 {
		id := fmt.Sprintf("t%d", i)
		info, err := d.Get(ctx, "hot", id)
		if err != nil || info.ID != id {
			t.Fatalf("Get(%s) = %+v, %v", id, info, err)
		}
	}
}

// TestShardCountChange checks that a topic's shard count cannot change
// under its timers.
func TestShardCountChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	open := func(shards map[string]int) *ontimeredis.Driver {
		return newDriverOn(t, ontimeredis.Options{Prefix: prefix, Logger: quiet, Shards: shards})
	}
	one := []ontimedriver.NewTimer{{ID: "x", Payload: []byte("p")}}
	d3 := open(map[string]int{"t": 3, "u": 3})
	if _, err := d3.Schedule(ctx, "t", one, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	d2 := open(map[string]int{"t": 2})
	if _, err := d2.Schedule(ctx, "t", one, ontimedriver.Upsert); !errors.Is(err, ontimedriver.ErrInvalid) || !strings.Contains(err.Error(), "stored in 3 shards") {
		t.Errorf("schedule with 2 shards of a topic in 3: %v", err)
	}
	if _, err := d2.Claim(ctx, "t", 10, time.Minute); !errors.Is(err, ontimedriver.ErrInvalid) {
		t.Errorf("claim with 2 shards of a topic in 3: %v", err)
	}
	d1 := open(nil)
	if _, err := d1.Schedule(ctx, "t", one, ontimedriver.Upsert); !errors.Is(err, ontimedriver.ErrInvalid) || !strings.Contains(err.Error(), "is sharded (3 shards)") {
		t.Errorf("unsharded schedule of a topic in 3 shards: %v", err)
	}
	// a topic with unsharded timers cannot become sharded
	if _, err := d1.Schedule(ctx, "u", one, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	if _, err := d3.Schedule(ctx, "u", one, ontimedriver.Upsert); !errors.Is(err, ontimedriver.ErrInvalid) || !strings.Contains(err.Error(), "unsharded") {
		t.Errorf("sharded schedule of a topic with unsharded timers: %v", err)
	}
	// the same count is fine, from another driver too
	if _, err := open(map[string]int{"t": 3}).Schedule(ctx, "t", one, ontimedriver.Upsert); err != nil {
		t.Errorf("schedule with the stored count: %v", err)
	}
}

// TestShardedClaimFair checks that claims take equal due times from every
// shard in turn: none waits behind another.
func TestShardedClaimFair(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDriver(t, ontimeredis.Options{Shards: map[string]int{"f": 3}})
	at := time.Now().Add(-time.Minute)
	var timers []ontimedriver.NewTimer
	for i := range 600 {
		timers = append(timers, ontimedriver.NewTimer{ID: fmt.Sprintf("f%d", i), At: at, Payload: []byte("p")})
	}
	if _, err := d.Schedule(ctx, "f", timers, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	per := make([]int, 3)
	for range 15 {
		r, err := d.Claim(ctx, "f", 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Timers) != 10 {
			t.Fatalf("claimed %d, want 10", len(r.Timers))
		}
		if r.Next.IsZero() || r.Next.After(r.Now) {
			t.Errorf("Next %v after Now %v with due timers left", r.Next, r.Now)
		}
		for _, c := range r.Timers {
			per[ontimeredis.ShardOf(d, "f", c.ID)]++
		}
	}
	for i, n := range per {
		if n != 50 {
			t.Errorf("shard %d gave %d of 150 claimed timers, want 50 (per shard: %v)", i, n, per)
		}
	}
}

func ExampleOptions_shards() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}})
	defer rdb.Close()
	// "clicks" is spread over 3 shards (one per master of a 3-master
	// Cluster), every "orders.*" topic over 2; other topics are not sharded.
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Shards: map[string]int{"clicks": 3, "orders.*": 2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	fmt.Println(d.ShardCount("clicks"), d.ShardCount("orders.eu"), d.ShardCount("invoices"))
	// Output: 3 2 1
}

// TestShardedOneMasterDown: on a 3-master Cluster, with the master of one
// shard of a sharded topic dead (and the Cluster not yet failed: a long
// node timeout), claims go on delivering the other shards' timers and
// report the topic due again soon, and a publish fails only the timers of
// the dead shard.
func TestShardedOneMasterDown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.StartCluster(t, 3, redistest.NodeTimeout(time.Minute))
	d, err := ontimeredis.New(cluster.NewClient(t), &ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet, Shards: map[string]int{"hot": 3}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	at := time.Now().Add(-time.Second)
	var timers []ontimedriver.NewTimer
	live := map[string]bool{}
	for i := range 60 {
		id := fmt.Sprintf("t%d", i)
		timers = append(timers, ontimedriver.NewTimer{ID: id, At: at, Payload: []byte("p")})
		if ontimeredis.ShardOf(d, "hot", id) != 0 {
			live[id] = true
		}
	}
	if _, err := d.Schedule(ctx, "hot", timers, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	// the master that holds shard 0
	shard0 := ontimeredis.ShardNames(d, "hot")[0]
	var victim *redistest.Server
	for _, n := range cluster.Nodes() {
		keys, err := n.NewClient(t).Keys(ctx, "*"+shard0+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("no master holds the keys of shard %q", shard0)
	}
	victim.Kill()

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := d.Claim(cctx, "hot", 100, time.Minute)
	if err != nil {
		t.Fatalf("claim with one shard's master dead: %v, want the other shards' timers", err)
	}
	if len(res.Timers) != len(live) {
		t.Errorf("claimed %d timers, want the %d of the live shards", len(res.Timers), len(live))
	}
	for _, c := range res.Timers {
		if !live[c.ID] {
			t.Errorf("claimed %s of the dead shard", c.ID)
		}
	}
	if res.Next.IsZero() || res.Next.After(res.Now.Add(time.Second)) {
		t.Errorf("Next %v (now %v): want the topic due again within a second, to try the dead shard", res.Next, res.Now)
	}

	var more []ontimedriver.NewTimer
	for i := range 12 {
		more = append(more, ontimedriver.NewTimer{ID: fmt.Sprintf("m%d", i), Delay: time.Hour, Payload: []byte("p")})
	}
	out, err := d.Schedule(cctx, "hot", more, ontimedriver.Upsert)
	if err != nil {
		t.Fatalf("publish with one shard's master dead: %v, want the dead shard's timers to fail alone", err)
	}
	failed := 0
	for i, r := range out {
		dead := ontimeredis.ShardOf(d, "hot", more[i].ID) == 0
		switch {
		case dead && r.Err == nil:
			t.Errorf("%s of the dead shard: written", more[i].ID)
		case dead:
			failed++
		case r.Err != nil:
			t.Errorf("%s of a live shard: %v", more[i].ID, r.Err)
		}
	}
	if failed == 0 {
		t.Error("no timer of the publish fell on the dead shard: the test proves nothing")
	}
}
