// Package cli is the ontime command line: `ontime serve` and the verbs that
// talk to a server (or straight to Redis). main.go only calls Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes scripts can rely on.
const (
	ExitOK           = 0
	ExitError        = 1 // anything not listed below
	ExitUsage        = 2 // bad flags or arguments
	ExitNotFound     = 3 // no such timer
	ExitExists       = 4 // if_absent and the id exists
	ExitUnavailable  = 5 // server or store unreachable, 503
	ExitUnauthorized = 6 // missing or wrong token
	ExitInvalid      = 7 // the server refused the request (400, 403, 413)
)

// exitError carries an exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// env is what commands read and write besides flags.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	lookup         func(string) (string, bool)
}

// Main runs the command line and returns the exit code. SIGINT and SIGTERM
// cancel the running command (serve shuts down gracefully); a second one
// kills the process.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal a second one ends the process at once
		// (serve's graceful stop can take up to shutdown_timeout).
		<-ctx.Done()
		stop()
	}()
	return Run(ctx, args, stdin, stdout, stderr, os.LookupEnv)
}

// Run is Main with a context and an environment lookup, for tests.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, lookup: lookup}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(stderr, "ontime:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if isFlagError(err) || strings.HasPrefix(err.Error(), "unknown command ") {
		return ExitUsage
	}
	return ExitError
}

// flagErr marks errors cobra reports for bad flags and arguments.
type flagErr struct{ error }

func isFlagError(err error) bool {
	var fe *flagErr
	return errors.As(err, &fe)
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "ontime",
		Short: "Distributed timers and delayed messages: server and CLI",
		Long: `ontime schedules messages for later and delivers them on time.

  ontime serve                      run the server (embedded store in ./ontime-data, 127.0.0.1:8080)
  ontime schedule TOPIC BODY --in 90s
  ontime watch TOPIC                print each message of TOPIC at its due time

The verbs talk to a server (--server, ONTIME_SERVER; default http://127.0.0.1:8080)
or straight to Redis (--redis URL). See docs/server.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version(),
	}
	root.SetVersionTemplate("ontime {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &flagErr{fmt.Errorf("%w\nsee '%s --help'", err, c.CommandPath())}
	})
	root.AddCommand(
		newServeCmd(e),
		newScheduleCmd(e),
		newCancelCmd(e),
		newFireCmd(e),
		newPauseCmd(e, true),
		newPauseCmd(e, false),
		newBackfillCmd(e),
		newGetCmd(e),
		newLsCmd(e),
		newStatsCmd(e),
		newTopCmd(e),
		newDeadCmd(e),
		newCompactCmd(e),
		newWatchCmd(e),
		newBenchAPICmd(e),
		newRepublishCmd(e),
		newKafkaScheduleCmd(e),
		newDevKafkaCmd(e),
	)
	return root
}

// args wraps a cobra argument check so its failure is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageErr("%v\nusage: %s", err, cmd.UseLine())
		}
		return nil
	}
}
