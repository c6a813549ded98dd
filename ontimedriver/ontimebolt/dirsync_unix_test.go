//go:build unix

package ontimebolt_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// The directory fsync Open uses works on a real directory and reports a
// missing one (elsewhere than unix it is a no-op).
func TestSyncDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := ontimebolt.SyncDir(dir); err != nil {
		t.Errorf("SyncDir(%s): %v", dir, err)
	}
	if err := ontimebolt.SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SyncDir of a missing directory: %v, want ErrNotExist", err)
	}
}
