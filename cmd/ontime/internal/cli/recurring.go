package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontime-go/ontime/internal/wire"
)

// recurringFlags are schedule's flags for a recurring timer.
type recurringFlags struct {
	every, from, cron, tz, missed, jitter string
}

func (f *recurringFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.every, "every", "", "a recurring timer every DURATION (e.g. 5m, 1h); needs --id")
	fl.StringVar(&f.from, "from", "", "with --every: the first tick, RFC 3339 (default: ticks on multiples of the interval since the Unix epoch)")
	fl.StringVar(&f.cron, "cron", "", `a recurring timer on a cron expression ("0 9 * * MON-FRI", 6 fields with seconds first, @daily...); needs --id`)
	fl.StringVar(&f.tz, "tz", "", "with --cron: an IANA time zone (default UTC)")
	fl.StringVar(&f.missed, "missed", "", `with --every or --cron: missed ticks "once" (default) or "each:N"`)
	fl.StringVar(&f.jitter, "jitter", "", "with --every or --cron: spread each tick over this window after it (e.g. 30s)")
}

// check refuses flags that do not go together.
func (f *recurringFlags) check(id string) error {
	recurring := f.every != "" || f.cron != ""
	switch {
	case f.from != "" && f.every == "":
		return usageErr("--from goes with --every")
	case f.tz != "" && f.cron == "":
		return usageErr("--tz goes with --cron")
	case !recurring && (f.missed != "" || f.jitter != ""):
		return usageErr("--missed and --jitter go with --every or --cron")
	case recurring && id == "":
		return usageErr("a recurring timer needs --id (scheduling the id again replaces it)")
	}
	return nil
}

// publish posts t as a recurring timer and prints the answer.
func (f *recurringFlags) publish(cmd *cobra.Command, e *env, c *apiClient, o clientOpts, topic string, t *wire.TimerIn) error {
	in := wire.ScheduleIn{
		ID: t.ID, Every: f.every, From: f.from, Cron: f.cron, TZ: f.tz, Missed: f.missed,
		Body: t.Body, Headers: t.Headers, CorrelationID: t.CorrelationID, IfAbsent: t.IfAbsent,
	}
	if f.jitter != "" {
		in.Jitter = &f.jitter
	}
	var out wire.ScheduleCreated
	if err := c.do(cmd.Context(), http.MethodPost, topicPath(topic)+"/schedules", in, &out); err != nil {
		return err
	}
	if o.json {
		return printJSON(e.stdout, out)
	}
	fmt.Fprintf(e.stdout, "%s\t%s\tfirst tick due %s UTC (%s)\n", out.ID, out.Schedule, humanTime(out.DueAt), relative(out.DueAt))
	return nil
}

// scheduleColumn is ls's SCHEDULE column: the spec and the tick a
// recurring timer stands for, "-" for a plain timer.
func scheduleColumn(r *wire.Recurring) string {
	if r == nil {
		return "-"
	}
	s := fmt.Sprintf("%s #%d", r.Schedule, r.Tick)
	if r.Paused {
		s += " (paused)"
	}
	return s
}

// newPauseCmd is `ontime pause` (pause true) or `ontime resume`.
func newPauseCmd(e *env, pause bool) *cobra.Command {
	var o clientOpts
	verb, short := "resume", "Resume a paused recurring timer: its next tick is the first after now (exit 3 if there is none)"
	if pause {
		verb, short = "pause", "Pause a recurring timer: no tick of it runs until resume (exit 3 if there is none)"
	}
	cmd := &cobra.Command{
		Use:   verb + " TOPIC ID",
		Short: short,
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			var t wire.Timer
			if err := c.do(cmd.Context(), http.MethodPost, topicPath(a[0])+"/timers/"+url.PathEscape(a[1])+"/"+verb, nil, &t); err != nil {
				return err
			}
			if o.json {
				return printJSON(e.stdout, t)
			}
			next := ""
			if t.Recurring != nil && !t.Recurring.Paused {
				next = fmt.Sprintf(" (next tick %s UTC)", humanTime(t.Recurring.TickAt))
			}
			fmt.Fprintf(e.stdout, "%sd %s%s\n", verb, newOutput(e, false).s(a[1]), next)
			return nil
		},
	}
	addClientFlags(cmd, &o)
	return cmd
}

// newBackfillCmd is `ontime backfill`.
func newBackfillCmd(e *env) *cobra.Command {
	var (
		o        clientOpts
		from, to string
	)
	cmd := &cobra.Command{
		Use:   "backfill TOPIC ID --from RFC3339 [--to RFC3339]",
		Short: "Run the ticks of a recurring timer in (from, to] once each (exit 3 if there is no such recurring timer)",
		Long: `Run the ticks of a recurring timer in a past range, each once: each becomes a
one-shot timer due now, named ID@TICK, with the tick's instant in header
ontime-tick; running the same backfill again while they are pending
publishes none twice (once delivered, they run again). --to defaults to
now. At most 500 ticks per call.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if from == "" {
				return usageErr("--from is required")
			}
			if to == "" {
				to = time.Now().UTC().Format(time.RFC3339Nano)
			}
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			var out wire.Backfilled
			if err := c.do(cmd.Context(), http.MethodPost, topicPath(a[0])+"/timers/"+url.PathEscape(a[1])+"/backfill", wire.BackfillIn{From: from, To: to}, &out); err != nil {
				return err
			}
			if o.json {
				return printJSON(e.stdout, out)
			}
			fmt.Fprintf(e.stdout, "%d ticks: %d published, %d already backfilled\n", out.Ticks, out.Published, out.Existing)
			return nil
		},
	}
	addClientFlags(cmd, &o)
	cmd.Flags().StringVar(&from, "from", "", "the range's start (excluded), RFC 3339")
	cmd.Flags().StringVar(&to, "to", "", "the range's end (included), RFC 3339; default now")
	return cmd
}
