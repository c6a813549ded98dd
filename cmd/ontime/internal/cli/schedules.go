package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/internal/wire"
)

// applySchedules creates or updates the recurring timers declared in the
// configuration ([[schedules]]): one that exists with the same schedule,
// policies, body and headers is left alone (its next tick and tick numbers
// stay), so that any number of servers can start with the same file; one
// that is missing or differs is published (upsert). Config.Validate has
// checked the declarations.
func applySchedules(ctx context.Context, c *ontime.Client, decl []config.Schedule, log *slog.Logger) error {
	for i := range decl {
		d := &decl[i]
		in := d.In()
		sched, err := wire.ScheduleOf(in)
		if err != nil {
			return fmt.Errorf("schedules[%d]: %w", i, err)
		}
		missed, err := wire.MissedOf(d.Missed)
		if err != nil {
			return fmt.Errorf("schedules[%d]: %w", i, err)
		}
		var jitter time.Duration
		if in.Jitter != nil {
			if jitter, err = wire.JitterOf(*in.Jitter); err != nil {
				return fmt.Errorf("schedules[%d]: %w", i, err)
			}
		}
		ti, err := c.Get(ctx, d.Topic, d.ID)
		switch {
		case err == nil && sameSchedule(ti, sched.String(), missed, jitter, d):
			log.Debug("declared schedule unchanged", "topic", d.Topic, "id", d.ID, "schedule", sched.String())
			continue
		case err != nil && !errors.Is(err, ontime.ErrNotFound):
			return fmt.Errorf("schedules[%d] (topic %q, id %q): %w", i, d.Topic, d.ID, err)
		}
		opts := []ontime.PublishOption{ontime.OnMissed(missed)}
		if jitter > 0 {
			opts = append(opts, ontime.Jitter(jitter))
		}
		if len(d.Headers) > 0 {
			opts = append(opts, ontime.WithHeaders(d.Headers))
		}
		due, err := c.PublishRecurring(ctx, d.Topic, d.ID, sched, d.Body, opts...)
		if err != nil {
			return fmt.Errorf("schedules[%d] (topic %q, id %q): %w", i, d.Topic, d.ID, err)
		}
		what := "created"
		if ti != nil {
			what = "updated"
		}
		log.Info("declared schedule "+what, "topic", d.Topic, "id", d.ID, "schedule", sched.String(), "first_tick_due", due.UTC())
	}
	return nil
}

// sameSchedule reports whether a stored timer is the declared recurring
// timer already.
func sameSchedule(ti *ontime.TimerInfo, spec string, missed ontime.MissedPolicy, jitter time.Duration, d *config.Schedule) bool {
	r := ti.Recurring
	if r == nil || r.Schedule != spec || r.Missed != missed || r.Jitter != jitter || string(ti.Body) != d.Body {
		return false
	}
	if len(ti.Headers) == 0 && len(d.Headers) == 0 {
		return true
	}
	return maps.Equal(ti.Headers, d.Headers)
}
