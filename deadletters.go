package ontime

import (
	"context"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// DeadLetterInfo is a timer that was given up on, as DeadLetters shows it.
type DeadLetterInfo struct {
	// ID is the timer id.
	ID string
	// Topic is the topic as the caller named it (without the Client's
	// prefix).
	Topic string
	// Due is the due time the timer had when it was given up on.
	Due time.Time
	// DiedAt is when the timer was moved to the dead letters.
	DiedAt time.Time
	// Attempt is the number of deliveries the timer had.
	Attempt int
	// Reason says why: "max_attempts" (the retry policy gave up),
	// "rejected" (the handler returned DeadLetter or called
	// Message.DeadLetter) or "undecodable" (the stored message does not
	// decode).
	Reason string
	// LastError is the error of the last delivery, if any.
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
}

// DeadLetterPage is a page of DeadLetters.
type DeadLetterPage struct {
	// Dead are this page's dead letters, oldest first.
	Dead []DeadLetterInfo
	// NextCursor goes into ListOptions.Cursor for the next page; empty on
	// the last page.
	NextCursor string
}

// DeadLetters lists a topic's dead letters, oldest first, paged.
func (c *Client) DeadLetters(ctx context.Context, topic string, opts ListOptions) (*DeadLetterPage, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if opts.Limit < 0 {
		return nil, invalidf("limit %d is negative", opts.Limit)
	}
	p, err := c.drv.ListDead(ctx, full, opts)
	if err != nil {
		return nil, err
	}
	out := &DeadLetterPage{Dead: make([]DeadLetterInfo, len(p.Dead)), NextCursor: p.NextCursor}
	for i := range p.Dead {
		out.Dead[i] = c.deadInfo(topic, &p.Dead[i])
	}
	return out, nil
}

// DeadLetter returns one dead letter of topic by id, with its whole body
// (ErrNotFound when topic has no dead letter with that id). A store that
// reads one dead letter by id (ontimedriver.DeadLetterGetter: the embedded
// store and Redis) answers in one call; another is paged through with
// ListDead until the id is found.
func (c *Client) DeadLetter(ctx context.Context, topic, id string) (*DeadLetterInfo, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return nil, err
	}
	if err := ontimedriver.ValidateID(id); err != nil {
		return nil, err
	}
	if g, ok := ontimedriver.As[ontimedriver.DeadLetterGetter](c.drv); ok {
		d, err := g.GetDead(ctx, full, id)
		if err != nil {
			return nil, err
		}
		info := c.deadInfo(topic, d)
		return &info, nil
	}
	opts := ListOptions{Limit: 1000}
	for {
		p, err := c.drv.ListDead(ctx, full, opts)
		if err != nil {
			return nil, err
		}
		for i := range p.Dead {
			if p.Dead[i].ID == id {
				info := c.deadInfo(topic, &p.Dead[i])
				return &info, nil
			}
		}
		if p.NextCursor == "" {
			return nil, ErrNotFound
		}
		opts.Cursor = p.NextCursor
	}
}

// deadInfo is a dead letter as DeadLetters shows it.
func (c *Client) deadInfo(topic string, d *ontimedriver.DeadLetter) DeadLetterInfo {
	m := readStored(c.lenient, d.ID, d.Payload)
	return DeadLetterInfo{
		ID: d.ID, Topic: topic, Due: d.Due, DiedAt: d.DiedAt, Attempt: d.Attempt, Reason: d.Reason, LastError: d.Error,
		CorrelationID: m.CorrelationID, ContentType: m.ContentType, Headers: m.Headers,
		Body: m.Body, DecodeError: m.DecodeError,
	}
}

// ReplayDeadLetters moves the dead letters named by ids back to scheduled,
// due at once, with their attempt counters reset. It returns how many were
// replayed; an id that is not a dead letter, or whose id is in use by a
// live timer, is skipped. An empty ids is refused with ErrInvalid and
// replays nothing (a filtered list that came out empty must not mean
// "all"): ReplayAllDeadLetters replays every one.
func (c *Client) ReplayDeadLetters(ctx context.Context, topic string, ids ...string) (int, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, invalidf("ReplayDeadLetters: no ids given; ReplayAllDeadLetters replays every dead letter of the topic")
	}
	return c.drv.ReplayDead(ctx, full, ids)
}

// ReplayAllDeadLetters moves every dead letter of the topic back to
// scheduled, as ReplayDeadLetters does, and returns how many were
// replayed.
func (c *Client) ReplayAllDeadLetters(ctx context.Context, topic string) (int, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return 0, err
	}
	return c.drv.ReplayAllDead(ctx, full)
}

// PurgeDeadLetters deletes the dead letters named by ids and returns how
// many were deleted (ids that are not dead letters are skipped). An empty
// ids is refused with ErrInvalid and deletes nothing (a filtered list that
// came out empty must not wipe the topic): PurgeAllDeadLetters deletes
// every one.
func (c *Client) PurgeDeadLetters(ctx context.Context, topic string, ids ...string) (int, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, invalidf("PurgeDeadLetters: no ids given; PurgeAllDeadLetters deletes every dead letter of the topic")
	}
	return c.drv.PurgeDead(ctx, full, ids)
}

// PurgeAllDeadLetters deletes every dead letter of the topic and returns
// how many there were.
func (c *Client) PurgeAllDeadLetters(ctx context.Context, topic string) (int, error) {
	full, err := c.fullTopic(topic)
	if err != nil {
		return 0, err
	}
	return c.drv.PurgeAllDead(ctx, full)
}
