package store

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenEmbeddedCreatesNestedDataDir: a data directory several levels
// deep that does not exist yet is created (each new level's parent synced
// on the way), the store opens in it, and opening it again finds the same
// file.
func TestOpenEmbeddedCreatesNestedDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "data")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for range 2 {
		s, err := OpenEmbedded(dir, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Fatalf("store file: %v", err)
	}
}

// TestMakeDataDirUnderAFile: a data directory whose parent is a file is a
// clear error naming the path, not a panic.
func TestMakeDataDirUnderAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenEmbedded(filepath.Join(f, "data"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		t.Fatal("OpenEmbedded under a file succeeded")
	}
	if want := filepath.Join(f, "data"); !strings.Contains(err.Error(), f) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}
