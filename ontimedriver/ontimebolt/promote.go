package ontimebolt

import (
	"bytes"
	"context"
	"errors"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// The promoter keeps the near mark ahead of the clock (see "Near and far"
// in layout.go): every nearHorizon/4 it moves the timers claimable before
// now + nearHorizon from u and f to t and q, then sets the mark there. It finds the topics to look at in the topic index (those
// whose head is before the new mark, earliest first), so it costs nothing
// while no topic has a timer due within the horizon, however many topics
// there are, and one seek per topic that has. A run that finds nothing to
// move writes nothing. It moves at most promoteChunk entries per
// transaction.
const (
	nearHorizon  = 2 * time.Minute
	promoteChunk = 10_000
)

// promoter runs promote at once, then every horizon/4, until Close.
func (d *Driver) promoter(horizon time.Duration) {
	defer close(d.promoterDone)
	tick := time.NewTicker(horizon / 4)
	defer tick.Stop()
	for {
		if err := d.promote(floorMicros(time.Now()) + horizon.Microseconds()); err != nil && !errors.Is(err, ontimedriver.ErrClosed) {
			d.log.Error("ontimebolt: moving the claim index entries that come due soon failed; timers stay claimable, commits write more pages until the next try",
				"path", d.path, "err", err)
		}
		select {
		case <-tick.C:
		case <-d.quit:
			return
		}
	}
}

// promote moves the timers claimable before target from u and f to t and
// q, and sets the near mark to target.
func (d *Driver) promote(target int64) error {
	defer d.promotions.Add(1)
	topics := d.idx.through(target)
	for i := 0; i < len(topics); {
		var next, moved int
		// Look first, so that a run with nothing to move writes nothing.
		err := d.view(func(tx *bbolt.Tx) error {
			s, err := dataBucketsOf(tx, d.path, 0)
			if err != nil {
				return err
			}
			next, moved = promoteTopics(s, d.path, topics, i, target, nil)
			return nil
		})
		if err != nil {
			return err
		}
		if moved == 0 {
			i = next
			continue
		}
		err = d.write(context.Background(), "", func(tx *bbolt.Tx) error {
			s, err := dataBucketsOf(tx, d.path, 0)
			if err != nil {
				return err
			}
			var moveErr error
			next, moved = promoteTopics(s, d.path, topics, i, target, func(k []byte) {
				if moveErr == nil {
					moveErr = s.promoteKey(k)
				}
			})
			return moveErr
		})
		if err != nil {
			return err
		}
		i = next
	}
	for {
		old := d.near.Load()
		if old >= target || d.near.CompareAndSwap(old, target) {
			return nil
		}
	}
}

// promoteKey moves the claim index entry k from f to q and its timer's
// record from u to t.
func (s *stores) promoteKey(k []byte) error {
	if err := s.future.Delete(k); err != nil {
		return err
	}
	if err := s.queue.Put(k, nil); err != nil {
		return err
	}
	topic, rest, _ := splitTopic(k)
	_, id, _ := splitKey(rest)
	key := timerKey(string(topic), string(id))
	raw := s.farTimers.Get(key)
	if raw == nil {
		return nil // in t already, or an orphan entry that Claim removes
	}
	if err := s.timers.Put(key, bytes.Clone(raw)); err != nil {
		return err
	}
	return s.farTimers.Delete(key)
}

// promoteTopics finds, from topics[from] on, the entries of f for instants
// before target, up to promoteChunk of them, and calls move with the key
// of each (move nil: only count them). It returns where the next call
// starts (the topic it stopped in, which may have more) and how many it
// found.
func promoteTopics(s *stores, path string, topics []string, from int, target int64, move func(key []byte)) (next, found int) {
	i := from
	for ; i < len(topics); i++ {
		tb := s.topic(path, topics[i])
		var keys [][]byte
		c := tb.cursor(s.future)
		for k := c.first(); k != nil && found+len(keys) < promoteChunk; k = c.next() {
			us, _, ok := splitKey(k)
			if !ok || us >= target {
				break
			}
			keys = append(keys, tb.key(k))
		}
		if move != nil {
			for _, k := range keys {
				move(k)
			}
		}
		found += len(keys)
		if found >= promoteChunk {
			return i, found
		}
	}
	return i, found
}
