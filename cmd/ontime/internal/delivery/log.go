package delivery

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/internal/wire"
)

// LogTarget writes one structured log line per message: the default
// target, so that a new user sees timers fire.
type LogTarget struct {
	Log *slog.Logger
}

// Kind implements Target.
func (t *LogTarget) Kind() string { return config.TargetLog }

// maxLoggedBody caps the body text in a log line.
const maxLoggedBody = 1024

// Deliver implements Target.
func (t *LogTarget) Deliver(ctx context.Context, m *Message) error {
	body := wire.TextOf(m.Body)
	if len(body) > maxLoggedBody {
		body = strings.ToValidUTF8(body[:maxLoggedBody], "") + "…"
	}
	t.Log.LogAttrs(ctx, slog.LevelInfo, "timer fired",
		slog.String("topic", m.Topic),
		slog.String("id", m.ID),
		slog.String("due_at", m.Due.UTC().Format(time.RFC3339Nano)),
		slog.Duration("late", time.Since(m.Due).Round(time.Millisecond)),
		slog.Int("attempt", m.Attempt),
		slog.String("body", body),
	)
	return nil
}
