package kafkadelay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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

	buf       []*entry  // fetched, in offset order; taken ones are skipped (see item.taken)
	checked   int       // buf[:checked] were checked for taking out of order
	waiting   int       // items in buf not taken
	maxStep   time.Time // the latest step of the items in buf[:checked] not taken
	inflight  []*entry  // taken, not finished, in offset order (finished ones are popped from the front)
	pending   int       // entries in inflight that are not finished
	producing int       // entries whose produce is in flight
	failing   int       // entries whose produce failed and waits for a retry: nothing is taken meanwhile
	errors    int       // produce errors since the partition started failing (for the log)
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
	// rec is the fetched record. Once taken and sent to a bucket or the
	// destination, it is the record produced (its Topic, Timestamp,
	// Partition and Offset are the produce's): off and epoch keep where
	// it was read.
	rec   *kgo.Record
	off   int64     // rec's offset in the bucket partition
	epoch int32     // rec's leader epoch
	seen  time.Time // when this republisher fetched it
	meta  Meta
	err   error // the headers are missing or malformed
	// taken: the entry is in inflight; the head loop skips it in buf
	// (where a record taken out of order stays until the head reaches
	// it).
	taken bool
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

// entry is a fetched record (in buf) and, once taken (in inflight), what
// happens to it. The entries of a fetch are allocated together.
type entry struct {
	item
	p        *partition
	step     time.Time // when it leaves its bucket
	target   time.Time // the instant it is waiting for, or was due to be produced at
	state    entryState
	timer    *time.Timer
	kind     actionKind
	out      *kgo.Record // what is being produced (rec, or a dead letter's copy)
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

// parse reads a fetched record's headers into e, an entry not taken yet.
// It needs no lock.
func (r *Republisher) parse(e *entry, rec *kgo.Record, now time.Time) {
	it := &e.item
	it.rec, it.off, it.epoch, it.seen = rec, rec.Offset, rec.LeaderEpoch, now
	it.err = parseMeta(&it.meta, rec.Headers, r.intern)
	if it.err == nil {
		dest := it.meta.Destination
		if r.isOurs(dest) {
			it.err = fmt.Errorf("%w: destination %q is a bucket or dead-letter topic", ErrInvalid, dest)
		}
	}
}

// bucketStep is when a record leaves this partition's bucket by the
// bucket's delay: the delay after it was produced here, but never more than
// the delay after this republisher fetched it (a producer whose clock runs
// ahead cannot hold a partition back).
func (p *partition) bucketStep(it *entry) time.Time {
	s := it.rec.Timestamp.Add(p.bucket.Delay)
	if late := it.seen.Add(p.bucket.Delay); late.Before(s) {
		s = late
	}
	return s
}

// stepAt is when a record leaves this partition's bucket: its bucketStep,
// or its due instant if that is earlier.
func (p *partition) stepAt(it *entry) time.Time {
	s := p.bucketStep(it)
	if it.meta.Due.Before(s) {
		s = it.meta.Due
	}
	return s
}

// pump takes the records at the head of the buffer that are due to be
// taken, then checks the records fetched since the last pump: any that must
// not wait behind the head is taken at once (see checkNew). It arms a
// wake-up for the head that is not due and pauses fetching while a produce
// is failing or ReadAhead records wait. It appends the produces to issue to
// acts. r.mu is held.
func (r *Republisher) pump(p *partition, now time.Time, acts []action) []action {
	if p.stopped {
		return acts
	}
	acts = r.takeHead(p, now, acts)
	if p.failing == 0 {
		before := p.waiting
		acts = r.checkNew(p, now, acts)
		if p.waiting != before {
			// The head may have moved on, or have a new successor.
			acts = r.takeHead(p, now, acts)
		}
	}
	r.setPaused(p, p.failing > 0 || p.waiting >= r.cfg.ReadAhead)
	return acts
}

// takeHead takes the records at the head of the buffer that are due to be
// taken and arms a wake-up for the first that is not. r.mu is held.
func (r *Republisher) takeHead(p *partition, now time.Time, acts []action) []action {
	for p.failing == 0 && len(p.buf) > 0 {
		it := p.buf[0]
		if !it.taken {
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
			acts = r.take(p, it, step, now, acts)
		}
		p.buf[0] = nil
		p.buf = p.buf[1:]
		if p.checked > 0 {
			p.checked--
		}
	}
	if len(p.buf) == 0 {
		p.buf = nil // let the backing array go
		p.checked = 0
		p.maxStep = time.Time{}
	}
	return acts
}

// checkNew looks at the records fetched behind a waiting head since the
// last call. The head waits only for records that belong where they are;
// a record behind it is taken at once when it must leave its bucket before
// the head does:
//
//   - a malformed record (dead-lettered at once);
//   - a record whose due instant comes before it would leave its bucket by
//     the bucket's delay: it is in a bucket larger than its remaining delay
//     (a producer that rounds up, a hand-written one, clock skew). It is
//     moved on at once to the rung its remaining delay routes it to, or
//     held in memory when less than the smallest delay remains, or
//     released if due;
//   - a record that leaves its bucket earlier than records before it by
//     more than the prefetch (their timestamps went backwards: producers'
//     clocks disagree): the records before it that would hold it up are
//     moved on at once.
//
// r.mu is held.
func (r *Republisher) checkNew(p *partition, now time.Time, acts []action) []action {
	for ; p.checked < len(p.buf); p.checked++ {
		it := p.buf[p.checked]
		if it.taken {
			continue
		}
		if it.err != nil || p.smallest {
			// The smallest bucket is taken record by record at once
			// by the head loop; a malformed record goes at once.
			if it.err != nil {
				acts = r.take(p, it, now, now, acts)
			}
			continue
		}
		step := p.stepAt(it)
		// Within the prefetch of its bucket step, a record leaves with
		// the head's batch anyway (the republisher's own re-routes are
		// timestamped a little after their route was chosen).
		if step.Before(p.bucketStep(it).Add(-r.prefetch)) {
			if p.counters.outOfOrder == 0 {
				r.log.Info("kafkadelay: a record is in a bucket larger than its remaining delay (a producer that rounds up?); moving it on at once (counted in the stats as out_of_order, logged once)",
					"source", p.topic, "partition", p.id, "offset", it.off, "due", it.meta.Due, "bucket", p.bucket.Delay)
			}
			p.counters.outOfOrder++
			acts = r.take(p, it, now, now, acts)
			continue
		}
		if p.maxStep.Sub(step) > r.prefetch {
			// Move on what would hold this record up.
			for j := 0; j < p.checked; j++ {
				b := p.buf[j]
				if b.taken || b.err != nil {
					continue
				}
				if p.stepAt(b).Sub(step) > r.prefetch {
					p.counters.outOfOrder++
					acts = r.take(p, b, now, now, acts)
				}
			}
			p.maxStep = time.Time{}
			for j := 0; j < p.checked; j++ {
				if b := p.buf[j]; !b.taken && b.err == nil {
					if s := p.stepAt(b); s.After(p.maxStep) {
						p.maxStep = s
					}
				}
			}
		}
		if step.After(p.maxStep) {
			p.maxStep = step
		}
	}
	return acts
}

// take moves a buffered record into inflight (kept in offset order) and
// decides what happens to it; step is when it leaves its bucket (now for a
// record moved on out of order). r.mu is held.
func (r *Republisher) take(p *partition, e *entry, step, now time.Time, acts []action) []action {
	e.p, e.step, e.target = p, step, step
	e.taken = true
	it := &e.item
	p.waiting--
	if off := it.off; p.first < 0 || off < p.first {
		p.first = off
	}
	n := len(p.inflight)
	if n == 0 || p.inflight[n-1].off < e.off {
		p.inflight = append(p.inflight, e)
	} else {
		i, _ := slices.BinarySearchFunc(p.inflight, e.off, func(x *entry, off int64) int { return cmp.Compare(x.off, off) })
		p.inflight = slices.Insert(p.inflight, i, e)
	}
	p.pending++
	r.pending++
	return r.advance(e, now, acts)
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
	// A reroute or a release produces the fetched record itself with a
	// new topic: key, value and headers stay as read. Its context is the
	// fetch's; Produce sets it to its own (never cancelled).
	src := e.rec
	out := src
	cl := r.cl
	switch e.kind {
	case reroute:
		out.Topic = e.to.Topic
	case release:
		out.Topic = e.meta.Destination
		cl = r.dest
	case deadLetter:
		out = &kgo.Record{Key: src.Key, Value: src.Value, Topic: r.cfg.DeadLetterTopic,
			Headers: deadHeaders(src.Headers, e.p.topic, e.p.id, e.off, e.reason)}
	}
	out.Context = nil
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
		fail := ProduceFailure{Source: p.topic, Partition: p.id, Offset: e.off, Target: e.out.Topic, Attempt: e.attempts, Err: err}
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
				"offset", e.off, "target", fail.Target, "err", err)
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
		r.obs.Released(Release{Source: p.topic, Partition: p.id, Offset: e.off, Destination: e.meta.Destination, ID: e.meta.ID,
			Due: e.meta.Due, Produced: at, Acked: now, Early: early})
	case reroute:
		r.obs.Rerouted(p.bucket, e.to)
	case deadLetter:
		r.obs.DeadLettered(DeadLetter{Source: p.topic, Partition: p.id, Offset: e.off, Reason: e.reason})
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
	limit := int64(-1) // the first buffered record not taken: nothing at or past it is committed
	for j := range p.buf {
		if !p.buf[j].taken {
			limit = p.buf[j].off
			break
		}
	}
	i := 0
	for ; i < len(p.inflight) && p.inflight[i].state == finished && (limit < 0 || p.inflight[i].off < limit); i++ {
		e := p.inflight[i]
		p.next = kgo.EpochOffset{Epoch: e.epoch, Offset: e.off + 1}
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
	dropped = p.waiting
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
	for j := range p.buf {
		it := p.buf[j]
		if it.taken {
			continue
		}
		if it.err != nil {
			consider(it.seen)
		} else {
			consider(p.stepAt(it))
		}
		break
	}
	return late
}
