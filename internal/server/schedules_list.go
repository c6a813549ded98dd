package server

import (
	"net/http"
	"strconv"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wire"
)

// MaxScheduleScan is the most timers of a topic GET
// /v1/topics/{topic}/schedules looks at for its recurring timers: the
// stores keep no separate list of them, so it pages through the topic's
// timers in due order (a recurring timer is always armed at its next
// tick, so a frequent schedule is near the front).
const MaxScheduleScan = 10_000

// scheduleScanPage is the page size of that walk.
const scheduleScanPage = 1000

// listSchedules answers a topic's recurring timers, each with its
// schedule, next tick, paused state and last outcome, for the dashboard.
// body_limit cuts bodies as the timer list does.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	topic, e := topicOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	bodyLimit := 0
	q := r.URL.Query()
	for k, vs := range q {
		if k != "body_limit" {
			writeError(w, errorf(http.StatusBadRequest, "invalid_query", "unknown query parameter %q (only body_limit)", k))
			return
		}
		n, err := strconv.Atoi(vs[0])
		if len(vs) != 1 || err != nil || n < 1 || n > 1<<20 {
			writeError(w, errorf(http.StatusBadRequest, "invalid_query", "body_limit: want it once, an integer from 1 to %d (bytes)", 1<<20))
			return
		}
		bodyLimit = n
	}
	out := wire.SchedulePage{Schedules: []wire.Timer{}, Complete: true}
	opts := ontime.ListOptions{Limit: scheduleScanPage}
	for {
		page, err := s.o.Client.List(r.Context(), topic, opts)
		if err != nil {
			writeError(w, s.listError(w, r, err))
			return
		}
		out.Scanned += len(page.Timers)
		for i := range page.Timers {
			if page.Timers[i].Recurring != nil {
				out.Schedules = append(out.Schedules, timerJSON(&page.Timers[i], bodyLimit))
			}
		}
		if page.NextCursor == "" {
			break
		}
		if out.Scanned >= MaxScheduleScan {
			out.Complete = false
			break
		}
		opts.Cursor = page.NextCursor
	}
	writeJSON(w, http.StatusOK, out)
}
