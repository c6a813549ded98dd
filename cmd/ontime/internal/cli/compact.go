package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/cmd/ontime/internal/store"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

func newCompactCmd(e *env) *cobra.Command {
	var (
		configPath, dataDir string
		wait                time.Duration
		asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Shrink the embedded store's file (stop the server first)",
		Long: `Rewrite the embedded store's file (ontime.db in the data directory) with only
what it holds, giving back to the file system the space that cancelled and
delivered timers left behind. The store reuses that space for new timers by
itself: compact when the disk space is needed, after many timers were
deleted (see "Space" in docs/guarantees.md).

The server must be stopped: compact waits up to --wait for the file, then
fails with exit code 5. A crash in the middle leaves the store whole: the
compacted copy replaces the file only once it is complete and on disk.

The data directory: --data-dir, else ONTIME_DATA_DIR, else data_dir of the
config file (--config or ONTIME_CONFIG), else ./ontime-data.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg config.Config
			path := configPath
			if path == "" {
				path, _ = e.lookup("ONTIME_CONFIG")
			}
			if path != "" {
				if err := cfg.LoadFile(path); err != nil {
					return usageErr("%v", err)
				}
			}
			if err := cfg.ApplyEnv(e.lookup); err != nil {
				return usageErr("%v", err)
			}
			if cmd.Flags().Changed("data-dir") {
				cfg.DataDir = dataDir
			} else if cfg.Redis != "" {
				return usageErr("the configured store is Redis (%s): compact is for the embedded store; pass --data-dir to name one", cfg.Redis)
			}
			cfg.Fill()
			file := filepath.Join(cfg.DataDir, store.FileName)
			start := time.Now()
			before, after, err := ontimebolt.Compact(file, &ontimebolt.Options{LockTimeout: wait, Logger: newLogger(e.stderr, "warn", "text")})
			switch {
			case errors.Is(err, ontimebolt.ErrLocked):
				return &exitError{code: ExitUnavailable, err: fmt.Errorf("%w (is ontime serve running? stop it first)", err)}
			case errors.Is(err, fs.ErrNotExist):
				return fmt.Errorf("no embedded store at %s", file)
			case err != nil:
				return err
			}
			took := time.Since(start)
			if asJSON {
				return printJSON(e.stdout, map[string]any{"file": file, "before_bytes": before, "after_bytes": after, "seconds": took.Seconds()})
			}
			fmt.Fprintf(e.stdout, "compacted %s: %s -> %s (%s given back) in %s\n",
				file, mb(before), mb(after), mb(before-after), took.Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "TOML config file to read data_dir from (env ONTIME_CONFIG)")
	f.StringVar(&dataDir, "data-dir", config.DefaultDataDir, "embedded store directory (env ONTIME_DATA_DIR)")
	f.DurationVar(&wait, "wait", time.Second, "how long to wait for a process that has the store open")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// mb formats a byte count in MB (10^6 bytes), as df -H does.
func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
