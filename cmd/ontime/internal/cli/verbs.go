package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontime-go/ontime/internal/wire"
)

// humanTime prints an instant for people: UTC, to the second.
func humanTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

// relative says "in 4m59s" or "3s ago".
func relative(t time.Time) string {
	d := time.Until(t).Round(time.Second)
	if d >= 0 {
		return "in " + d.String()
	}
	return (-d).String() + " ago"
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		_, err := fmt.Fprintln(w, string(raw))
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newScheduleCmd(e *env) *cobra.Command {
	var (
		o        clientOpts
		in, at   string
		id, corr string
		headers  []string
		ifAbsent bool
		asJSON   bool
		rec      recurringFlags
	)
	cmd := &cobra.Command{
		Use:   "schedule TOPIC BODY (--in DURATION | --at RFC3339 | --every DURATION | --cron EXPR)",
		Short: "Schedule a message, once or on a schedule (BODY - reads standard input)",
		Long: `Schedule a message: once (--in, --at), or as a recurring timer that fires
once per tick across every worker (--every, --cron; --id names it, and
scheduling the id again replaces it). See docs/recurring.md.`,
		Example: `  ontime schedule reminders "call Bob" --in 90s
  ontime schedule invoices '{"id":42}' --json-body --at 2026-12-01T09:00:00Z --id invoice-42
  ontime schedule reports "sales report" --id weekday-report --cron "0 9 * * MON-FRI" --tz Europe/Berlin
  ontime schedule pings ping --id heartbeat --every 5m --jitter 30s --missed each:3`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			topic, body := a[0], a[1]
			n := 0
			for _, v := range []string{in, at, rec.every, rec.cron} {
				if v != "" {
					n++
				}
			}
			if n != 1 {
				return usageErr("give exactly one of --in, --at, --every and --cron")
			}
			if e := rec.check(id); e != nil {
				return e
			}
			if body == "-" {
				b, err := io.ReadAll(e.stdin)
				if err != nil {
					return err
				}
				body = string(b)
			}
			t := wire.TimerIn{ID: id, CorrelationID: corr, IfAbsent: ifAbsent}
			switch {
			case in != "":
				t.Delay = &in
			case at != "":
				t.At = &at
			}
			if asJSON {
				if !json.Valid([]byte(body)) {
					return usageErr("--json-body: BODY is not valid JSON")
				}
				t.Body = json.RawMessage(body)
			} else {
				b, _ := json.Marshal(body)
				t.Body = b
			}
			for _, h := range headers {
				k, v, ok := strings.Cut(h, "=")
				if !ok || k == "" {
					return usageErr("--header %q: want key=value", h)
				}
				if t.Headers == nil {
					t.Headers = map[string]string{}
				}
				t.Headers[k] = v
			}
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			if rec.every != "" || rec.cron != "" {
				return rec.publish(cmd, e, c, o, topic, &t)
			}
			var out wire.Created
			if err := c.do(cmd.Context(), http.MethodPost, topicPath(topic)+"/timers", t, &out); err != nil {
				return err
			}
			if o.json {
				return printJSON(e.stdout, out)
			}
			fmt.Fprintf(e.stdout, "%s\tdue %s UTC (%s)\n", out.ID, humanTime(out.DueAt), relative(out.DueAt))
			return nil
		},
	}
	addClientFlags(cmd, &o)
	f := cmd.Flags()
	f.StringVar(&in, "in", "", "delay from now, e.g. 90s, 1h30m")
	f.StringVar(&at, "at", "", "due instant, RFC 3339 with a zone, e.g. 2026-11-22T10:15:03Z")
	f.StringVar(&id, "id", "", "timer id (default: a random UUID); an existing id is rescheduled")
	f.StringVar(&corr, "correlation-id", "", "correlation id (default: the timer id)")
	f.StringArrayVar(&headers, "header", nil, "header key=value (repeatable)")
	f.BoolVar(&ifAbsent, "if-absent", false, "fail (exit 4) if the id exists")
	f.BoolVar(&asJSON, "json-body", false, "BODY is JSON, not text")
	rec.add(cmd)
	return cmd
}

func newFireCmd(e *env) *cobra.Command {
	var o clientOpts
	cmd := &cobra.Command{
		Use:   "fire TOPIC ID",
		Short: "Make a scheduled timer due now (exit 3 if there is none, 4 while it is being delivered)",
		Long: `Make a scheduled timer due now: its due time becomes the store's now, its
body, headers, attempt count and last error are kept, and the next claim
delivers it. A timer already due keeps its due time. A timer being
delivered is left alone (exit 4, leased).`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			var raw json.RawMessage
			if err := c.do(cmd.Context(), http.MethodPost, topicPath(a[0])+"/timers/"+url.PathEscape(a[1])+"/fire", nil, &raw); err != nil {
				return err
			}
			if o.json {
				return printJSON(e.stdout, raw)
			}
			var r wire.Created
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "fired %s (due %s)\n", newOutput(e, false).s(a[1]), humanTime(r.DueAt))
			return nil
		},
	}
	addClientFlags(cmd, &o)
	return cmd
}

func newGetCmd(e *env) *cobra.Command {
	var (
		o   clientOpts
		raw bool
	)
	cmd := &cobra.Command{
		Use:   "get TOPIC ID",
		Short: "Show a timer (exit 3 if there is none)",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			var data json.RawMessage
			if err := c.do(cmd.Context(), http.MethodGet, topicPath(a[0])+"/timers/"+url.PathEscape(a[1]), nil, &data); err != nil {
				return err
			}
			if o.json {
				return printJSON(e.stdout, data)
			}
			var t wire.Timer
			if err := json.Unmarshal(data, &t); err != nil {
				return err
			}
			out := newOutput(e, raw)
			w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "id:\t%s\n", out.s(t.ID))
			fmt.Fprintf(w, "topic:\t%s\n", out.s(t.Topic))
			fmt.Fprintf(w, "due:\t%s UTC (%s)\n", humanTime(t.DueAt), relative(t.DueAt))
			fmt.Fprintf(w, "state:\t%s\n", t.State)
			fmt.Fprintf(w, "attempt:\t%d\n", t.Attempt)
			if r := t.Recurring; r != nil {
				fmt.Fprintf(w, "schedule:\t%s\n", r.Schedule)
				fmt.Fprintf(w, "missed ticks:\t%s\n", r.Missed)
				if r.Jitter != "" {
					fmt.Fprintf(w, "jitter:\t%s\n", r.Jitter)
				}
				fmt.Fprintf(w, "tick:\t%d at %s UTC\n", r.Tick, humanTime(r.TickAt))
				if r.Paused {
					fmt.Fprintf(w, "paused:\tyes\n")
				}
				if r.LastTick > 0 {
					fmt.Fprintf(w, "last tick:\t%d (%s)\n", r.LastTick, r.LastOutcome)
				}
			}
			if t.LeaseUntil != nil {
				fmt.Fprintf(w, "lease until:\t%s UTC\n", humanTime(*t.LeaseUntil))
			}
			if t.LastError != "" {
				fmt.Fprintf(w, "last error:\t%s\n", out.s(t.LastError))
			}
			fmt.Fprintf(w, "correlation id:\t%s\n", out.s(t.CorrelationID))
			keys := make([]string, 0, len(t.Headers))
			for k := range t.Headers {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "header:\t%s=%s\n", out.s(k), out.s(t.Headers[k]))
			}
			if t.ContentType != "" {
				fmt.Fprintf(w, "content type:\t%s\n", out.s(t.ContentType))
			}
			fmt.Fprintf(w, "body:\t%s\n", out.s(bodyText(t.ContentType, t.Body, t.BodyBase64)))
			return w.Flush()
		},
	}
	addClientFlags(cmd, &o)
	addRawFlag(cmd, &raw)
	return cmd
}

// addRawFlag adds --raw to a verb that prints stored data.
func addRawFlag(cmd *cobra.Command, raw *bool) {
	cmd.Flags().BoolVar(raw, "raw", false, "print ids, bodies and headers as they are even on a terminal (by default control characters are escaped there, e.g. \\x1b)")
}

// bodyText renders a body field for a table or a watch line.
func bodyText(ct string, body json.RawMessage, b64 *string) string {
	ev := wire.Event{ContentType: ct, Body: body, BodyBase64: b64}
	b, err := ev.BodyBytes()
	if err != nil {
		return string(body)
	}
	return wire.TextOf(b)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func newLsCmd(e *env) *cobra.Command {
	var (
		o      clientOpts
		limit  int
		before string
		cursor string
		raw    bool
	)
	cmd := &cobra.Command{
		Use:   "ls [TOPIC]",
		Short: "List topics, or a topic's timers by due time",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			out := newOutput(e, raw)
			if len(a) == 0 {
				var data json.RawMessage
				if err := c.do(cmd.Context(), http.MethodGet, "/v1/topics", nil, &data); err != nil {
					return err
				}
				if o.json {
					return printJSON(e.stdout, data)
				}
				var ts []wire.TopicStats
				if err := json.Unmarshal(data, &ts); err != nil {
					return err
				}
				w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TOPIC\tSCHEDULED\tLEASED\tDEAD")
				for _, t := range ts {
					fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", out.s(t.Topic), t.Scheduled, t.Leased, t.Dead)
				}
				return w.Flush()
			}
			q := url.Values{}
			if limit > 0 {
				q.Set("limit", fmt.Sprint(limit))
			}
			if before != "" {
				q.Set("before", before)
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			path := topicPath(a[0]) + "/timers"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			var data json.RawMessage
			if err := c.do(cmd.Context(), http.MethodGet, path, nil, &data); err != nil {
				return err
			}
			if o.json {
				return printJSON(e.stdout, data)
			}
			var page wire.TimerPage
			if err := json.Unmarshal(data, &page); err != nil {
				return err
			}
			w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tDUE (UTC)\tIN\tSTATE\tATTEMPT\tSCHEDULE\tBODY")
			for _, t := range page.Timers {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", out.s(t.ID), humanTime(t.DueAt), relative(t.DueAt), t.State, t.Attempt,
					scheduleColumn(t.Recurring), out.s(truncate(bodyText(t.ContentType, t.Body, t.BodyBase64), 60)))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if page.NextCursor != "" {
				fmt.Fprintf(e.stderr, "more: --cursor %s\n", page.NextCursor)
			}
			return nil
		},
	}
	addClientFlags(cmd, &o)
	cmd.Flags().IntVar(&limit, "limit", 0, "page size (1-1000; default 100)")
	cmd.Flags().StringVar(&before, "before", "", "only timers due before this RFC 3339 instant")
	cmd.Flags().StringVar(&cursor, "cursor", "", "the next page after a previous listing")
	addRawFlag(cmd, &raw)
	return cmd
}

func newDeadCmd(e *env) *cobra.Command {
	var (
		o             clientOpts
		replay, purge bool
		all, raw      bool
		limit         int
		cursor        string
	)
	cmd := &cobra.Command{
		Use:   "dead TOPIC [(--replay | --purge) (ID... | --all)]",
		Short: "List a topic's dead letters; --replay or --purge them (the IDs given, or every one with --all)",
		Args:  args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			topic, ids := a[0], a[1:]
			switch {
			case replay && purge:
				return usageErr("give --replay or --purge, not both")
			case (replay || purge) && all && len(ids) > 0:
				return usageErr("give IDs or --all, not both")
			case (replay || purge) && !all && len(ids) == 0:
				return usageErr("name the dead letters (ID...) or give --all for every one of %s", topic)
			case !replay && !purge && all:
				return usageErr("--all goes with --replay or --purge")
			}
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			if replay || purge {
				op, verb := "dead:replay", "replayed"
				if purge {
					op, verb = "dead:purge", "purged"
				}
				body := wire.DeadSelect{IDs: ids, All: all}
				var n wire.Count
				if err := c.do(cmd.Context(), http.MethodPost, topicPath(topic)+"/"+op, body, &n); err != nil {
					return err
				}
				if o.json {
					return printJSON(e.stdout, n)
				}
				fmt.Fprintf(e.stdout, "%s %d\n", verb, n.Count)
				return nil
			}
			if len(ids) > 0 {
				return usageErr("IDs go with --replay or --purge")
			}
			q := url.Values{}
			if limit > 0 {
				q.Set("limit", fmt.Sprint(limit))
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			path := topicPath(topic) + "/dead"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			var data json.RawMessage
			if err := c.do(cmd.Context(), http.MethodGet, path, nil, &data); err != nil {
				return err
			}
			if o.json {
				return printJSON(e.stdout, data)
			}
			var page wire.DeadPage
			if err := json.Unmarshal(data, &page); err != nil {
				return err
			}
			out := newOutput(e, raw)
			w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tDIED (UTC)\tATTEMPT\tREASON\tLAST ERROR\tBODY")
			for _, d := range page.Dead {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", out.s(d.ID), humanTime(d.DiedAt), d.Attempt, out.s(d.Reason),
					out.s(truncate(d.LastError, 50)), out.s(truncate(bodyText(d.ContentType, d.Body, d.BodyBase64), 40)))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if page.NextCursor != "" {
				fmt.Fprintf(e.stderr, "more: --cursor %s\n", page.NextCursor)
			}
			return nil
		},
	}
	addClientFlags(cmd, &o)
	cmd.Flags().BoolVar(&replay, "replay", false, "schedule the dead letters again, due now")
	cmd.Flags().BoolVar(&purge, "purge", false, "delete the dead letters")
	addRawFlag(cmd, &raw)
	cmd.Flags().BoolVar(&all, "all", false, "with --replay or --purge: every dead letter of the topic (without it, name the IDs)")
	cmd.Flags().IntVar(&limit, "limit", 0, "page size (1-1000; default 100)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "the next page after a previous listing")
	return cmd
}
