package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wire"
)

func newCancelCmd(e *env) *cobra.Command {
	var (
		o       clientOpts
		idsFrom string
	)
	cmd := &cobra.Command{
		Use:   "cancel TOPIC [ID...] [--ids-from FILE|-]",
		Short: "Cancel timers (exit 3 if one of them is not there)",
		Long: `Cancel timers of a topic: the ids given as arguments, then those of
--ids-from (one id a line; blank lines are skipped; - reads standard input).
One id is cancelled with DELETE /v1/topics/{topic}/timers/{id}; more go in
POST /v1/topics/{topic}/timers:cancel requests of up to ` + fmt.Sprint(server.MaxCancel) + ` ids, each
cancelled all together or not at all. The ids that name no scheduled or
leased timer are listed ("not found ID"), and the exit status is then 3;
the others are cancelled all the same. An empty list is an error: no id
never means all.`,
		Example: `  ontime cancel reminders r-17
  ontime cancel reminders r-17 r-18 r-19
  ontime ls reminders --json | jq -r '.timers[].id' | ontime cancel reminders --ids-from -`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			topic, ids := a[0], a[1:]
			if idsFrom != "" {
				more, err := readIDs(e, idsFrom)
				if err != nil {
					return err
				}
				ids = append(ids, more...)
			}
			if len(ids) == 0 {
				if idsFrom != "" {
					return usageErr("--ids-from %s has no ids: nothing to cancel", idsFrom)
				}
				return usageErr("give the ids to cancel (arguments or --ids-from)")
			}
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			if len(ids) == 1 && idsFrom == "" {
				return cancelOne(cmd.Context(), e, c, &o, topic, ids[0])
			}
			return cancelMany(cmd.Context(), e, c, &o, topic, ids)
		},
	}
	addClientFlags(cmd, &o)
	cmd.Flags().StringVar(&idsFrom, "ids-from", "", "read more ids from FILE, one a line (- for standard input)")
	return cmd
}

// cancelOne cancels one timer: exit 3 when there is none.
func cancelOne(ctx context.Context, e *env, c *apiClient, o *clientOpts, topic, id string) error {
	if err := c.do(ctx, http.MethodDelete, topicPath(topic)+"/timers/"+url.PathEscape(id), nil, nil); err != nil {
		return err
	}
	if o.json {
		return printJSON(e.stdout, map[string]string{"id": id, "topic": topic, "status": "cancelled"})
	}
	fmt.Fprintf(e.stdout, "cancelled %s\n", id)
	return nil
}

// cancelMany cancels ids in requests of up to server.MaxCancel, in order.
// A failed request stops it: the requests before it are done, and the
// error says how many ids were cancelled and how many were not sent.
func cancelMany(ctx context.Context, e *env, c *apiClient, o *clientOpts, topic string, ids []string) error {
	out := wire.CancelResult{Results: make([]wire.CancelItem, 0, len(ids))}
	for start := 0; start < len(ids); start += server.MaxCancel {
		end := min(start+server.MaxCancel, len(ids))
		var r wire.CancelResult
		if err := c.do(ctx, http.MethodPost, topicPath(topic)+"/timers:cancel", wire.CancelIn{IDs: ids[start:end]}, &r); err != nil {
			if start > 0 {
				fmt.Fprintf(e.stderr, "ontime: ids [0, %d) done (%d cancelled); ids [%d, %d) failed; the rest were not sent\n",
					start, out.Cancelled, start, end)
			}
			return err
		}
		if len(r.Results) != end-start {
			return fmt.Errorf("the server answered %d results for %d ids", len(r.Results), end-start)
		}
		out.Cancelled += r.Cancelled
		out.Results = append(out.Results, r.Results...)
	}
	notFound := 0
	for _, it := range out.Results {
		if it.Status != http.StatusNoContent {
			notFound++
		}
	}
	if o.json {
		if err := printJSON(e.stdout, struct {
			Topic string `json:"topic"`
			wire.CancelResult
		}{topic, out}); err != nil {
			return err
		}
	} else {
		sh := newOutput(e, false)
		for _, it := range out.Results {
			if it.Status != http.StatusNoContent {
				fmt.Fprintf(e.stdout, "not found %s\n", sh.s(it.ID))
			}
		}
		fmt.Fprintf(e.stdout, "cancelled %d of %d\n", out.Cancelled, len(ids))
	}
	if notFound > 0 {
		return &exitError{code: ExitNotFound, err: fmt.Errorf("%d of %d ids not found", notFound, len(ids))}
	}
	return nil
}

// readIDs reads one id a line from path (- standard input), skipping blank
// lines and trimming spaces around each id.
func readIDs(e *env, path string) ([]string, error) {
	var r io.Reader = e.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, usageErr("--ids-from: %v", err)
		}
		defer f.Close()
		r = f
	}
	var ids []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			ids = append(ids, id)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--ids-from %s: %w", path, err)
	}
	return ids, nil
}
