package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
)

// TestStuckWatchers: watchers that stop reading (real TCP clients that
// never read a byte) cannot make timers disappear. Each holds at most one
// event (it never confirms one), for at most the topic's lease, after
// which the server ends it and the event is due again; the watchers that
// read and confirm get everything else, and what nobody confirms goes to
// the topic's target. Every timer is confirmed by a reader or delivered to
// the target (lost=0), none before its due time; duplicates (a timer a
// reader saw twice, or saw and the target got too) are counted. A stuck
// plain stream (curl -N: copies) is in each scenario too and holds
// nothing. Bodies are 4 KiB, as in issue 20's measurements.
func TestStuckWatchers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		stuck, reading int
		timers         int
	}{
		{name: "1 stuck", stuck: 1, reading: 0, timers: 2000},
		{name: "50 stuck, 50 reading", stuck: 50, reading: 50, timers: 2000},
		{name: "500 stuck, 10 reading", stuck: 500, reading: 10, timers: 4000},
	} {
		t.Run(c.name, func(t *testing.T) {
			runStuck(t, c.stuck, c.reading, c.timers)
		})
	}
}

const stuckLease = 2 * time.Second

func runStuck(t *testing.T, stuck, reading, timers int) {
	const topic = "stuck"
	hook := newHook(t, func(int) int { return http.StatusNoContent })
	e := newEnv(t, envOpts{cfg: &config.Config{Topics: map[string]config.Topic{topic: {
		Lease:  config.Duration(stuckLease),
		Target: &config.Target{Type: config.TargetHTTP, URL: hook.URL, Timeout: config.Duration(10 * time.Second)},
	}}}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	// The stuck ones: a request, then nothing, not even the answer read.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dialStuck := func(query string) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096) // as little as the kernel allows
		}
		conns = append(conns, c)
		req := "GET /v1/topics/" + topic + "/watch" + query + " HTTP/1.1\r\nHost: " + e.addr + "\r\n\r\n"
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
	}
	for range stuck {
		dialStuck("?ack=explicit")
	}
	dialStuck("") // a stuck curl -N

	readers := make([]*stuckReader, reading)
	for i := range readers {
		readers[i] = startReader(t, ctx, e, topic)
	}
	wait.For(t, 60*time.Second, func() bool {
		return e.disp.Counters().Watchers == stuck+1+reading
	}, "every watcher connected")

	body := strings.Repeat("x", 4096)
	due := time.Now().Add(300 * time.Millisecond).UTC()
	dues := map[string]time.Time{}
	for i := 0; i < timers; i += 500 {
		batch := make([]ontime.Timer, 0, 500)
		for j := i; j < min(i+500, timers); j++ {
			id := fmt.Sprintf("s-%05d", j)
			at := due.Add(time.Duration(j%50) * time.Millisecond)
			dues[id] = at
			batch = append(batch, ontime.Timer{ID: id, Body: body, At: at})
		}
		if _, err := e.client.PublishBatch(t.Context(), topic, batch); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	wait.For(t, 180*time.Second, func() bool {
		n, err := e.client.Count(t.Context(), topic)
		return err == nil && n.Scheduled+n.Leased+n.Dead == 0
	}, "every timer confirmed or delivered")
	took := time.Since(start)
	cancel()

	seen := map[string]int{}
	early := 0
	events := 0
	for _, r := range readers {
		r.wait()
		for _, ev := range r.events() {
			events++
			seen[ev.id]++
			if ev.at.Before(dues[ev.id]) {
				early++
				t.Errorf("reader got %s at %s, before its due time %s", ev.id, ev.at.Format(time.RFC3339Nano), dues[ev.id].Format(time.RFC3339Nano))
			}
		}
	}
	hook.mu.Lock()
	toTarget := 0
	for _, rq := range hook.reqs {
		toTarget++
		seen[rq.header.Get("Ontime-Id")]++
	}
	hook.mu.Unlock()
	lost := 0
	for id := range dues {
		if seen[id] == 0 {
			lost++
		}
	}
	dup := events + toTarget - (len(dues) - lost)
	n, err := e.client.Count(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d stuck + %d reading watchers, %d timers of 4 KiB: lost=%d duplicates=%d early=%d (readers got %d events, the target %d; dead letters %d) in %s",
		stuck, reading, timers, lost, dup, early, events, toTarget, n.Dead, took.Round(time.Millisecond))
	if lost != 0 {
		t.Errorf("lost=%d: timers acked without a reader or the target getting them", lost)
	}
	if n.Dead != 0 {
		t.Errorf("%d timers dead-lettered", n.Dead)
	}
	if reading > 0 && events == 0 {
		t.Error("the readers got nothing")
	}
}

// stuckReader is a watcher that reads its stream and confirms each event.
type stuckReader struct {
	mu   sync.Mutex
	got  []readEvent
	done chan struct{}
}

type readEvent struct {
	id string
	at time.Time
}

func (r *stuckReader) events() []readEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]readEvent(nil), r.got...)
}

func (r *stuckReader) wait() { <-r.done }

// startReader opens an ack=explicit stream and confirms every event as it
// reads it, the confirmations of what arrived meanwhile in one request.
func startReader(t *testing.T, ctx context.Context, e *env, topic string) *stuckReader {
	t.Helper()
	r := &stuckReader{done: make(chan struct{})}
	hc := &http.Client{Transport: &http.Transport{}}
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/topics/"+topic+"/watch?ack=explicit", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	ids := make(chan string, 1024)
	acked := make(chan struct{})
	go func() { // the confirmations
		defer close(acked)
		for id := range ids {
			batch := []string{id}
		more:
			for {
				select {
				case id, ok := <-ids:
					if !ok {
						break more
					}
					batch = append(batch, id)
				default:
					break more
				}
			}
			b, _ := json.Marshal(wire.WatchAck{IDs: batch})
			ar, err := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/topics/"+topic+"/watch:ack", bytes.NewReader(b))
			if err != nil {
				continue
			}
			ar.Header.Set("Content-Type", "application/json")
			if res, err := hc.Do(ar); err == nil {
				res.Body.Close()
			}
		}
	}()
	go func() {
		defer close(r.done)
		defer func() { close(ids); <-acked }()
		defer resp.Body.Close()
		rd := bufio.NewReaderSize(resp.Body, 64<<10)
		var evID, data string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "" && data != "":
				var ev wire.Event
				if json.Unmarshal([]byte(data), &ev) == nil {
					r.mu.Lock()
					r.got = append(r.got, readEvent{id: ev.ID, at: time.Now()})
					r.mu.Unlock()
					ids <- evID
				}
				evID, data = "", ""
			case strings.HasPrefix(line, "id: "):
				evID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return r
}
