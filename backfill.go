package ontime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/ontime-go/ontime/schedule"
)

// MaxBackfill is the most ticks one Backfill call runs: they are written
// in one atomic store call (BatchChunkSize). Split a longer range.
const MaxBackfill = BatchChunkSize

// TickHeader is the header that carries a backfilled tick's scheduled
// instant (RFC 3339 with nanoseconds, UTC): a backfilled tick is a one-shot
// timer, so its Message.Tick is zero.
const TickHeader = "ontime-tick"

// BackfillID is the id of the one-shot timer that runs the tick at instant
// tick of the recurring timer id: id + "@" + the instant in RFC 3339 with
// nanoseconds, UTC.
func BackfillID(id string, tick time.Time) string {
	return id + "@" + tick.UTC().Format(time.RFC3339Nano)
}

// BackfillResult is what Backfill did.
type BackfillResult struct {
	// Ticks are the schedule's instants in (from, to], oldest first.
	Ticks []time.Time
	// Published counts the ticks published now, Existing those whose
	// timer was pending already (an earlier backfill of the range whose
	// ticks have not run yet).
	Published, Existing int
}

// Backfill runs the ticks of the recurring timer id of topic whose
// instants are in the past range (from, to], each once, on demand: each
// becomes a one-shot timer due now, with the recurring timer's body,
// headers and correlation id, the tick's instant in header TickHeader,
// and the id BackfillID(id, instant), published if absent. Running the
// same backfill again while its ticks are pending publishes none of them
// twice (BackfillResult.Existing); a tick already delivered is gone, and
// a backfill run after it runs it again. The recurring timer itself is
// left alone: its own next tick stays armed.
//
// to must be after from and not in the future (a tick never runs before
// its instant), and the range must hold at most MaxBackfill ticks; the
// error then wraps ErrInvalid. ErrNotFound when topic has no recurring
// timer id. A body that is neither text, JSON nor raw bytes (another
// content type, written by another publisher) is published as raw bytes,
// without its content type.
func (c *Client) Backfill(ctx context.Context, topic, id string, from, to time.Time) (BackfillResult, error) {
	switch {
	case !to.After(from):
		return BackfillResult{}, invalidf("Backfill: to %s is not after from %s", to.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
	case to.After(time.Now()):
		return BackfillResult{}, invalidf("Backfill: to %s is in the future: a tick never runs before its instant", to.Format(time.RFC3339Nano))
	}
	ti, err := c.Get(ctx, topic, id)
	if err != nil {
		return BackfillResult{}, err
	}
	if ti.Recurring == nil {
		return BackfillResult{}, fmt.Errorf("Backfill: %s is not a recurring timer: %w", id, ErrNotFound)
	}
	if ti.DecodeError != "" {
		return BackfillResult{}, fmt.Errorf("Backfill: the recurring timer's stored envelope does not decode: %s", ti.DecodeError)
	}
	sched, err := schedule.Parse(ti.Recurring.Schedule)
	if err != nil {
		return BackfillResult{}, fmt.Errorf("Backfill: %w", err)
	}
	ticks := schedule.Missed(sched, from, to, MaxBackfill+1)
	if len(ticks) > MaxBackfill {
		return BackfillResult{}, invalidf("Backfill: (%s, %s] holds more than %d ticks (one atomic write): split it", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano), MaxBackfill)
	}
	out := BackfillResult{Ticks: ticks}
	if len(ticks) == 0 {
		return out, nil
	}
	body := storedBody(ti.ContentType, ti.Body)
	timers := make([]Timer, len(ticks))
	for i, tick := range ticks {
		h := maps.Clone(ti.Headers)
		if h == nil {
			h = map[string]string{}
		}
		h[TickHeader] = tick.UTC().Format(time.RFC3339Nano)
		timers[i] = Timer{ID: BackfillID(id, tick), Body: body, Headers: h, CorrelationID: ti.CorrelationID}
	}
	res, err := c.PublishBatch(ctx, topic, timers, BatchIfAbsent())
	if err != nil {
		return out, err
	}
	for _, r := range res {
		switch {
		case r.Err == nil:
			out.Published++
		case errors.Is(r.Err, ErrExists):
			out.Existing++
		default:
			return out, r.Err
		}
	}
	return out, nil
}

// storedBody is a stored body as Timer.Body republishes it with the same
// content type: text as a string, JSON as a json.RawMessage, raw bytes as
// they are.
func storedBody(contentType string, body []byte) any {
	switch {
	case len(body) == 0:
		return nil
	case strings.HasPrefix(contentType, "application/json"):
		return json.RawMessage(body)
	case strings.HasPrefix(contentType, "text/plain"):
		return string(body)
	}
	return body
}
