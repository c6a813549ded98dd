package schedule

import (
	"encoding/binary"
	"hash/fnv"
	"time"
)

// JitterFor returns how long after tick the schedule id fires when its ticks
// are spread over window: a duration in [0, window), the same for the same
// (id, tick) on every server and in every run, and spread evenly over the
// window across ids and ticks. A window of zero or less gives zero.
//
// Jitter only ever delays: a tick fires at tick + JitterFor(id, tick, window),
// never before tick, and the handler still sees tick as the tick's instant.
// Keep the window shorter than the schedule's interval, or a jittered tick can
// still run when the next one is due.
func JitterFor(id string, tick time.Time, window time.Duration) time.Duration {
	if window <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	var b [13]byte
	b[0] = 0 // separates id from the tick
	binary.BigEndian.PutUint64(b[1:], uint64(tick.Unix()))
	binary.BigEndian.PutUint32(b[9:], uint32(tick.Nanosecond()))
	_, _ = h.Write(b[:])
	return time.Duration(mix64(h.Sum64()) % uint64(window))
}

// mix64 is SplitMix64's finalizer: FNV-1a's low bits alone are poorly spread
// for short inputs, and the modulo keeps the low bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
