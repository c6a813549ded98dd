package ontime

import (
	"context"
	"strings"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// State is where a timer is.
type State = ontimedriver.State

// Timer states.
const (
	// StateScheduled is a timer waiting for its due time (or due and not
	// yet claimed).
	StateScheduled = ontimedriver.StateScheduled
	// StateLeased is a timer a worker has claimed and holds until its
	// lease deadline.
	StateLeased = ontimedriver.StateLeased
)

// TimerInfo is a stored timer as Get and List show it.
type TimerInfo struct {
	// ID is the timer id.
	ID string
	// Topic is the topic as the caller named it (without the Client's
	// prefix).
	Topic string
	// Due is the time the timer is scheduled for.
	Due time.Time
	// State is StateScheduled or StateLeased.
	State State
	// LeaseUntil is the lease deadline while a worker holds the timer.
	LeaseUntil time.Time
	// Attempt counts deliveries since the timer was (re)scheduled.
	Attempt int
	// LastError is the error of the last failed delivery, if any.
	LastError string
	// CorrelationID is the envelope's correlation id (the timer id when the
	// envelope has none).
	CorrelationID string
	// ContentType is the envelope's content type (ontime writes
	// "text/plain" for text, "application/json" for JSON, none for bytes).
	ContentType string
	// Headers holds the user headers (not correlation_id or content-type).
	Headers map[string]string
	// Body is the message body.
	Body []byte
	// DecodeError is set when the stored envelope does not decode; Body
	// then holds the raw stored bytes.
	DecodeError string
	// Recurring is a recurring timer's schedule, next tick and last
	// outcome (nil for a plain timer). Due is then its next tick's due
	// time.
	Recurring *RecurringInfo
}

// info is a stored timer as Get and List show it.
func (c *Client) info(topic string, ti *ontimedriver.TimerInfo) TimerInfo {
	m := readStored(c.lenient, ti.ID, ti.Payload)
	return TimerInfo{
		ID: ti.ID, Topic: topic, Due: ti.Due, State: ti.State, LeaseUntil: ti.LeaseUntil,
		Attempt: ti.Attempt, LastError: ti.LastError,
		CorrelationID: m.CorrelationID, ContentType: m.ContentType, Headers: m.Headers,
		Body: m.Body, DecodeError: m.DecodeError, Recurring: recurringInfo(ti.Recurring),
	}
}

// Get returns one scheduled or leased timer, or ErrNotFound.
func (c *Client) Get(ctx context.Context, topic, id string) (*TimerInfo, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if err := ontimedriver.ValidateID(id); err != nil {
		return nil, err
	}
	ti, err := c.drv.Get(ctx, full, id)
	if err != nil {
		return nil, err
	}
	info := c.info(topic, ti)
	return &info, nil
}

// ListOptions pages List and DeadLetters.
type ListOptions = ontimedriver.ListOptions

// TimerPage is a page of List.
type TimerPage struct {
	// Timers are this page's timers, in due order.
	Timers []TimerInfo
	// NextCursor goes into ListOptions.Cursor for the next page; empty on
	// the last page.
	NextCursor string
}

// List returns a topic's timers ordered by when they become due (a leased
// timer by its lease deadline), paged.
func (c *Client) List(ctx context.Context, topic string, opts ListOptions) (*TimerPage, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if opts.Limit < 0 {
		return nil, invalidf("limit %d is negative", opts.Limit)
	}
	p, err := c.drv.List(ctx, full, opts)
	if err != nil {
		return nil, err
	}
	out := &TimerPage{Timers: make([]TimerInfo, len(p.Timers)), NextCursor: p.NextCursor}
	for i := range p.Timers {
		out.Timers[i] = c.info(topic, &p.Timers[i])
	}
	return out, nil
}

// RecurringPage is a page of ListRecurring.
type RecurringPage struct {
	// Timers are this page's recurring timers (each with Recurring set):
	// by id when the store lists recurring timers, else in due order.
	Timers []TimerInfo
	// NextCursor goes into ListOptions.Cursor for the next page; empty on
	// the last page.
	NextCursor string
	// Scanned counts the timers this page read from the store: the
	// recurring ones when the store lists them, every timer walked in the
	// fallback.
	Scanned int
}

// recurringScanPages bounds the List pages one ListRecurring call reads
// when the store cannot list recurring timers.
const recurringScanPages = 10

// ListRecurring returns a page of topic's recurring timers (see
// PublishRecurring), each as Get shows it, with its schedule, next tick,
// paused state and last outcome; plain timers are left out. Page through
// with ListOptions.Cursor and Limit (0 means 100, at most 1000;
// ListOptions.Before does not apply and must be zero) until NextCursor is
// empty: the pages then held every schedule present for the whole walk,
// once.
//
// A store that lists recurring timers (ontimedriver.RecurringLister: the
// native Redis layout and the embedded store) answers a page in one call
// whose cost grows with the topic's schedules (the store's, in the
// embedded store), never with its plain timers: the timers come by id.
// With another store ListRecurring falls back to walking the topic's
// timers in due order, at most 10 List pages of Limit timers per call,
// and returns the recurring ones of the first page that has any: a page
// may then hold fewer than Limit timers, or none, before the last
// (Scanned tells how many timers it read). A store that keeps no
// recurring timers (the faststream-compatible layout) returns an error
// wrapping ErrUnsupported.
func (c *Client) ListRecurring(ctx context.Context, topic string, opts ListOptions) (*RecurringPage, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if opts.Limit < 0 {
		return nil, invalidf("limit %d is negative", opts.Limit)
	}
	if !opts.Before.IsZero() {
		return nil, invalidf("ListRecurring: Before does not apply")
	}
	if _, err := c.recurring(); err != nil {
		return nil, err
	}
	limit := ontimedriver.RecurringPageLimit(opts.Limit)
	out := &RecurringPage{Timers: []TimerInfo{}}
	if l, ok := ontimedriver.RecurringListerOf(c.drv); ok {
		start := time.Now()
		p, err := l.ListRecurring(ctx, full, opts.Cursor, limit)
		reportStoreCall(ctx, c.drv, "list_recurring", full, start, err)
		if err != nil {
			return nil, err
		}
		out.NextCursor, out.Scanned = p.NextCursor, len(p.Timers)
		for i := range p.Timers {
			out.Timers = append(out.Timers, c.info(topic, &p.Timers[i]))
		}
		return out, nil
	}
	lo := ListOptions{Limit: limit, Cursor: opts.Cursor}
	for range recurringScanPages {
		p, err := c.drv.List(ctx, full, lo)
		if err != nil {
			return nil, err
		}
		out.Scanned += len(p.Timers)
		for i := range p.Timers {
			if p.Timers[i].Recurring != nil {
				out.Timers = append(out.Timers, c.info(topic, &p.Timers[i]))
			}
		}
		out.NextCursor = p.NextCursor
		if p.NextCursor == "" || len(out.Timers) > 0 {
			break
		}
		lo.Cursor = p.NextCursor
	}
	return out, nil
}

// Counts counts a topic's timers by state.
type Counts = ontimedriver.Counts

// Count counts a topic's timers.
func (c *Client) Count(ctx context.Context, topic string) (Counts, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return Counts{}, err
	}
	return c.drv.Count(ctx, full)
}

// CountDue counts a topic's timers by when they become due (a leased timer
// by its lease deadline, as List orders them), between consecutive bounds:
// the result has len(bounds)+1 counts, [0] the timers due before
// bounds[0] (overdue ones, when bounds[0] is now), [i] those due in
// [bounds[i-1], bounds[i]), and the last those due at or after the last
// bound. It reads the store's due index only, in one round trip, so it is
// how a dashboard draws "how many fall due per minute" without loading the
// timers. bounds must be strictly increasing, 1 to
// ontimedriver.MaxDueBounds of them (ErrInvalid otherwise).
func (c *Client) CountDue(ctx context.Context, topic string, bounds []time.Time) ([]int64, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if err := ontimedriver.ValidateDueBounds(bounds); err != nil {
		return nil, err
	}
	return c.drv.CountDue(ctx, full, bounds)
}

// Topics lists the topics under the Client's prefix that hold timers or
// dead letters, without the prefix, sorted.
func (c *Client) Topics(ctx context.Context) ([]string, error) {
	all, err := c.drv.Topics(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0:0]
	for _, t := range all {
		if rest, ok := strings.CutPrefix(t, c.prefix); ok && rest != "" {
			out = append(out, rest)
		}
	}
	return out, nil
}
