package kafkadelay_test

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

// testingTB is testing.TB, named so that nopTB can embed it.
type testingTB = testing.TB

// A republisher SIGKILLed mid-run, without committing: a new one
// delivers everything, none early, and the duplicates are no more than
// the records that were in flight at the kill (past the committed offset
// with an output already produced).
func TestRepublisherKilled(t *testing.T) {
	c := newCluster(t)
	s := c.sink(t)
	const n = 10000
	rng := rand.New(rand.NewPCG(5, 6))
	pub := publishMany(t, c, n, func(int) time.Time {
		return time.Now().Add(300*time.Millisecond + time.Duration(rng.IntN(4000))*time.Millisecond)
	})

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(c.addrs, ","))
	cmd.Stderr = testWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	assigned := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "assigned" {
				close(assigned)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		t.Fatal("the child republisher never got its partitions")
	}
	s.waitFor(t, 30*time.Second, "a third of the records", func(s *sink) bool { return len(s.got) >= n/3 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	killedAt := time.Now()
	s.mu.Lock()
	before := len(s.got)
	s.mu.Unlock()

	inFlight := inFlightAt(t, c, killedAt)
	t.Logf("killed after %d of %d deliveries; %d records in flight (past the committed offset, output already produced)", before, n, inFlight)

	r := c.republisher(t, nil)
	s.waitFor(t, 60*time.Second, "every record", func(s *sink) bool { return len(s.got) >= n })
	s.drain(t, c, 60*time.Second) // late duplicates included
	dups, lateness := s.check(t, pub)
	t.Logf("%s; duplicates %d (in flight at the kill %d)", latenessLine(lateness), dups, inFlight)
	if dups > inFlight {
		t.Errorf("%d duplicates, more than the %d records in flight at the kill", dups, inFlight)
	}
	r.stop(t)
}

// inFlightAt counts the bucket records past the group's committed offset
// that already had an output (a record with the same delivery id produced
// after them, before the kill): each can be delivered once more.
func inFlightAt(t *testing.T, c *cluster, killedAt time.Time) int {
	t.Helper()
	ctx := context.Background()
	adm := kadm.NewClient(c.client(t))
	committed, err := adm.FetchOffsets(ctx, "republishers")
	if err != nil {
		t.Fatal(err)
	}
	topics := append(c.ladder.Topics(), destinations...)
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	// Read every bucket and destination record up to the end offsets.
	type rec struct {
		topic     string
		partition int32
		offset    int64
		ts        time.Time
	}
	byID := make(map[string][]rec)
	want := 0
	consume := make(map[string]map[int32]kgo.Offset)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want += int(o.Offset)
			if consume[o.Topic] == nil {
				consume[o.Topic] = make(map[int32]kgo.Offset)
			}
			consume[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	cl := c.client(t, kgo.ConsumePartitions(consume))
	got := 0
	deadline := time.Now().Add(30 * time.Second)
	for got < want && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			end, _ := ends.Lookup(r.Topic, r.Partition)
			if r.Offset >= end.Offset {
				return
			}
			got++
			id := headerValue(r, kafkadelay.HeaderID)
			byID[id] = append(byID[id], rec{r.Topic, r.Partition, r.Offset, r.Timestamp})
		})
	}
	if got < want {
		t.Fatalf("read %d of %d records", got, want)
	}
	inFlight := 0
	for _, rs := range byID {
		for _, r := range rs {
			if _, isBucket := c.ladder.Bucket(r.topic); !isBucket {
				continue
			}
			co, ok := committed.Lookup(r.topic, r.partition)
			if ok && r.offset < co.At {
				continue // committed: never read again
			}
			for _, o := range rs {
				if o != r && !o.ts.Before(r.ts) && !o.ts.After(killedAt) {
					inFlight++
					break
				}
			}
		}
	}
	t.Logf("committed at the kill: %s", describeOffsets(committed))
	return inFlight
}

func describeOffsets(o kadm.OffsetResponses) string {
	var b strings.Builder
	o.Each(func(r kadm.OffsetResponse) {
		b.WriteString(r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "@" + strconv.FormatInt(r.At, 10) + " ")
	})
	return b.String()
}
