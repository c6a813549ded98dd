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
}

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
	sum := sha1.Sum([]byte(src.String()))
	return &script{name: name, src: src.String(), sha: hex.EncodeToString(sum[:])}
}

var (
	sSchedule = mustScript("schedule", "common")
	sClaim    = mustScript("claim", "common")
	sSettle   = mustScript("settle", "common")
	sExtend   = mustScript("extend", "common")
	sCancel   = mustScript("cancel")
	sGet      = mustScript("get", "common")
	sPage     = mustScript("page")
	sCount    = mustScript("count")
	sReplay   = mustScript("replay", "common")
	sPurge    = mustScript("purge")

	sCSchedule = mustScript("compat_schedule", "compat_common")
	sCClaim    = mustScript("compat_claim", "compat_common")
	sCSettle   = mustScript("compat_settle", "compat_common")
	sCExtend   = mustScript("compat_extend", "compat_common")
	sCCancel   = mustScript("compat_cancel")
	sCGet      = mustScript("compat_get", "compat_common")
	sCReplay   = mustScript("compat_replay", "compat_common")

	allScripts = []*script{
		sSchedule, sClaim, sSettle, sExtend, sCancel, sGet, sPage, sCount, sReplay, sPurge,
		sCSchedule, sCClaim, sCSettle, sCExtend, sCCancel, sCGet, sCReplay,
	}
)

// loadScripts loads every script into the script cache (on every master of
// a cluster).
func loadScripts(ctx context.Context, rdb redis.UniversalClient) error {
	for _, s := range allScripts {
		sha, err := rdb.ScriptLoad(ctx, s.src).Result()
		if err != nil {
			return fmt.Errorf("ontimeredis: loading script %s: %w", s.name, err)
		}
		if sha != s.sha {
			return fmt.Errorf("ontimeredis: script %s loaded as %s, want %s", s.name, sha, s.sha)
		}
	}
	return nil
}

// eval runs s by its SHA. The scripts are loaded on first use; when the
// server does not know one (a restart, a failover, SCRIPT FLUSH) they are
// loaded again and the call retried: a script is never sent whole inside
// a call.
func (d *Driver) eval(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	if d.closed.Load() {
		return nil, errClosed
	}
	res, err := bounded(d, ctx, func(ctx context.Context) (any, error) {
		if !d.loaded.Load() {
			// First use: load every script, so that later calls find them.
			if err := loadScripts(ctx, d.rdb); err != nil {
				return nil, err
			}
			d.loaded.Store(true)
		}
		res, err := d.rdb.EvalSha(ctx, s.sha, keys, args...).Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// Redis restarted, failed over or flushed its scripts: load
			// them all again (the others are gone too) and retry once.
			if lerr := loadScripts(ctx, d.rdb); lerr != nil {
				return nil, lerr
			}
			res, err = d.rdb.EvalSha(ctx, s.sha, keys, args...).Result()
		}
		return res, err
	})
	if err != nil {
		return nil, fmt.Errorf("ontimeredis: %s: %w", s.name, err)
	}
	return res, nil
}
