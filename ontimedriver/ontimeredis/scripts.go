package ontimeredis

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// script is one Lua script with its helpers prepended.
type script struct {
	name string
	src  string
	sha  string
	// sharded is the script with its wake-up published by SPUBLISH
	// (sharded pub/sub, on a Redis Cluster; see hub); nil for a script
	// that publishes nothing.
	sharded *script
}

// classicPublish is how the scripts publish a wake-up on one Redis; their
// sharded variants publish with shardedPublish instead.
const (
	classicPublish = "redis.call('PUBLISH',"
	shardedPublish = "redis.call('SPUBLISH',"
)

// mustScript reads lua/<name>.lua and prepends lua/shared.lua and then the
// given helper files (the layout's common helpers).
func mustScript(name string, helpers ...string) *script {
	var src strings.Builder
	for _, f := range append(append([]string{"shared"}, helpers...), name) {
		b, err := luaFS.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic(err)
		}
		src.Write(b)
		src.WriteByte('\n')
	}
	s := newScript(name, src.String())
	if strings.Contains(s.src, classicPublish) {
		s.sharded = newScript(name, strings.ReplaceAll(s.src, classicPublish, shardedPublish))
	}
	return s
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// script returns the variant of s the driver runs: the one that publishes
// wake-ups with SPUBLISH when the driver uses sharded pub/sub.
func (d *Driver) script(s *script) *script {
	if d.spub && s.sharded != nil {
		return s.sharded
	}
	return s
}

var (
	sSchedule = mustScript("schedule", "common")
	sShards   = mustScript("shards")
	sPeek     = mustScript("peek")
	sClaim    = mustScript("claim", "common")
	sSettle   = mustScript("settle", "common")
	sExtend   = mustScript("extend", "common")
	sCancel   = mustScript("cancel")
	sCancelN  = mustScript("cancel_batch")
	sGet      = mustScript("get", "common")
	sPage     = mustScript("page")
	sCount    = mustScript("count", "counting")
	sPrune    = mustScript("prune")
	sCountTop = mustScript("count_topics", "counting")
	sReplay   = mustScript("replay", "common")
	sPurge    = mustScript("purge")
	sCountDue = mustScript("count_due")
	sFire     = mustScript("fire", "common")

	sDueTopics = mustScript("due_topics")
	sHint      = mustScript("hint")
	sHead      = mustScript("head")
	sSync      = mustScript("sync", "common")

	sCSchedule = mustScript("compat_schedule", "compat_common")
	sCClaim    = mustScript("compat_claim", "compat_common")
	sCSettle   = mustScript("compat_settle", "compat_common")
	sCExtend   = mustScript("compat_extend", "compat_common")
	sCCancel   = mustScript("compat_cancel")
	sCCancelN  = mustScript("compat_cancel_batch")
	sCGet      = mustScript("compat_get", "compat_common")
	sCReplay   = mustScript("compat_replay", "compat_common")
	sCFire     = mustScript("compat_fire", "compat_common")
)

// eval runs s on the node that holds keys: EVALSHA, and when that node
// does not know the script (first use there, a restart, a failover, SCRIPT
// FLUSH: NOSCRIPT) EVAL with the whole script, which runs it and leaves it
// in that node's script cache, so the next EVALSHA finds it. EVALSHA failed
// with NOSCRIPT without running anything, so the script runs once. Only the
// node that runs a script is ever asked to load it: on a Redis Cluster the
// other masters and the replicas are not involved, so an unreachable
// replica, or a master that holds other topics, stops nothing. (Scripts
// are never sent inside a pipeline, where go-redis cannot fall back.)
func (d *Driver) eval(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	if d.closed.Load() {
		return nil, errClosed
	}
	return d.evalOpen(ctx, s, keys, args...)
}

// evalOpen is eval without the closed check: Close's last background
// writes (hintwriter.go) use it.
func (d *Driver) evalOpen(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	s = d.script(s)
	res, err := bounded(d, ctx, func(ctx context.Context) (any, error) {
		res, err := d.rdb.EvalSha(ctx, s.sha, keys, args...).Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			res, err = d.rdb.Eval(ctx, s.src, keys, args...).Result()
		}
		return res, err
	})
	d.observe(keys, err)
	if err != nil {
		return nil, fmt.Errorf("ontimeredis: %s: %w%s%s", s.name, err, permissionHint(err), d.spublishHint(err))
	}
	return res, nil
}

// spublishHint is what an error of a script that ran a command the server
// does not know gets appended when the scripts SPUBLISH: a Cluster of
// Redis older than 7.0 has no sharded pub/sub.
func (d *Driver) spublishHint(err error) string {
	if d.spub && strings.Contains(strings.ToLower(err.Error()), "unknown redis command") {
		return " (sharded pub/sub needs Redis 7.0 or later: on an older Cluster set ontimeredis.Options.ClassicPubSub)"
	}
	return ""
}

// permissionHint is what an error of a Redis ACL refusal (NOPERM) gets
// appended: where the rules ontime needs are.
func permissionHint(err error) string {
	if msg := err.Error(); strings.Contains(msg, "NOPERM") || strings.Contains(msg, "The user executing the script can't run") {
		return " (the Redis user lacks a command, key or channel ontime needs: see the ontimeredis package documentation, \"ACL rules\")"
	}
	return ""
}
