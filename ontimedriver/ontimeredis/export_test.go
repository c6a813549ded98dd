package ontimeredis

import "context"

// UseIndexHints makes d keep the topic index as it does on a Redis
// Cluster (hints written after each script) on any client, so that the
// tests run that way on one Redis too.
func UseIndexHints(d *Driver) { d.idx = idxHints }

// WriteHint writes one topic index hint as the driver does after a script
// on a Cluster: kind "l" (lower), "s" (set) or "r" (remove).
func WriteHint(ctx context.Context, d *Driver, topic string, version int64, kind, score string) error {
	return d.writeHints(ctx, []any{topic, version, kind, score})
}

// IndexKeys returns the topic index and its versions hash.
func IndexKeys(d *Driver) (next, ver string) { return d.indexKeys() }

// LuaGlob exposes the pattern arguments of due_topics.lua.
var LuaGlob = luaGlob

// ShardNames returns the internal topics of a sharded topic's shards (nil
// when the topic is not sharded).
func ShardNames(d *Driver, topic string) []string {
	if s := d.sharded(topic); s != nil {
		return s.names
	}
	return nil
}

// ShardOf returns the shard of a timer id in a sharded topic.
func ShardOf(d *Driver, topic, id string) int { return d.sharded(topic).of(id) }

// CRC16 is Redis Cluster's key hash as the driver computes it.
var CRC16 = crc16

// FlushHints waits until the index hints and registry additions d queued
// for its background writer are written (hintwriter.go).
func FlushHints(ctx context.Context, d *Driver) error { return d.after.sync(ctx) }

// SlotOf is the hash slot the sharded hub groups a shard channel by.
var SlotOf = slotOf
