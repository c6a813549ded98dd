package drivertest

import (
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

func topicCounterCases() []testCase {
	return []testCase{
		{"MatchesCount", testCountTopicsMatchesCount},
		{"Empty", testCountTopicsEmpty},
	}
}

// counter returns the driver's TopicCounter, or skips the case.
func (e *env) counter() ontimedriver.TopicCounter {
	e.t.Helper()
	tc, ok := e.d.(ontimedriver.TopicCounter)
	if !ok {
		e.t.Skipf("%T does not implement ontimedriver.TopicCounter", e.d)
	}
	return tc
}

// testCountTopicsMatchesCount: CountTopics gives, in order, what Count
// gives for each topic: scheduled, leased and dead timers, a topic that
// never held anything, an emptied one, a topic named twice.
func testCountTopicsMatchesCount(e *env) {
	tc := e.counter()
	e.put("ct.a", dueIn("1", time.Hour, "x"), dueIn("2", time.Hour, "x"), dueNow("3", "x"))
	e.claimOne(e.d, "ct.a", "3", longLease)
	e.put("ct.b", dueNow("x", "x"), dueIn("y", time.Hour, "x"))
	if !e.lacks.NoDeadLetters {
		e.wantErr("dead", e.settle1("ct.b", deadOp(e.claimOne(e.d, "ct.b", "x", longLease), "r", "e")), nil)
	}
	e.put("ct.emptied", dueIn("x", time.Hour, "x"))
	e.wantErr("cancel", e.d.Cancel(e.ctx, "ct.emptied", "x"), nil)
	topics := []string{"ct.b", "ct.never", "ct.a", "ct.emptied", "ct.a"}
	got, err := tc.CountTopics(e.ctx, topics)
	if err != nil {
		e.t.Fatalf("CountTopics: %v", err)
	}
	if len(got) != len(topics) {
		e.t.Fatalf("CountTopics: %d results for %d topics", len(got), len(topics))
	}
	for i, topic := range topics {
		if want := e.count(topic); got[i] != want {
			e.t.Errorf("CountTopics[%d] (%s) = %+v; Count = %+v", i, topic, got[i], want)
		}
	}
	if got[2] == (ontimedriver.Counts{}) || got[1] != (ontimedriver.Counts{}) || got[3] != (ontimedriver.Counts{}) {
		e.t.Errorf("CountTopics = %+v: want ct.a counted, ct.never and ct.emptied zero", got)
	}
}

// testCountTopicsEmpty: no topics, no counts.
func testCountTopicsEmpty(e *env) {
	tc := e.counter()
	got, err := tc.CountTopics(e.ctx, nil)
	if err != nil || len(got) != 0 {
		e.t.Errorf("CountTopics(nil) = %+v, %v; want none", got, err)
	}
}
