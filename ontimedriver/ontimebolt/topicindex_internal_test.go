package ontimebolt

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// BenchmarkTopicIndexApply is the index's share of a write batch's cost:
// moving one topic's entry in an index of 100,000 topics.
func BenchmarkTopicIndexApply(b *testing.B) {
	const n = 100_000
	x := newTopicIndex()
	topics := make([]string, n)
	for i := range topics {
		topics[i] = fmt.Sprint("tenant-", i)
		x.set(topics[i], int64(i))
	}
	rng := rand.New(rand.NewPCG(1, 1))
	ups := make([]headUpdate, 1)
	for b.Loop() {
		ups[0] = headUpdate{topic: topics[rng.IntN(n)], at: rng.Int64N(2 * n), ok: true}
		x.apply(ups)
	}
}

// TestTopicIndexHeap checks the heap against a sorted model under random
// sets and removes.
func TestTopicIndexHeap(t *testing.T) {
	x := newTopicIndex()
	model := map[string]int64{}
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range 20000 {
		topic := fmt.Sprint("t", rng.IntN(300))
		if rng.IntN(3) == 0 {
			x.apply([]headUpdate{{topic: topic}})
			delete(model, topic)
		} else {
			at := rng.Int64N(1000)
			x.apply([]headUpdate{{topic: topic, at: at, ok: true}})
			model[topic] = at
		}
		if len(x.heap) != len(model) || len(x.byTopic) != len(model) {
			t.Fatalf("step %d: heap %d, map %d, model %d", step, len(x.heap), len(x.byTopic), len(model))
		}
		for i, e := range x.heap {
			if e.pos != i || model[e.topic] != e.at {
				t.Fatalf("step %d: entry %+v at %d, model %d", step, e, i, model[e.topic])
			}
			if i > 0 && entryLess(e, x.heap[(i-1)/2]) {
				t.Fatalf("step %d: heap order broken at %d", step, i)
			}
		}
		if step%50 != 0 {
			continue
		}
		// due against the model: every entry at or before now, in order
		// (limit large enough), then the first after now.
		now := rng.Int64N(1000)
		got, _, next, ok := x.due(now, "*", maxDueTopics)
		var want []*indexEntry
		var wantNext *indexEntry
		for topic, at := range model {
			e := &indexEntry{topic: topic, at: at}
			if at <= now {
				want = append(want, e)
			} else if wantNext == nil || entryLess(e, wantNext) {
				wantNext = e
			}
		}
		if len(want) > maxPassedOver {
			continue
		}
		slices.SortFunc(want, func(a, b *indexEntry) int {
			if entryLess(a, b) {
				return -1
			}
			return 1
		})
		if len(got) != len(want) {
			t.Fatalf("step %d: due %d topics, want %d", step, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i].topic {
				t.Fatalf("step %d: due[%d] = %s, want %s", step, i, got[i], want[i].topic)
			}
		}
		if ok != (wantNext != nil) || (ok && next != wantNext.at) {
			t.Fatalf("step %d: next (%d, %v), want %+v", step, next, ok, wantNext)
		}
	}
}

// BenchmarkTopicHeads is what the index adds to a write batch that wrote
// one topic: reading its head at the end of the transaction (here in a read
// transaction of its own, whose cost is included).
func BenchmarkTopicHeads(b *testing.B) {
	d, err := Open(filepath.Join(b.TempDir(), "ontime.db"), &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	timers := make([]ontimedriver.NewTimer, 100)
	for i := range timers {
		timers[i] = ontimedriver.NewTimer{ID: fmt.Sprint(i), Delay: time.Duration(i) * time.Second}
	}
	if _, err := d.Schedule(context.Background(), "q", timers, ontimedriver.Upsert); err != nil {
		b.Fatal(err)
	}
	b.Run("view", func(b *testing.B) {
		for b.Loop() {
			_ = d.view(func(*bbolt.Tx) error { return nil })
		}
	})
	b.Run("view+heads", func(b *testing.B) {
		for b.Loop() {
			_ = d.view(func(tx *bbolt.Tx) error {
				d.topicHeads(tx, []string{"q"})
				return nil
			})
		}
	})
}

func TestBatchTopics(t *testing.T) {
	for _, n := range []int{0, 5, 16, 17, 200} {
		var batch []*request
		var want []string
		for i := range n {
			topic := fmt.Sprint("t", i%7)
			if i%5 == 4 {
				topic = "" // a write that names no topic
			}
			batch = append(batch, &request{topic: topic})
			if topic != "" && !slices.Contains(want, topic) {
				want = append(want, topic)
			}
		}
		if got := batchTopics(batch); !slices.Equal(got, want) {
			t.Errorf("%d requests: batchTopics = %v, want %v", n, got, want)
		}
	}
}
