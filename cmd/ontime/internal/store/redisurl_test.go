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

// TestOpenRedisTLS: a rediss:// URL with the CA file (and a client
// certificate, which this server requires) reaches a TLS-only Redis; the
// system CAs alone, or no client certificate, fail with the TLS error.
func TestOpenRedisTLS(t *testing.T) {
	t.Parallel()
	files := redistest.NewTLSFiles(t)
	srv := redistest.StartServer(t, redistest.WithTLS(files), redistest.Args("--tls-auth-clients", "yes"))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ping := func(tlsFiles RedisTLS) error {
		st, err := OpenRedis(RedisOptions{URL: srv.URL(), Prefix: redistest.Prefix(t), TLS: tlsFiles}, log)
		if err != nil {
			return err
		}
		defer st.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		return st.Driver.Ping(ctx)
	}
	if !strings.HasPrefix(srv.URL(), "rediss://") {
		t.Fatalf("URL %s", srv.URL())
	}
	if err := ping(RedisTLS{CAFile: files.CAFile, CertFile: files.ClientCertFile, KeyFile: files.ClientKeyFile}); err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	if err := ping(RedisTLS{CertFile: files.ClientCertFile, KeyFile: files.ClientKeyFile}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v, want a certificate error", err)
	}
	if err := ping(RedisTLS{CAFile: files.CAFile}); err == nil {
		t.Errorf("without the client certificate the server requires: no error")
	}
	if err := ping(RedisTLS{CAFile: files.CertFile + ".missing"}); err == nil || !strings.Contains(err.Error(), "redis TLS CA") {
		t.Errorf("a missing CA file: %v", err)
	}
	if err := ping(RedisTLS{CAFile: files.CAFile, CertFile: files.ClientCertFile}); err == nil || !strings.Contains(err.Error(), "key") {
		t.Errorf("a certificate without its key: %v", err)
	}
}
