package ontimebolt_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// Topics cost what they hold: 2,000 topics with one timer each (174-byte
// payloads, about a 100-byte body in the library's envelope) take at most
// 1 KiB of the file each, next to a fresh store; once their timers are
// cancelled they take nothing; and a cold Open reads about what the topics
// with timers hold, and nothing of the emptied ones (the Open half is in
// topiccost_linux_test.go). The full figures (20,000 and 100,000 topics,
// Open times) are BenchmarkTopicsOpen's.
const costTopics = 2000

// oneTimerTopics schedules one timer in each of n topics from 16
// goroutines and returns the topics.
func oneTimerTopics(t testing.TB, d ontimedriver.Driver, n int) []string {
	t.Helper()
	topics := make([]string, n)
	for i := range topics {
		topics[i] = fmt.Sprintf("tenant-%06d", i)
	}
	payload := bytes.Repeat([]byte("p"), 174)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < n; i += 16 {
				schedule(t, d, topics[i], ontimedriver.NewTimer{ID: fmt.Sprintf("timer-%06d", i), Delay: time.Hour, Payload: payload})
			}
		})
	}
	wg.Wait()
	return topics
}

// cancelAll cancels the one timer of each topic.
func cancelAll(t testing.TB, d ontimedriver.Driver, topics []string) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < len(topics); i += 16 {
				if err := d.Cancel(ctx, topics[i], fmt.Sprintf("timer-%06d", i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

func TestTopicsCostWhatTheyHold(t *testing.T) {
	t.Parallel()
	fresh, _ := open(t, nil)
	base := ontimebolt.InUse(t, fresh)
	d, _ := open(t, nil)
	topics := oneTimerTopics(t, d, costTopics)
	per := (ontimebolt.InUse(t, d) - base) / costTopics
	t.Logf("in use: fresh %d B, with %d one-timer topics %d B more per topic", base, costTopics, per)
	if per > 1024 {
		t.Errorf("a one-timer topic takes %d bytes of the file, want at most 1024", per)
	}
	cancelAll(t, d, topics)
	if got, _ := d.Topics(ctx); len(got) != 0 {
		t.Fatalf("Topics after cancelling every timer = %d topics", len(got))
	}
	if after := ontimebolt.InUse(t, d); after > base {
		t.Errorf("after cancelling every timer %d bytes are in use, a fresh store uses %d", after, base)
	}
}
