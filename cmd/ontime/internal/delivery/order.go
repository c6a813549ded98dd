package delivery

import (
	"container/heap"
	"errors"
	"sync/atomic"
	"time"
)

// Watchers see a topic's timers in due order. The worker runs up to
// Concurrency handlers at once, so the timers of one claim (a backlog, or
// timers due within the same instant) reach the handler in any order. While
// someone watches, each handler queues its timer here instead; a pump takes
// them out by (due time, id) and hands them to the watchers one at a time,
// after a gathering pause so that the timers of one claim are all queued
// before the first goes out: the pump waits until no timer has been queued
// for gatherWindow (handlers of one claim start within microseconds of each
// other, but a loaded machine can delay a goroutine by milliseconds), at
// most gatherMax.

// gatherWindow is the quiet time that ends a gathering pause; gatherMax
// bounds the pause.
const (
	gatherWindow = 5 * time.Millisecond
	gatherMax    = 100 * time.Millisecond
)

// errNobody tells a handler that the last watcher left before its timer was
// handed out: the topic's target takes it.
var errNobody = errors.New("delivery: no watcher")

// itemHeap orders queued items by due time, then id.
type itemHeap []*Item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	a, b := h[i].Msg, h[j].Msg
	if !a.Due.Equal(b.Due) {
		return a.Due.Before(b.Due)
	}
	return a.ID < b.ID
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(*Item)) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

// abandon marks an item whose handler gave up (lease lost, shutdown): the
// pump drops it instead of handing it out.
func (it *Item) abandon() { it.abandoned.Store(true) }

type itemState struct {
	abandoned atomic.Bool
}

// enqueue queues it for the watchers. It returns false when nobody watches
// (the caller delivers to the target).
func (tr *topicRun) enqueue(it *Item) bool {
	tr.wmu.Lock()
	defer tr.wmu.Unlock()
	if tr.watch == 0 {
		return false
	}
	heap.Push(&tr.queue, it)
	select {
	case tr.kick <- struct{}{}:
	default:
	}
	return true
}

// next takes the first queued item that is not abandoned.
func (tr *topicRun) next() *Item {
	tr.wmu.Lock()
	defer tr.wmu.Unlock()
	for tr.queue.Len() > 0 {
		it := heap.Pop(&tr.queue).(*Item)
		if !it.abandoned.Load() {
			return it
		}
	}
	return nil
}

// pump hands queued items to the watchers until nobody is closed (the last
// watcher of this session left). Then, unless a new watcher came meanwhile
// (and with it a new pump), it sends every queued item back to its handler,
// which delivers it to the target.
func (tr *topicRun) pump(nobody <-chan struct{}) {
	defer func() {
		tr.wmu.Lock()
		defer tr.wmu.Unlock()
		if tr.watch > 0 {
			return
		}
		for tr.queue.Len() > 0 {
			heap.Pop(&tr.queue).(*Item).Done(errNobody)
		}
	}()
	gather := time.NewTimer(time.Hour)
	gather.Stop()
	for {
		select {
		case <-tr.kick:
		case <-nobody:
			return
		}
		if !tr.gather(gather, nobody) {
			return
		}
		for it := tr.next(); it != nil; it = tr.next() {
			select {
			case tr.watchCh <- it:
			case <-nobody:
				it.Done(errNobody)
				return
			}
			// Timers queued while that one waited for a watcher may be
			// the first of a new claim: gather the rest of it before
			// choosing the next.
			select {
			case <-tr.kick:
				if !tr.gather(gather, nobody) {
					return
				}
			default:
			}
		}
	}
}

// gather waits until no timer has been queued for gatherWindow, at most
// gatherMax; false if the last watcher left meanwhile.
func (tr *topicRun) gather(t *time.Timer, nobody <-chan struct{}) bool {
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
		case <-nobody:
			t.Stop()
			return false
		}
	}
}
