package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ontime-go/ontime/internal/wire"
)

// snapshot is one reading of the server: its totals and every topic.
type snapshot struct {
	at     time.Time
	stats  wire.Stats
	topics []wire.TopicStats
}

func (c *apiClient) snapshot(ctx context.Context) (*snapshot, error) {
	s := &snapshot{at: time.Now()}
	if err := c.do(ctx, http.MethodGet, "/v1/stats", nil, &s.stats); err != nil {
		return nil, err
	}
	if err := c.do(ctx, http.MethodGet, "/v1/topics", nil, &s.topics); err != nil {
		return nil, err
	}
	return s, nil
}

// perSec is a count of the last minute as a rate.
func perSec(n int64) string {
	r := float64(n) / 60
	switch {
	case n == 0:
		return "0"
	case r < 10:
		return fmt.Sprintf("%.2f", r)
	}
	return fmt.Sprintf("%.0f", r)
}

// ms prints milliseconds of lateness.
func ms(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 1000:
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.1fs", v/1000)
}

// topicTable writes one line per topic: counts, then the last minute's
// rates and lateness ("-" where the server reports none: the --redis mode).
func topicTable(w io.Writer, topics []wire.TopicStats) error {
	// Numbers align right; the topic names, padded to one width, left.
	width := len("TOPIC")
	for _, t := range topics {
		width = max(width, len(t.Topic))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tSCHEDULED\tLEASED\tDEAD\tFIRED/s\tACKED/s\tFAILED/s\tPUBLISHED/s\tLATE p50\tp99\tmax\tEARLY\t\n", width, "TOPIC")
	for _, t := range topics {
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t", width, t.Topic, t.Scheduled, t.Leased, t.Dead)
		a := t.LastMinute
		switch {
		case a == nil:
			fmt.Fprint(tw, "-\t-\t-\t-\t-\t-\t-\t-\t\n")
		case a.Fired == 0:
			fmt.Fprintf(tw, "0\t0\t0\t%s\t-\t-\t-\t%d\t\n", perSec(a.Published), a.Early)
		default:
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", perSec(a.Fired), perSec(a.Acked), perSec(a.Retried+a.DeadLettered),
				perSec(a.Published), ms(a.LateP50Ms), ms(a.LateP99Ms), ms(a.LateMaxMs), a.Early)
		}
	}
	return tw.Flush()
}

// writeStats is the text of `ontime stats`.
func writeStats(w io.Writer, s *snapshot, server bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "store:\t%s\n", s.stats.Store)
	fmt.Fprintf(tw, "topics:\t%d\n", s.stats.Topics)
	fmt.Fprintf(tw, "scheduled:\t%d\n", s.stats.Scheduled)
	fmt.Fprintf(tw, "leased:\t%d\n", s.stats.Leased)
	fmt.Fprintf(tw, "dead:\t%d\n", s.stats.Dead)
	if server {
		fmt.Fprintf(tw, "uptime:\t%s\n", time.Duration(s.stats.UptimeSec)*time.Second)
		fmt.Fprintf(tw, "delivered:\t%d\n", s.stats.Delivered)
		fmt.Fprintf(tw, "failed deliveries:\t%d\n", s.stats.Failed)
		fmt.Fprintf(tw, "workers (topics being delivered):\t%d\n", s.stats.Workers)
		fmt.Fprintf(tw, "watchers:\t%d\n", s.stats.Watchers)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.topics) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	if server {
		fmt.Fprintln(w, "per topic; rates and lateness over the last minute, as this server saw it:")
	}
	return topicTable(w, s.topics)
}

func newStatsCmd(e *env) *cobra.Command {
	var o clientOpts
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Totals, and each topic's counts, rates and lateness",
		Long: `Totals of the store and the server's delivery counters, then one line per
topic: its timers (scheduled, leased, dead) and, from a server, the last
minute: deliveries, acks and failures per second, timers published through
it per second, how late timers fired (p50, p99, max) and how many fired
early (always 0). --json prints GET /v1/stats; ontime ls --json prints the
topics with their last_minute.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			if o.json {
				var raw json.RawMessage
				if err := c.do(cmd.Context(), http.MethodGet, "/v1/stats", nil, &raw); err != nil {
					return err
				}
				return printJSON(e.stdout, raw)
			}
			s, err := c.snapshot(cmd.Context())
			if err != nil {
				return err
			}
			return writeStats(e.stdout, s, c.st == nil)
		},
	}
	addClientFlags(cmd, &o)
	return cmd
}

// Terminal control for `ontime top`.
const (
	clearScreen = "\x1b[H\x1b[2J"
	hideCursor  = "\x1b[?25l"
	showCursor  = "\x1b[?25h"
)

func newTopCmd(e *env) *cobra.Command {
	var (
		o          clientOpts
		interval   time.Duration
		iterations int
	)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "A live view of the server's topics, refreshed every second",
		Long: `A live view, like top: the server's totals and its busiest topics (counts,
deliveries per second, lateness of the last minute, early deliveries),
redrawn every --interval. q or Ctrl-C quits. Into a pipe (or with
--iterations) it prints successive frames without terminal control codes.`,
		Example: `  ontime top
  ontime top --interval 5s
  ontime top --iterations 1 > snapshot.txt`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval < 100*time.Millisecond {
				return usageErr("--interval %s is too short (at least 100ms)", interval)
			}
			if o.json {
				return usageErr("top has no --json; use ontime stats --json or ontime ls --json")
			}
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			return runTop(cmd.Context(), e, c, interval, iterations)
		},
	}
	addClientFlags(cmd, &o)
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "time between two refreshes")
	cmd.Flags().IntVarP(&iterations, "iterations", "n", 0, "stop after this many frames (0: until q or Ctrl-C)")
	return cmd
}

func runTop(ctx context.Context, e *env, c *apiClient, interval time.Duration, iterations int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tty := isTerminal(e.stdout)
	if tty {
		fmt.Fprint(e.stdout, hideCursor)
		defer fmt.Fprint(e.stdout, showCursor)
	}
	// Keys: with a terminal on standard input, read it raw so that q quits
	// at once (and Ctrl-C, which raw mode turns into a byte).
	if in, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(in.Fd())) {
		if old, err := term.MakeRaw(int(in.Fd())); err == nil {
			defer func() { _ = term.Restore(int(in.Fd()), old) }()
			go readKeys(in, cancel)
		}
	}
	var prev *snapshot
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for frame := 1; ; frame++ {
		s, err := c.snapshot(ctx)
		var b strings.Builder
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			fmt.Fprintf(&b, "ontime top: %v (retrying every %s)\n", err, interval)
		default:
			writeTop(&b, c, s, prev, height(e.stdout))
			prev = s
		}
		frameText := b.String()
		if tty {
			// Raw mode (when stdin is this terminal) needs \r\n.
			frameText = clearScreen + strings.ReplaceAll(frameText, "\n", "\r\n")
		} else if frame > 1 {
			frameText = "\n" + frameText
		}
		if _, err := io.WriteString(e.stdout, frameText); err != nil {
			return err
		}
		if iterations > 0 && frame >= iterations {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// readKeys cancels on q, Q, Ctrl-C or Ctrl-D, or when stdin ends.
func readKeys(in io.Reader, cancel func()) {
	defer cancel()
	buf := make([]byte, 16)
	for {
		n, err := in.Read(buf)
		for _, k := range buf[:n] {
			switch k {
			case 'q', 'Q', 3, 4:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// height is the terminal's number of rows (0: not a terminal).
func height(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	_, h, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return h
}

// writeTop writes one frame: a header of totals, then the topics, the
// busiest first (deliveries in the last minute, then timers), cut to the
// terminal's height.
func writeTop(w io.Writer, c *apiClient, s, prev *snapshot, rows int) {
	st := s.stats
	fmt.Fprintf(w, "ontime top - %s - %s UTC   (q quits)\n", c.target(), s.at.UTC().Format("15:04:05"))
	fmt.Fprintf(w, "store %s  up %s  workers %d  watchers %d  topics %d\n", st.Store, time.Duration(st.UptimeSec)*time.Second, st.Workers, st.Watchers, st.Topics)
	rate := "-"
	if prev != nil {
		if dt := s.at.Sub(prev.at).Seconds(); dt > 0 {
			rate = fmt.Sprintf("%.1f/s", float64(st.Delivered-prev.stats.Delivered)/dt)
		}
	}
	var fired, early int64
	for _, t := range s.topics {
		if t.LastMinute != nil {
			fired += t.LastMinute.Fired
			early += t.LastMinute.Early
		}
	}
	fmt.Fprintf(w, "timers: %d scheduled, %d leased, %d dead   delivered %d (now %s, last minute %s/s)  failed %d  early %d\n\n",
		st.Scheduled, st.Leased, st.Dead, st.Delivered, rate, perSec(fired), st.Failed, early)
	topics := slices.Clone(s.topics)
	slices.SortStableFunc(topics, func(a, b wire.TopicStats) int {
		return cmp.Or(cmp.Compare(firedOf(b), firedOf(a)), cmp.Compare(b.Scheduled+b.Leased+b.Dead, a.Scheduled+a.Leased+a.Dead), strings.Compare(a.Topic, b.Topic))
	})
	more := 0
	if rows > 0 {
		if keep := max(rows-6, 1); len(topics) > keep {
			more = len(topics) - keep
			topics = topics[:keep]
		}
	}
	_ = topicTable(w, topics)
	if more > 0 {
		fmt.Fprintf(w, "... %d more topics\n", more)
	}
}

func firedOf(t wire.TopicStats) int64 {
	if t.LastMinute == nil {
		return 0
	}
	return t.LastMinute.Fired
}

// target names what the client talks to: the server's URL, or the Redis
// store (its URL without the password).
func (c *apiClient) target() string {
	if c.st != nil {
		return "redis"
	}
	return redactURL(c.base)
}
