package kafkadelay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partition is the state of one owned bucket partition. Every field is
// guarded by the Republisher's mu.
type partition struct {
	topic    string
	id       int32
	bucket   Bucket
	smallest bool // the smallest bucket: records are read at once
	counters *counters

	buf       []item   // fetched, not taken yet, in offset order
	inflight  []*entry // taken, not finished, in offset order (finished ones are popped from the front)
	pending   int      // entries in inflight that are not finished
	producing int      // entries whose produce is in flight
	failing   int      // entries whose produce failed and waits for a retry: nothing is taken meanwhile
	errors    int      // produce errors since the partition started failing (for the log)
	paused    bool
	wake      *time.Timer
	wakeAt    time.Time
	stopped   bool // being given up: no record is taken, timers do nothing
	gone      bool // given up: produce callbacks do nothing

	hasNext   bool
	next      kgo.EpochOffset // the offset after the finished prefix
	committed int64
	first     int64 // offset of the first record taken, -1 before
	behind    int   // set by drop: finished records behind an unfinished one
}

// item is a fetched record with what its headers say.
type item struct {
	rec  *kgo.Record
	seen time.Time // when this republisher fetched it
	meta Meta
	err  error // the headers are missing or malformed
}

// entryState is where a taken record is.
type entryState uint8

const (
	waiting   entryState = iota // a timer is set for its next instant
	inProduce                   // a produce is in flight
	backoff                     // a produce failed; a retry timer is set
	finished                    // acknowledged by its target
)

// actionKind is what a produce does for a record.
type actionKind uint8

const (
	reroute    actionKind = iota // to the next bucket
	release                      // to the destination
	deadLetter                   // to the dead-letter topic
)

// entry is a taken record.
type entry struct {
	item
	p        *partition
	step     time.Time // when it leaves its bucket
	target   time.Time // the instant it is waiting for, or was due to be produced at
	state    entryState
	timer    *time.Timer
	kind     actionKind
	out      *kgo.Record // what is being produced
	to       Bucket      // the bucket of a reroute
	reason   string      // the reason of a dead letter
	attempts int
}

// action is a produce to issue once r.mu is released.
type action struct {
	e   *entry
	cl  *kgo.Client
	rec *kgo.Record
}

func newPartition(topic string, id int32, b Bucket, smallest bool) *partition {
	return &partition{topic: topic, id: id, bucket: b, smallest: smallest, committed: -1, first: -1}
}

// parse reads a fetched record's headers into an item. It needs no lock.
func (r *Republisher) parse(rec *kgo.Record, now time.Time) item {
	it := item{rec: rec, seen: now}
	it.meta, it.err = ParseMeta(rec.Headers)
	if it.err == nil {
		dest := it.meta.Destination
		if _, isBucket := r.cfg.Ladder.Bucket(dest); isBucket || dest == r.cfg.DeadLetterTopic {
			it.err = fmt.Errorf("%w: destination %q is a bucket or dead-letter topic", ErrInvalid, dest)
		}
	}
	return it
}

// stepAt is when a record leaves this partition's bucket: its bucket
// delay after it was produced here, but never after its due instant, and
// never more than the delay after this republisher fetched it (a producer
// whose clock runs ahead cannot hold a partition back).
func (p *partition) stepAt(it *item) time.Time {
	s := it.rec.Timestamp.Add(p.bucket.Delay)
	if late := it.seen.Add(p.bucket.Delay); late.Before(s) {
		s = late
	}
	if it.meta.Due.Before(s) {
		s = it.meta.Due
	}
	return s
}

// pump takes the records at the head of the buffer that are due to be
// taken, arms a wake-up for the first that is not, and pauses or resumes
// fetching. It appends the produces to issue to acts. r.mu is held.
func (r *Republisher) pump(p *partition, now time.Time, acts []action) []action {
	if p.stopped {
		return acts
	}
	for p.failing == 0 && len(p.buf) > 0 {
		it := &p.buf[0]
		var step time.Time
		if it.err == nil {
			step = p.stepAt(it)
			if !p.smallest {
				if take := step.Add(-r.prefetch); now.Before(take) {
					r.armWake(p, take, now)
					break
				}
			}
		}
		e := &entry{item: *it, p: p, step: step, target: step}
		if p.first < 0 {
			p.first = it.rec.Offset
		}
		p.buf[0] = item{}
		p.buf = p.buf[1:]
		p.inflight = append(p.inflight, e)
		p.pending++
		r.pending++
		acts = r.advance(e, now, acts)
	}
	if len(p.buf) == 0 {
		p.buf = nil // let the backing array go
	}
	r.setPaused(p, p.failing > 0 || len(p.buf) > 0)
	return acts
}

// armWake sets the partition's wake-up timer to at.
func (r *Republisher) armWake(p *partition, at, now time.Time) {
	if p.wake != nil {
		if p.wakeAt.Equal(at) {
			return
		}
		p.wake.Stop()
	}
	p.wakeAt = at
	p.wake = time.AfterFunc(at.Sub(now), func() {
		r.mu.Lock()
		if p.stopped {
			r.mu.Unlock()
			return
		}
		p.wake = nil
		acts := r.pump(p, time.Now(), nil)
		r.mu.Unlock()
		r.do(acts)
	})
}

// setPaused pauses or resumes fetching the partition.
func (r *Republisher) setPaused(p *partition, pause bool) {
	if pause == p.paused {
		return
	}
	p.paused = pause
	m := map[string][]int32{p.topic: {p.id}}
	if pause {
		r.cl.PauseFetchPartitions(m)
	} else {
		r.cl.ResumeFetchPartitions(m)
	}
}

// advance decides what happens next to a taken record at now: wait for
// its step or due instant, reroute it, release it, or dead-letter it.
// r.mu is held.
func (r *Republisher) advance(e *entry, now time.Time, acts []action) []action {
	if e.err != nil {
		e.kind, e.reason = deadLetter, trimReason(e.err.Error())
		return r.send(e, acts)
	}
	if now.Before(e.step) {
		return r.wait(e, e.step, now, acts)
	}
	rem := e.meta.Due.Sub(now)
	switch b, ok := r.cfg.Ladder.Route(rem); {
	case rem <= 0:
		e.kind, e.target = release, e.meta.Due
	case !ok:
		return r.wait(e, e.meta.Due, now, acts) // the last step: held in memory
	default:
		e.kind, e.to, e.target = reroute, b, now
	}
	return r.send(e, acts)
}

// wait holds e in memory until at.
func (r *Republisher) wait(e *entry, at, now time.Time, acts []action) []action {
	e.state, e.target = waiting, at
	e.timer = time.AfterFunc(at.Sub(now), func() {
		r.mu.Lock()
		if e.p.stopped || e.state != waiting {
			r.mu.Unlock()
			return
		}
		acts := r.advance(e, time.Now(), nil)
		r.mu.Unlock()
		r.do(acts)
	})
	return acts
}

// send builds e's record for its kind and queues its produce.
func (r *Republisher) send(e *entry, acts []action) []action {
	src := e.rec
	out := &kgo.Record{Key: src.Key, Value: src.Value, Headers: src.Headers}
	cl := r.cl
	switch e.kind {
	case reroute:
		out.Topic = e.to.Topic
	case release:
		out.Topic = e.meta.Destination
		cl = r.dest
	case deadLetter:
		out.Topic = r.cfg.DeadLetterTopic
		out.Headers = deadHeaders(src, e.reason)
	}
	e.out = out
	e.state = inProduce
	e.p.producing++
	return append(acts, action{e: e, cl: cl, rec: out})
}

// do issues produces; r.mu is not held (Produce can block when the
// client's buffer is full, and its callbacks take r.mu).
func (r *Republisher) do(acts []action) {
	if len(acts) == 0 {
		return
	}
	now := time.Now()
	for _, a := range acts {
		a.rec.Timestamp = now
		e := a.e
		early := e.kind == release && a.rec.Timestamp.Before(e.meta.Due)
		produced := a.rec.Timestamp
		a.cl.Produce(context.Background(), a.rec, func(_ *kgo.Record, err error) {
			r.produced(e, produced, early, err)
		})
	}
}

// produced handles a produce's outcome.
func (r *Republisher) produced(e *entry, at time.Time, early bool, err error) {
	now := time.Now()
	r.mu.Lock()
	p := e.p
	p.producing--
	r.signal()
	if p.gone {
		r.mu.Unlock()
		return
	}
	c := p.counters
	if err != nil {
		e.attempts++
		c.errors++
		p.errors++
		fail := ProduceFailure{Source: p.topic, Partition: p.id, Offset: e.rec.Offset, Target: e.out.Topic, Attempt: e.attempts, Err: err}
		var acts []action
		first := false
		switch reason := undeliverable(err); {
		case p.stopped:
			// Being given up: the next owner reads the record again.
			e.state = backoff
		case e.kind == release && reason != "" && !r.creator.retryAfterCreate(e.meta.Destination, err):
			// The destination cannot take this record: retrying would
			// block the partition for ever.
			e.kind, e.reason = deadLetter, trimReason(fmt.Sprintf("destination %q refused the record: %s", e.meta.Destination, reason))
			acts = r.send(e, nil)
		default:
			e.state = backoff
			first = p.failing == 0 && p.errors == 1
			p.failing++
			r.setPaused(p, true)
			delay := min(r.cfg.RetryMin<<min(e.attempts-1, 20), r.cfg.RetryMax)
			e.timer = time.AfterFunc(delay, func() { r.retry(e) })
		}
		r.mu.Unlock()
		if first {
			r.log.Warn("kafkadelay: produce failed; partition paused, retrying with backoff", "source", p.topic, "partition", p.id,
				"offset", e.rec.Offset, "target", fail.Target, "err", err)
		}
		r.obs.ProduceFailed(fail)
		r.do(acts)
		return
	}
	e.state = finished
	p.pending--
	r.pending--
	r.wakePoll()
	if e.attempts > 0 && p.failing == 0 && p.errors > 0 {
		r.log.Info("kafkadelay: produce succeeded again; partition resumed", "source", p.topic, "partition", p.id,
			"target", e.out.Topic, "errors", p.errors)
		p.errors = 0
	}
	switch e.kind {
	case release:
		c.released++
		if early {
			c.early++
		}
		if l := at.Sub(e.meta.Due); l > c.latenessMax {
			c.latenessMax = l
		}
	case reroute:
		c.rerouted++
	case deadLetter:
		c.dead++
	}
	p.popFinished()
	acts := r.pump(p, now, nil)
	r.mu.Unlock()
	r.do(acts)

	switch e.kind {
	case release:
		r.obs.Released(Release{Source: p.topic, Partition: p.id, Offset: e.rec.Offset, Destination: e.meta.Destination, ID: e.meta.ID,
			Due: e.meta.Due, Produced: at, Acked: now, Early: early})
	case reroute:
		r.obs.Rerouted(p.bucket, e.to)
	case deadLetter:
		r.obs.DeadLettered(DeadLetter{Source: p.topic, Partition: p.id, Offset: e.rec.Offset, Reason: e.reason})
	}
}

// retry produces a failed entry again.
func (r *Republisher) retry(e *entry) {
	r.mu.Lock()
	if e.p.stopped || e.state != backoff {
		r.mu.Unlock()
		return
	}
	cl := r.cl
	if e.kind == release {
		cl = r.dest
	}
	e.state = inProduce
	e.p.producing++
	e.p.failing--
	acts := []action{{e: e, cl: cl, rec: e.out}}
	r.mu.Unlock()
	r.do(acts)
}

// undeliverable says why a destination can never take a record, or ""
// for errors worth retrying.
func undeliverable(err error) string {
	for _, k := range []*kerr.Error{
		kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidTopicException,
		kerr.InvalidRecord, kerr.TopicAuthorizationFailed, kerr.UnknownTopicOrPartition,
		kerr.UnknownTopicID, kerr.InvalidRequiredAcks, kerr.PolicyViolation,
	} {
		if errors.Is(err, k) {
			return k.Message
		}
	}
	return ""
}

// popFinished moves the committable offset past the finished entries at
// the front of inflight.
func (p *partition) popFinished() {
	i := 0
	for ; i < len(p.inflight) && p.inflight[i].state == finished; i++ {
		rec := p.inflight[i].rec
		p.next = kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset + 1}
		p.hasNext = true
		p.inflight[i] = nil
	}
	p.inflight = p.inflight[i:]
	if len(p.inflight) == 0 {
		p.inflight = nil
	}
}

// stop makes the partition's timers do nothing more and takes no record
// after it. Produces in flight finish and are counted.
func (p *partition) stop() {
	p.stopped = true
	if p.wake != nil {
		p.wake.Stop()
	}
	for _, e := range p.inflight {
		if e.timer != nil {
			e.timer.Stop()
		}
	}
}

// handOff produces every record the partition holds in memory to where
// its remaining delay routes it now (the destination if it is due, else a
// bucket: the smallest one for less than the smallest delay), so that the
// offsets behind it can be committed and the next owner does not repeat
// work already done. Records fetched but not taken are left to be read
// again. r.mu is held.
func (r *Republisher) handOff(p *partition, now time.Time, acts []action) ([]action, int) {
	n := 0
	for _, e := range p.inflight {
		if e.state != waiting {
			continue
		}
		n++
		if rem := e.meta.Due.Sub(now); rem <= 0 {
			e.kind, e.target = release, e.meta.Due
		} else {
			b, _ := r.cfg.Ladder.Route(rem)
			e.kind, e.to, e.target = reroute, b, now
		}
		acts = r.send(e, acts)
	}
	return acts, n
}

// drop forgets the partition's records: how many were held without being
// produced, and how many produces were not acknowledged.
func (p *partition) drop() (dropped, unacked int) {
	p.gone = true
	dropped = len(p.buf)
	for _, e := range p.inflight {
		switch e.state {
		case waiting:
			dropped++
		case inProduce, backoff:
			unacked++
		case finished:
			p.behind++
		}
	}
	p.buf, p.inflight = nil, nil
	return dropped, unacked
}

// repeated bounds the records of a given-up partition that the next owner
// reads again although their output was produced: the finished records
// behind an unfinished one, and the finished prefix past the last
// successful commit (counted in offsets, an upper bound).
func (p *partition) repeated() int {
	n := p.behind
	if p.hasNext {
		from := max(p.committed, p.first)
		if from >= 0 && p.next.Offset > from {
			n += int(p.next.Offset - from)
		}
	}
	return n
}

// counts returns how many taken records are held in memory and how many
// are being produced.
func (p *partition) counts() (held, producing int) {
	for _, e := range p.inflight {
		switch e.state {
		case waiting:
			held++
		case inProduce, backoff:
			producing++
		}
	}
	return held, producing
}

// headLate is how far past its instant the oldest unfinished record is.
func (p *partition) headLate(now time.Time) time.Duration {
	var late time.Duration
	consider := func(at time.Time) {
		if d := now.Sub(at); d > late {
			late = d
		}
	}
	for _, e := range p.inflight {
		if e.state != finished {
			consider(e.target)
			break
		}
	}
	if p.failing > 0 {
		for _, e := range p.inflight {
			if e.state == backoff {
				consider(e.target)
				break
			}
		}
	}
	if len(p.buf) > 0 {
		it := &p.buf[0]
		if it.err != nil {
			consider(it.seen)
		} else {
			consider(p.stepAt(it))
		}
	}
	return late
}
