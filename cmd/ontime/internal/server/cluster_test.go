package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver"
)

// TestClusterServeAndFailover: on a Redis Cluster of 3 masters + 3
// replicas, the server serves every topic from the topic index (one
// worker), as on one node; when a master is SIGKILLed, /readyz says
// "degraded" and lists (to an admin token) the topics whose calls fail,
// then "ready" again once the replica is promoted and they publish again.
func TestClusterServeAndFailover(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3, redistest.WithReplicas(3), redistest.NodeTimeout(2*time.Second))
	e := newEnv(t, envOpts{redis: "redis+cluster://" + strings.Join(cluster.Addrs(), ","), tokens: []string{"admintok"}})
	auth := []string{"Authorization", "Bearer admintok"}
	var topics []string
	for i := range 30 {
		topics = append(topics, fmt.Sprintf("cl.%d", i))
	}
	for _, topic := range topics {
		e.want(e.do("POST", "/v1/topics/"+topic+"/timers", map[string]any{"delay": "0s"}, auth...), 201, "")
	}
	// The dispatcher runs its one shared worker when the store keeps the
	// index (delivery.New).
	if _, ok := ontimedriver.IndexedTopics(e.client.Driver()); !ok {
		t.Errorf("the Cluster store keeps no topic index: the server would run a worker per topic")
	}
	wait.For(t, 30*time.Second, func() bool {
		for _, topic := range topics {
			if n, err := e.client.Count(t.Context(), topic); err != nil || n.Scheduled+n.Leased > 0 {
				return false
			}
		}
		return true
	}, "every topic's timer delivered")

	readyz := func() wire.Status {
		r := e.do("GET", "/readyz", nil, auth...)
		var st wire.Status
		if err := json.Unmarshal(r.body, &st); err != nil || r.status != 200 {
			t.Fatalf("/readyz: %d %s", r.status, r.body)
		}
		return st
	}
	if st := readyz(); st.Status != "ready" {
		t.Fatalf("/readyz before the kill: %+v", st)
	}
	// Publish to every topic while a master dies.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, topic := range topics {
				select {
				case <-stop:
					return
				default:
				}
				e.do("POST", "/v1/topics/"+topic+"/timers", map[string]any{"delay": "1h"}, auth...)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	cluster.Servers[0].Kill()
	var degraded wire.Status
	wait.For(t, 30*time.Second, func() bool {
		degraded = readyz()
		return degraded.Status == "degraded" && len(degraded.UnavailableTopics) > 0
	}, "/readyz degraded with the dead master's topics")
	for _, u := range degraded.UnavailableTopics {
		if !strings.HasPrefix(u.Topic, "cl.") || u.Error == "" || u.Since.IsZero() {
			t.Errorf("unavailable topic %+v", u)
		}
	}
	// Without the admin token: "degraded", no detail.
	if r := e.do("GET", "/readyz", nil); r.status != 200 || strings.Contains(string(r.body), "cl.") {
		t.Errorf("anonymous /readyz while degraded: %d %s", r.status, r.body)
	}
	wait.For(t, 30*time.Second, func() bool { return readyz().Status == "ready" }, "/readyz ready after the promotion")
}
