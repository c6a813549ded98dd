package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/wire"
)

func newWatchCmd(e *env) *cobra.Command {
	var (
		o   clientOpts
		raw bool
	)
	cmd := &cobra.Command{
		Use:   "watch TOPIC",
		Short: "Print each message of TOPIC at its due time, as \"2026-11-22 10:15:03: <body>\" (UTC)",
		Long: `Print each message of TOPIC on its own line when it is due, as
"2026-11-22 10:15:03: <body>" (the due time, UTC), and ack it.

Against a server the messages stream over server-sent events: while a watcher
is connected the server gives it the topic's timers instead of the topic's
target, and acks each after it was written. With --redis the command is a
worker of the topic itself. Line breaks inside a body print as \n. On a
terminal, other control characters are escaped too (\x1b for ESC), so that a
message cannot take over the terminal; --raw and --json print them as they
are.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := o.connect(e)
			if err != nil {
				return err
			}
			defer c.close()
			out := newOutput(e, raw)
			if c.client != nil {
				return watchWorker(cmd.Context(), c, a[0], e, out, o.json)
			}
			return watchServer(cmd.Context(), c, a[0], e, out, o.json)
		},
	}
	addClientFlags(cmd, &o)
	addRawFlag(cmd, &raw)
	return cmd
}

// watchWorker runs a worker for topic that prints each message: its watch
// line, or with asJSON the same event JSON a server's stream carries.
func watchWorker(ctx context.Context, c *apiClient, topic string, e *env, out output, asJSON bool) error {
	w := ontime.NewWorker(c.client, nil)
	err := ontime.Handle(w, topic, func(ctx context.Context, m *ontime.Message[[]byte]) error {
		line := out.s(wire.WatchLine(m.Due, m.Body))
		if asJSON {
			b, err := json.Marshal(wire.NewEvent(m.ID, m.Topic, m.Due, m.Attempt, m.Headers, m.CorrelationID, m.ContentType, m.Body))
			if err != nil {
				return err
			}
			line = string(b)
		}
		_, err := fmt.Fprintln(e.stdout, line)
		return err
	}, &ontime.TopicOptions{MaxConcurrency: 1})
	if err != nil {
		return usageErr("%v", err)
	}
	fmt.Fprintf(e.stderr, "watching %s on Redis (Ctrl-C to stop)\n", topic)
	return w.Run(ctx)
}

// watchServer streams topic from the server, reconnecting after errors
// other than a refused request.
func watchServer(ctx context.Context, c *apiClient, topic string, e *env, out output, asJSON bool) error {
	hc := &http.Client{Transport: c.hc.Transport} // no overall timeout: a stream lasts
	var backoff time.Duration
	for {
		connected, err := streamOnce(ctx, hc, c, topic, e, out, asJSON)
		if ctx.Err() != nil {
			return nil
		}
		var ee *exitError
		if errors.As(err, &ee) && ee.code != ExitUnavailable {
			return err
		}
		if connected {
			backoff = 0
		}
		backoff = min(max(2*backoff, 250*time.Millisecond), 5*time.Second)
		fmt.Fprintf(e.stderr, "watch: %v; reconnecting in %s\n", err, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

// streamOnce reads one event stream until it ends.
func streamOnce(ctx context.Context, hc *http.Client, c *apiClient, topic string, e *env, out output, asJSON bool) (connected bool, err error) {
	req, err := c.request(ctx, http.MethodGet, topicPath(topic)+"/watch", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return false, &exitError{code: ExitUnavailable, err: fmt.Errorf("cannot reach %s: %w", c.base, unwrapURLErr(err))}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return false, &exitError{code: exitCode(resp.StatusCode), err: decodeAPIErr(resp.StatusCode, data)}
	}
	fmt.Fprintf(e.stderr, "watching %s on %s (Ctrl-C to stop)\n", topic, c.base)
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	var event, data string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = errors.New("the server closed the stream")
			}
			return true, &exitError{code: ExitUnavailable, err: err}
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if event == "timer" && data != "" {
				if err := printEvent(e, out, data, asJSON); err != nil {
					return true, err
				}
			}
			event, data = "", ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
			if data != "" {
				data += "\n"
			}
			data += d
		}
	}
}

func printEvent(e *env, out output, data string, asJSON bool) error {
	if asJSON {
		_, err := fmt.Fprintln(e.stdout, data)
		return err
	}
	var ev wire.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		fmt.Fprintf(e.stderr, "watch: an event does not decode: %v\n", err)
		return nil
	}
	body, err := ev.BodyBytes()
	if err != nil {
		body = ev.Body
	}
	_, err = fmt.Fprintln(e.stdout, out.s(wire.WatchLine(ev.DueAt, body)))
	return err
}
