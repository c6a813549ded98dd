package store

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
)

// TestRedisURLForms: each URL form gives the client it names, with the
// seed lists, the master name, and the credentials where they belong.
func TestRedisURLForms(t *testing.T) {
	t.Parallel()
	c, err := NewRedisClient("redis+cluster://u:p@h1:7000,h2:7001,h3:7002?dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("redis+cluster gave %T", c)
	}
	if o := cc.Options(); !slices.Equal(o.Addrs, []string{"h1:7000", "h2:7001", "h3:7002"}) || o.Username != "u" || o.Password != "p" || o.DialTimeout != 2*time.Second {
		t.Errorf("cluster options %v %q %q %v", o.Addrs, o.Username, o.Password, o.DialTimeout)
	}
	_ = c.Close()

	fo, err := parseSentinelURL("redis://worker:s3cr%40t@s1:26379,s2:26379,s3:26379/mymaster/2?sentinel_password=sp&dial_timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	if fo.MasterName != "mymaster" || !slices.Equal(fo.SentinelAddrs, []string{"s1:26379", "s2:26379", "s3:26379"}) ||
		fo.Username != "worker" || fo.Password != "s3cr@t" || fo.SentinelPassword != "sp" || fo.DB != 2 || fo.DialTimeout != time.Second {
		t.Errorf("sentinel options: master %q sentinels %v user %q password %q sentinel password %q db %d", fo.MasterName, fo.SentinelAddrs, fo.Username, fo.Password, fo.SentinelPassword, fo.DB)
	}
	if fo, err := parseSentinelURL("rediss://s1:26379/m"); err != nil || fo.TLSConfig == nil {
		t.Errorf("rediss+sentinel: %v, TLS %v", err, fo)
	}
	for _, bad := range []string{
		"redis+sentinel://s1:26379",              // no master name
		"redis+sentinel://s1:26379/m/0/x",        // too many path parts
		"redis+sentinel://s1:26379,,s2:1/m",      // empty host
		"redis+sentinel://s1:26379/m?password=x", // credentials in the wrong place
		"redis+sentinel://s1:26379/m?bogus=1",    // go-redis refuses unknown options
	} {
		if c, err := NewRedisClient(bad); err == nil {
			_ = c.Close()
			t.Errorf("%s: no error", bad)
		}
	}
	// A password never appears in a parse error.
	if _, err := NewRedisClient("redis://u:hunter2@h:1/%zz"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad URL error: %v", err)
	}
	// TLS files with a plain URL are refused.
	if _, err := newRedisClient("redis://h:1", RedisTLS{CAFile: "ca.pem"}); err == nil || !strings.Contains(err.Error(), "rediss://") {
		t.Errorf("TLS files on redis://: %v", err)
	}
}

// TestOpenRedisTopologies: the store opens a Cluster from a seed list and
// a Sentinel setup from a redis+sentinel URL, and both keep the topic
// index (the server serves every topic from it).
func TestOpenRedisTopologies(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	sentinel := redistest.StartSentinel(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, u := range []string{
		"redis+cluster://" + strings.Join(cluster.Addrs(), ","),
		sentinel.URL(),
	} {
		st, err := OpenRedis(RedisOptions{URL: u, Prefix: redistest.Prefix(t)}, log)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		if _, err := st.Driver.Schedule(ctx, "t1", []ontimedriver.NewTimer{{ID: "a", Payload: []byte("x")}}, ontimedriver.Upsert); err != nil {
			t.Errorf("%s: schedule: %v", u, err)
		}
		if _, ok := ontimedriver.IndexedTopics(st.Driver); !ok {
			t.Errorf("%s: no topic index", u)
		}
		idx, _ := ontimedriver.IndexedTopics(st.Driver)
		if res, err := idx.DueTopics(ctx, "*", time.Hour, 10); err != nil || !slices.Contains(res.Topics, "t1") {
			t.Errorf("%s: DueTopics = %v, %v; want t1", u, res, err)
		}
		cancel()
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}
}
