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
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/backoff"
	"github.com/ontime-go/ontime/internal/wire"
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
target, and counts each as delivered only when the watcher confirms it, which
it does after printing it; timers it was sent but did not confirm (it was
killed, or stopped reading) go to another watcher or the target. With --redis the command is a
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
// other than a refused request. It takes the topic's timers
// (?ack=explicit) and confirms each event after it was printed.
func watchServer(ctx context.Context, c *apiClient, topic string, e *env, out output, asJSON bool) error {
	hc := &http.Client{Transport: c.hc.Transport} // no overall timeout: a stream lasts
	var wait time.Duration
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
			wait = 0
		}
		wait = backoff.Next(wait, 250*time.Millisecond, 5*time.Second)
		fmt.Fprintf(e.stderr, "watch: %v; reconnecting in %s\n", err, wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// streamOnce reads one event stream until it ends. When ctx ends, the
// events printed so far are confirmed before the stream closes (the
// server gives back the unconfirmed ones when it does).
func streamOnce(ctx context.Context, hc *http.Client, c *apiClient, topic string, e *env, out output, asJSON bool) (connected bool, err error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	ack := newAcker(c, topic, e)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			ack.flush()
			cancel()
		case <-stopped:
		}
	}()
	go ack.run(sctx)
	req, err := c.request(sctx, http.MethodGet, topicPath(topic)+"/watch?ack=explicit", nil)
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
	var id, event, data string
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
				if id != "" {
					ack.add(id)
				}
			}
			id, event, data = "", "", ""
		case strings.HasPrefix(line, ":"):
			if why, ok := strings.CutPrefix(line, ": closing: "); ok {
				fmt.Fprintf(e.stderr, "watch: the server ends the stream: %s\n", why)
			}
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " ")
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

// acker confirms printed events: one request at a time, each carrying
// every id printed while the last one was on its way.
type acker struct {
	c    *apiClient
	path string
	e    *env
	mu   sync.Mutex
	ids  []string
	off  bool // the server takes no confirmations (an older ontime)
	kick chan struct{}
}

func newAcker(c *apiClient, topic string, e *env) *acker {
	return &acker{c: c, path: topicPath(topic) + "/watch:ack", e: e, kick: make(chan struct{}, 1)}
}

// flush confirms what was printed, within 2 seconds.
func (a *acker) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a.send(ctx)
}

func (a *acker) add(id string) {
	a.mu.Lock()
	a.ids = append(a.ids, id)
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

func (a *acker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
			a.send(ctx)
		}
	}
}

// send confirms the ids printed so far.
func (a *acker) send(ctx context.Context) {
	a.mu.Lock()
	ids := a.ids
	a.ids = nil
	off := a.off
	a.mu.Unlock()
	if len(ids) == 0 || off {
		return
	}
	var res wire.WatchAcked
	err := a.c.do(ctx, http.MethodPost, a.path, wire.WatchAck{IDs: ids}, &res)
	var ae *apiErr
	switch {
	case errors.As(err, &ae) && ae.code == "no_route":
		a.mu.Lock()
		a.off = true
		a.mu.Unlock()
		fmt.Fprintln(a.e.stderr, "watch: this server takes no confirmations (an older ontime): it counts each event as delivered once sent")
	case err != nil:
		if ctx.Err() == nil {
			fmt.Fprintf(a.e.stderr, "watch: confirming %d events failed (they will be sent again): %v\n", len(ids), err)
		}
	case len(res.Unknown) > 0:
		fmt.Fprintf(a.e.stderr, "watch: %d printed events were confirmed too late; they will be sent again\n", len(res.Unknown))
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
