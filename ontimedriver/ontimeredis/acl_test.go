package ontimeredis_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// The ACL rules of the package documentation ("ACL rules"), for the
// default prefix; the tests put each driver's own prefix in its place.
const (
	aclCommands = "-@all +ping +evalsha +eval +smembers +sadd +srem +sscan +exists +zcard +zrange +get +set +wait " +
		"+hget +hmget +hset +hdel +hexists +hkeys +incrby +object|encoding +publish +time +unlink " +
		"+zadd +zcount +zmscore +zrangebyscore +zrank +zrem +zscore"
	aclSubscribe = "+subscribe +unsubscribe +psubscribe +punsubscribe"
	aclKeys      = "resetkeys ~ontime:* resetchannels &ontime:*"
	// On a Redis Cluster, with sharded pub/sub: both users, and workers.
	aclCluster          = "+cluster|slots +spublish"
	aclClusterSubscribe = "+ssubscribe +sunsubscribe"
)

// TestACLRulesDocumented: the rules the tests grant are the ones the
// package documentation gives.
func TestACLRulesDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(strings.ReplaceAll(string(doc), "//", "")), " ")
	for _, rule := range []string{aclCommands, aclSubscribe, aclKeys, "&ontime:{tenant-*}:wake", aclCluster + " to both users and " + aclClusterSubscribe} {
		if !strings.Contains(text, rule) {
			t.Errorf("doc.go does not give the rule %q", rule)
		}
	}
}

// aclServer is a TLS-only redis-server with ACL users made per driver.
type aclServer struct {
	srv   *redistest.Server
	files *redistest.TLSFiles
	admin *redis.Client
}

func startACLServer(t *testing.T) *aclServer {
	files := redistest.NewTLSFiles(t)
	srv := redistest.StartServer(t, redistest.WithTLS(files))
	return &aclServer{srv: srv, files: files, admin: srv.NewClient(t)}
}

// user creates an ACL user with rules (the default prefix replaced by
// prefix) and returns a TLS client logged in as it.
func (a *aclServer) user(t testing.TB, prefix, rules string) *redis.Client {
	t.Helper()
	name := "u" + strings.TrimSuffix(redistest.Prefix(t), ":")
	args := []any{"ACL", "SETUSER", name, "reset", "on", ">pw"}
	for _, r := range strings.Fields(strings.ReplaceAll(rules, "ontime:", prefix)) {
		args = append(args, r)
	}
	if err := a.admin.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	c := redis.NewClient(&redis.Options{
		Addr: a.srv.Addr, Username: name, Password: "pw", TLSConfig: a.files.ClientConfig(),
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestACLWorkerRules: a driver logged in (over TLS, with the harness's
// CA) as a user with exactly the documented worker rules passes the
// conformance suite (every driver call, SubscribeTopics with a pattern
// among them); the topic patterns are granted as the documentation says,
// one literal channel pattern each. (The library suite makes driver calls
// of the same kinds; it runs on one node, Sentinel and Cluster.)
func TestACLWorkerRules(t *testing.T) {
	t.Parallel()
	a := startACLServer(t)
	rules := aclCommands + " " + aclSubscribe + " " + aclKeys
	for _, p := range []string{"*", "tenant-*", "retry-*", "long-*"} {
		rules += " &ontime:{" + p + "}:wake"
	}
	var mu sync.Mutex
	made := map[ontimedriver.Driver]ontimeredis.Options{}
	open := func(t testing.TB, o ontimeredis.Options) ontimedriver.Driver {
		d, err := ontimeredis.New(a.user(t, o.Prefix, rules), &o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		mu.Lock()
		made[d] = d.Options()
		mu.Unlock()
		return d
	}
	h := drivertest.Harness{
		New: func(t testing.TB) ontimedriver.Driver {
			return open(t, ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet})
		},
		NewPeer: func(t testing.TB, d ontimedriver.Driver) ontimedriver.Driver {
			mu.Lock()
			o := made[d]
			mu.Unlock()
			return open(t, o)
		},
	}
	drivertest.Run(t, h)
}

// TestACLPublisherRules: a user with the publisher rules (no pub/sub
// reads) publishes, reads and cancels; a user whose key pattern does not
// cover the prefix, or that lacks a command, gets Redis's refusal (which
// names the command, except inside a script, where Redis 7.0 does not)
// and where the rules are documented.
func TestACLPublisherRules(t *testing.T) {
	t.Parallel()
	a := startACLServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	prefix := redistest.Prefix(t)
	newClient := func(rules string) *ontime.Client {
		d, err := ontimeredis.New(a.user(t, prefix, rules), &ontimeredis.Options{Prefix: prefix, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pub := newClient(aclCommands + " " + aclKeys)
	id, err := pub.Publish(ctx, "orders", "x", ontime.In(time.Hour))
	if err != nil {
		t.Fatalf("publish with the publisher rules: %v", err)
	}
	if _, err := pub.Get(ctx, "orders", id); err != nil {
		t.Fatalf("get: %v", err)
	}
	if n, err := pub.Count(ctx, "orders"); err != nil || n.Scheduled != 1 {
		t.Fatalf("count: %+v %v", n, err)
	}
	if topics, err := pub.Topics(ctx); err != nil || len(topics) != 1 {
		t.Fatalf("topics: %v %v", topics, err)
	}
	if err := pub.Cancel(ctx, "orders", id); err != nil {
		t.Fatalf("cancel: %v", err)
	}

	for _, c := range []struct{ what, rules, want string }{
		{"keys of another prefix", aclCommands + " resetkeys ~other:* resetchannels &ontime:*", "NOPERM this user has no permissions to access one of the keys"},
		{"no EVALSHA", strings.Replace(aclCommands, " +evalsha +eval", "", 1) + " " + aclKeys, "NOPERM this user has no permissions to run the 'evalsha' command"},
		{"no PUBLISH in the scripts", strings.Replace(aclCommands, " +publish", "", 1) + " " + aclKeys, "can't run this command"},
	} {
		_, err := newClient(c.rules).Publish(ctx, "orders", "x", ontime.In(time.Millisecond))
		if err == nil {
			t.Errorf("%s: publish succeeded", c.what)
			continue
		}
		if !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "ACL rules") {
			t.Errorf("%s: error %q; want %q and a pointer to the ACL rules", c.what, err, c.want)
		}
	}
}

// TestACLCoversScriptCommands: every command a script runs is in the
// documented rules, so that a script that starts using a new command (as
// the shard count's GET and SET did) fails here, not on a user's server.
func TestACLCoversScriptCommands(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("lua", "*.lua"))
	if err != nil || len(files) < 5 {
		t.Fatalf("lua scripts: %v %v", files, err)
	}
	call := regexp.MustCompile(`(?:redis\.p?call|many)\('([A-Za-z]+)'`)
	// (SPUBLISH runs on a Cluster only, granted there.)
	granted := strings.Fields(aclCommands + " " + aclCluster)
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(b), -1) {
			seen++
			cmd := strings.ToLower(m[1])
			if !slices.Contains(granted, "+"+cmd) && !slices.ContainsFunc(granted, func(g string) bool { return strings.HasPrefix(g, "+"+cmd+"|") }) {
				t.Errorf("%s runs %s, which the ACL rules do not grant", f, m[1])
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found %d commands in the scripts", seen)
	}
}

// TestACLClusterRules: on a Redis Cluster a worker user with exactly the
// documented rules for a Cluster (no classic subscribe command, no
// literal channel pattern) subscribes to a topic and to a topic pattern
// by sharded pub/sub, publishes, is woken and claims; a publisher user
// without +spublish is refused with the pointer to the rules.
func TestACLClusterRules(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.StartCluster(t, 3)
	prefix := redistest.Prefix(t)
	user := func(name, rules string) *redis.ClusterClient {
		args := []any{"ACL", "SETUSER", name, "reset", "on", ">pw"}
		for _, r := range strings.Fields(strings.ReplaceAll(rules, "ontime:", prefix)) {
			args = append(args, r)
		}
		for _, s := range cluster.Servers {
			if err := s.NewClient(t).Do(ctx, args...).Err(); err != nil {
				t.Fatalf("ACL SETUSER on %s: %v", s.Addr, err)
			}
		}
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), Username: name, Password: "pw"})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	open := func(c *redis.ClusterClient) *ontimeredis.Driver {
		d, err := ontimeredis.New(c, &ontimeredis.Options{Prefix: prefix, Logger: quiet, ClusterTopicIndex: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	w := open(user("worker", aclCommands+" "+aclCluster+" "+aclClusterSubscribe+" "+aclKeys))
	wakes, cancel, err := w.Subscribe(ctx, "acl")
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer cancel()
	twakes, tcancel, err := w.SubscribeTopics(ctx, "acl*")
	if err != nil {
		t.Fatalf("SubscribeTopics: %v", err)
	}
	defer tcancel()
	if _, err := w.Schedule(ctx, "acl", []ontimedriver.NewTimer{{ID: "a", Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	select {
	case <-wakes:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up on Subscribe")
	}
	select {
	case tw := <-twakes:
		if tw.Topic != "acl" {
			t.Errorf("SubscribeTopics woke for %q, want acl", tw.Topic)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up on SubscribeTopics")
	}
	res, err := w.Claim(ctx, "acl", 1, time.Minute)
	if err != nil || len(res.Timers) != 1 {
		t.Fatalf("Claim: %v, %v", res, err)
	}

	p := open(user("publisher", strings.Replace(aclCommands+" "+aclCluster, " +spublish", "", 1)+" "+aclKeys))
	_, err = p.Schedule(ctx, "acl2", []ontimedriver.NewTimer{{ID: "a", Payload: []byte("p")}}, ontimedriver.Upsert)
	if err == nil || !strings.Contains(err.Error(), "can't run this command") || !strings.Contains(err.Error(), "ACL rules") {
		t.Errorf("Schedule without +spublish: %v, want the script's refusal and a pointer to the ACL rules", err)
	}
}
