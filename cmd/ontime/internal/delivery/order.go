package delivery

import (
	"container/heap"
	"time"
)

// Watchers see a topic's timers in due order. The worker runs up to
// Concurrency handlers at once, and the claimer (claimer.go) claims
// batches, so the timers of one claim (a backlog, or timers due within the
// same instant) arrive in any order. While someone confirms, each timer
// is queued here; a pump takes them out by (due time, id) and hands them
// to the confirming watchers that have room, after a gathering pause so
// that the timers of one claim are all queued before the first goes out:
// the pump waits until no timer has been queued for gatherWindow (handlers
// of one claim start within microseconds of each other, but a loaded
// machine can delay a goroutine by milliseconds), at most gatherMax.

// gatherWindow is the quiet time that ends a gathering pause; gatherMax
// bounds the pause.
const (
	gatherWindow = 5 * time.Millisecond
	gatherMax    = 100 * time.Millisecond
)

// holdHeap orders queued holds by due time, then id.
type holdHeap []*hold

func (h holdHeap) Len() int { return len(h) }
func (h holdHeap) Less(i, j int) bool {
	a, b := h[i].msg, h[j].msg
	if !a.Due.Equal(b.Due) {
		return a.Due.Before(b.Due)
	}
	return a.ID < b.ID
}
func (h holdHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *holdHeap) Push(x any)   { *h = append(*h, x.(*hold)) }
func (h *holdHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

// watchSession is the pump and the claimer of a topic while it has
// confirming watchers.
type watchSession struct {
	stop    chan struct{} // closed when the last confirming watcher leaves
	claimer *claimer
}

// pump hands queued holds to the confirming watchers that have room until
// the session stops.
func (tr *topicRun) pump(ss *watchSession) {
	gather := time.NewTimer(time.Hour)
	gather.Stop()
	for {
		select {
		case <-tr.kick:
		case <-tr.credit:
			// Room again; but a timer queued meanwhile may be the first
			// of a claim whose older timers are still on their way.
			select {
			case <-tr.kick:
			default:
				goto assign
			}
		case <-ss.stop:
			return
		}
		if !tr.gather(gather, ss.stop) {
			return
		}
	assign:
		for {
			done, settle := tr.assignNext()
			settle.run(tr)
			if done {
				break
			}
			// Timers queued meanwhile may be the first of a new claim:
			// gather the rest of it before choosing the next.
			select {
			case <-tr.kick:
				if !tr.gather(gather, ss.stop) {
					return
				}
			case <-ss.stop:
				return
			default:
			}
		}
	}
}

// assignNext hands the first live queued hold to the confirming watcher
// with the most room. done reports that nothing more can be handed out
// now (the queue is empty or no watcher has room).
func (tr *topicRun) assignNext() (done bool, settle settlements) {
	tr.wmu.Lock()
	defer tr.wmu.Unlock()
	for tr.queue.Len() > 0 {
		h := tr.queue[0]
		if h.state == holdResolved {
			heap.Pop(&tr.queue) // its handler gave up
			continue
		}
		if h.store != nil && !time.Now().Before(h.store.leaseEnd) {
			// Claimed, then queued past its lease: the store hands it
			// out again (to us or to another server).
			heap.Pop(&tr.queue)
			h.state = holdResolved
			settle.add(h, holdLapsed)
			continue
		}
		w := tr.roomiest()
		if w == nil {
			return true, settle
		}
		heap.Pop(&tr.queue)
		w.assign(h)
		return false, settle
	}
	return true, settle
}

// gather waits until no timer has been queued for gatherWindow, at most
// gatherMax; false if the session stopped meanwhile.
func (tr *topicRun) gather(t *time.Timer, stop <-chan struct{}) bool {
	limit := time.Now().Add(gatherMax)
	t.Reset(gatherWindow)
	for {
		select {
		case <-t.C:
			return true
		case <-tr.kick:
			// Another timer came: wait for a quiet gatherWindow again.
			t.Stop()
			d := time.Until(limit)
			if d <= 0 {
				return true
			}
			t.Reset(min(gatherWindow, d))
		case <-stop:
			t.Stop()
			return false
		}
	}
}

// signal wakes a goroutine waiting on c (buffer 1) without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
