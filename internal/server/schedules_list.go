package server

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wire"
)

// MaxScheduleScan is the most timers one answer of GET
// /v1/topics/{topic}/schedules reads from the store. A store that lists
// recurring timers (ontimedriver.RecurringLister: the native Redis layout
// and the embedded store) reads the schedules alone, so the answer is
// complete up to this many schedules, whatever the number of plain
// timers; past it the answer carries next_cursor. With another store
// Client.ListRecurring walks the topic's timers in due order, and the
// answer holds the recurring ones among the first MaxScheduleScan timers
// walked.
const MaxScheduleScan = 10_000

// scheduleScanPage is the page size of that walk.
const scheduleScanPage = 1000

// listSchedules answers a topic's recurring timers, each with its
// schedule, next tick, paused state and last outcome, for the dashboard,
// in due order. body_limit cuts bodies as the timer list does; cursor
// (next_cursor of an answer that was not complete) goes on from where
// that answer stopped.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	bodyLimit := 0
	opts := ontime.ListOptions{Limit: scheduleScanPage}
	q := r.URL.Query()
	for k, vs := range q {
		if len(vs) != 1 || vs[0] == "" {
			writeError(w, errorf(http.StatusBadRequest, "invalid_query", "%s: give it once, not empty", k))
			return
		}
		switch k {
		case "body_limit":
			n, err := strconv.Atoi(vs[0])
			if err != nil || n < 1 || n > 1<<20 {
				writeError(w, errorf(http.StatusBadRequest, "invalid_query", "body_limit: want it once, an integer from 1 to %d (bytes)", 1<<20))
				return
			}
			bodyLimit = n
		case "cursor":
			opts.Cursor = vs[0]
		default:
			writeError(w, errorf(http.StatusBadRequest, "invalid_query", "unknown query parameter %q (only body_limit and cursor)", k))
			return
		}
	}
	out := wire.SchedulePage{Schedules: []wire.Timer{}, Complete: true}
	var found []ontime.TimerInfo
	for {
		page, err := s.o.Client.ListRecurring(r.Context(), topic, opts)
		if errors.Is(err, ontime.ErrUnsupported) {
			break // a store that keeps no recurring timers: none to list
		}
		if err != nil {
			writeError(w, s.listError(w, r, err))
			return
		}
		out.Scanned += page.Scanned
		found = append(found, page.Timers...)
		if page.NextCursor == "" {
			break
		}
		if out.Scanned >= MaxScheduleScan {
			out.Complete, out.NextCursor = false, page.NextCursor
			break
		}
		opts.Cursor = page.NextCursor
	}
	// next tick first; a paused schedule by its held tick's due time
	slices.SortStableFunc(found, func(a, b ontime.TimerInfo) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.ID, b.ID))
	})
	for i := range found {
		out.Schedules = append(out.Schedules, timerJSON(&found[i], bodyLimit))
	}
	writeJSON(w, http.StatusOK, out)
}
