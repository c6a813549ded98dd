package ontimebolt

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"go.etcd.io/bbolt"
)

// compactSuffix names the file Compact writes next to the store's.
const compactSuffix = ".compacting"

// compactTxSize bounds the bytes of keys and values Compact copies per
// transaction of the new file, so that its memory does not grow with the
// store.
const compactTxSize = 64 << 20

// Compact rewrites the store file at path with only what it holds, giving
// its free space back to the file system, and returns the file's size
// before and after. The store must not be open: Compact takes the file's
// lock like Open (waiting up to Options.LockTimeout, then ErrLocked), and
// opens it like Open (a file of the first layout is migrated first; the
// leases of a previous process are dropped). A path with no file is an
// error wrapping fs.ErrNotExist. opts may be nil.
//
// It copies the store into a new file next to it (path + ".compacting"),
// fsyncs it, renames it over the store file and fsyncs the directory. A
// crash at any moment leaves either the old file or the compacted one at
// path, each whole: until the rename the old file is untouched, and the
// new one is complete and on disk before it. A half-written
// ".compacting" file left by a crash is deleted by the next Open or
// Compact. A process that was waiting to open the store while Compact ran
// opens the compacted file.
//
// The copy needs as much free disk space as the store holds (not the
// file's size) and takes about as long as reading it; the file's pages are
// then packed full, so the first writes into them split them.
func Compact(path string, opts *Options) (before, after int64, err error) {
	o := opts.withDefaults()
	start := time.Now()
	// Compact never creates a store: a name that leads nowhere is an error.
	if _, err := os.Stat(path); err != nil {
		return 0, 0, fmt.Errorf("ontimebolt: compact: %w", err)
	}
	d, err := openStore(path, &o)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := d.db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("ontimebolt: compact %s: close: %w", path, cerr)
		}
	}()
	info, err := os.Stat(path)
	if err != nil {
		return 0, 0, fmt.Errorf("ontimebolt: compact %s: %w", path, err)
	}
	before = info.Size()
	tmp := path + compactSuffix // open deleted a stale one
	if o.compactHook != nil {
		o.compactHook("copy")
	}
	if err := copyStore(d, tmp, o.FileMode); err != nil {
		_ = os.Remove(tmp)
		return before, 0, fmt.Errorf("ontimebolt: compact %s: %w", path, err)
	}
	if o.compactHook != nil {
		o.compactHook("rename")
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return before, 0, fmt.Errorf("ontimebolt: compact %s: %w", path, err)
	}
	if err := syncParent(path, o.syncDir); err != nil {
		return before, 0, err
	}
	if info, err = os.Stat(path); err != nil {
		return before, 0, fmt.Errorf("ontimebolt: compact %s: %w", path, err)
	}
	o.Logger.Info("ontimebolt: store file compacted", "path", path, "before", before, "after", info.Size(),
		"took", time.Since(start).Round(time.Millisecond))
	return before, info.Size(), nil
}

// copyStore copies d's buckets into a new bbolt file at tmp, fsynced and
// closed. The copy's commits are not fsynced one by one (nothing reads the
// file until it is complete); one fsync at the end makes all of it
// durable before Compact renames it.
func copyStore(d *Driver, tmp string, mode fs.FileMode) error {
	dst, err := bbolt.Open(tmp, mode, &bbolt.Options{NoSync: true, OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
		return os.OpenFile(name, flag|os.O_EXCL, perm)
	}})
	if err != nil {
		return err
	}
	err = bbolt.Compact(dst, d.db, compactTxSize)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeStaleCompaction deletes what a Compact that died left next to the
// store file. openStore calls it holding the file's lock, which a running
// Compact holds until its file has been renamed, so it never deletes the
// file of a Compact under way.
func removeStaleCompaction(path string, log *slog.Logger) {
	tmp := path + compactSuffix
	if err := os.Remove(tmp); err == nil {
		log.Info("ontimebolt: deleted the file of a compaction that did not finish; the store file is whole", "path", tmp)
	} else if !errors.Is(err, fs.ErrNotExist) {
		log.Warn("ontimebolt: cannot delete the file of a compaction that did not finish", "path", tmp, "err", err)
	}
}
