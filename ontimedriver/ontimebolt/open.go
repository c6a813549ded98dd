package ontimebolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Open opens the store in the file at path, creating it if it does not
// exist. opts may be nil.
//
// The file is locked for this Driver: if another process (or another
// Driver) holds it, Open fails within Options.LockTimeout with an error
// wrapping ErrLocked. A file that is not an ontimebolt store, is truncated or
// damaged fails with an error wrapping ErrCorrupt; both name the file.
//
// Open fsyncs the directory that holds the file before it returns (see
// Durability in the package documentation), and fails if it cannot. It does
// not create missing directories.
//
// A file of the first layout is migrated (see Layout in the package
// documentation); the leases of a previous process are dropped; a
// half-written copy that a Compact which did not finish left next to the
// file is deleted. Its cost grows with the topics that hold timers, not
// with the file's size or history, when the file was closed cleanly;
// after a crash in the middle of writing it reads the whole file once (see
// Options.NoFreelistSync).
func Open(path string, opts *Options) (*Driver, error) {
	o := opts.withDefaults()
	d, err := openStore(path, &o)
	if err != nil {
		return nil, err
	}
	go d.writer()
	go d.promoter(o.nearHorizon)
	if sp, err := d.Space(); err == nil && sp.Free > sp.File/2 && sp.Free > o.compactHint {
		d.log.Info("ontimebolt: more than half of the store file is free space; the store reuses it, and ontimebolt.Compact (`ontime compact`) gives it back to the file system while the store is closed",
			"path", path, "file_bytes", sp.File, "free_bytes", sp.Free)
	}
	return d, nil
}

// defaultCompactHint is the free space from which Open suggests
// compacting (when it is also more than half the file).
const defaultCompactHint = 64 << 20

// openStore opens the file as Open does, without starting the writer and the
// promoter (Compact copies the file with nothing writing it).
func openStore(path string, o *Options) (*Driver, error) {
	start := time.Now()
	var db *bbolt.DB
	for attempt := 0; ; attempt++ {
		if err := precheck(path, o.LockTimeout, o.CheckOnOpen); err != nil {
			return nil, err
		}
		// The lock was free a moment ago; give bbolt what is left of the wait.
		timeout := max(o.LockTimeout-time.Since(start), time.Nanosecond)
		var (
			file *os.File
			err  error
		)
		db, file, err = openBolt(path, o.FileMode, timeout)
		if err != nil {
			return nil, err
		}
		// Compact replaces the file by renaming a new one over it while
		// it holds the old one's lock: a process that waited for that
		// lock holds a file no name leads to any more. Open the new one.
		if replaced(path, file) && attempt < 10 {
			_ = db.Close()
			continue
		}
		break
	}
	removeStaleCompaction(path, o.Logger)
	d := &Driver{
		path:         path,
		db:           db,
		log:          o.Logger,
		maxBatch:     o.MaxBatch,
		reqs:         make(chan *request),
		quit:         make(chan struct{}),
		writerDone:   make(chan struct{}),
		promoterDone: make(chan struct{}),
		subs:         make(map[string]map[*subscription]struct{}),
		topicSubs:    make(map[*topicSubscription]struct{}),
		idx:          newTopicIndex(),

		keepFreelist: !o.NoFreelistSync,
		freelistIdle: o.freelistIdle,
	}
	// Claim index entries for the next horizon go to q from the start; the
	// promoter, started below, moves f's entries for it there.
	d.near.Store(floorMicros(time.Now()) + o.nearHorizon.Microseconds())
	if err := d.initLayout(o); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := d.dropLeases(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := d.buildIndex(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := syncParent(path, o.syncDir); err != nil {
		_ = db.Close()
		return nil, err
	}
	if o.CheckOnOpen {
		if err := d.deepCheck(); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return d, nil
}

// replaced reports whether the name path no longer leads to file.
func replaced(path string, file *os.File) bool {
	fi, err := file.Stat()
	if err != nil {
		return false
	}
	pi, err := os.Stat(path)
	return err == nil && !os.SameFile(fi, pi)
}

// syncParent fsyncs the directory that holds the store file, so that the
// file's name is on disk before Open returns: bbolt fsyncs the file's
// contents at every commit, but a new file whose directory entry is lost in
// a power loss is lost whole, and its timers with it. It runs at every Open,
// not only when this Open created the file: a previous Open that created it
// may have died before it got this far. A symlinked path is followed to the
// directory that holds the file itself.
func syncParent(path string, sync func(dir string) error) error {
	dir := filepath.Dir(path)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		dir = filepath.Dir(real)
	}
	if err := sync(dir); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("ontimebolt: open %s: sync directory %s: %w", path, dir, err)
	}
	return nil
}

// openBolt opens the bbolt database. bbolt reads the free list at open and
// can panic (or fault) on a damaged one; that becomes an error, and the file
// handle bbolt opened is closed so the lock is not left behind.
func openBolt(path string, mode fs.FileMode, timeout time.Duration) (db *bbolt.DB, file *os.File, err error) {
	bo := &bbolt.Options{
		Timeout:      timeout,
		FreelistType: bbolt.FreelistMapType,
		// Commits never write the free list (freelist.go); bbolt reads
		// one that a Close wrote, and rebuilds it from the pages when
		// there is none.
		NoFreelistSync: true,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			if err == nil {
				noReadahead(f)
			}
			file = f
			return f, err
		},
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				_ = file.Close()
			}
			db, file, err = nil, nil, corruptError(path, "opening the file failed: %v", r)
		}
	}()
	db, err = bbolt.Open(path, mode, bo)
	switch {
	case err == nil:
		return db, file, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, nil, fmt.Errorf("%w: %s (waited %v)", ErrLocked, path, timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return nil, nil, fmt.Errorf("ontimebolt: open %s: %w", path, err)
}

// precheck validates an existing file before bbolt maps it: bbolt trusts
// the header (meta page) and would fault reading past the end of a truncated
// file, which no recover can catch. It first waits for the lock, so that it
// never reads a header another process is writing.
//
// It always checks the root page and the buckets inlined in it
// (checkRoot). With deep set it checks every page (Options.CheckOnOpen). It
// does so anyway when the file has no stored free list: bbolt then rebuilds it by
// walking every page, and that walk panics on a goroutine of its own (so no
// recover can catch it) at the first damaged page.
func precheck(path string, timeout time.Duration, deep bool) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // Open creates it
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("ontimebolt: open %s: %w", path, err)
	}
	defer f.Close()
	noReadahead(f)
	unlock, err := lockFile(f, timeout)
	if err != nil {
		if errors.Is(err, ErrLocked) {
			return fmt.Errorf("%w: %s (waited %v)", ErrLocked, path, timeout)
		}
		return fmt.Errorf("ontimebolt: lock %s: %w", path, err)
	}
	defer unlock()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("ontimebolt: open %s: %w", path, err)
	}
	if info.IsDir() {
		return fmt.Errorf("ontimebolt: open %s: is a directory", path)
	}
	m, err := checkHeader(f, path, info.Size())
	if err != nil || m == nil {
		return err
	}
	if !deep && m.freelist != noFreelistPgid {
		return checkRoot(f, path, *m)
	}
	return checkPages(f, path, *m)
}

// bbolt's on-disk header: a 16-byte page header, then the meta fields in
// native byte order (little-endian on every platform Go bbolt supports).
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderLen  = 16
	metaLen        = 64 // up to and including the checksum
	metaSummedLen  = 56 // bytes the checksum covers
	noFreelistPgid = ^uint64(0)
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high water mark: pages in use
	txid     uint64
}

// parseMeta decodes and validates one meta page at the start of buf.
func parseMeta(buf []byte) (boltMeta, bool) {
	if len(buf) < pageHeaderLen+metaLen {
		return boltMeta{}, false
	}
	m := buf[pageHeaderLen : pageHeaderLen+metaLen]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic || le.Uint32(m[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(m[:metaSummedLen])
	if h.Sum64() != le.Uint64(m[metaSummedLen:]) {
		return boltMeta{}, false
	}
	return boltMeta{
		pageSize: le.Uint32(m[8:]),
		root:     le.Uint64(m[16:]),
		freelist: le.Uint64(m[32:]),
		pgid:     le.Uint64(m[40:]),
		txid:     le.Uint64(m[48:]),
	}, true
}

func readMeta(f io.ReaderAt, off int64) (boltMeta, bool) {
	buf := make([]byte, pageHeaderLen+metaLen)
	if _, err := f.ReadAt(buf, off); err != nil {
		return boltMeta{}, false
	}
	return parseMeta(buf)
}

// checkHeader finds the meta page bbolt will use (the valid one with the
// higher transaction id) and checks that the file holds every page it
// names.
func checkHeader(f io.ReaderAt, path string, size int64) (*boltMeta, error) {
	if size == 0 {
		return nil, nil // bbolt initialises an empty file
	}
	if size < 1024 {
		return nil, corruptError(path, "file is %d bytes, too small to be a store (truncated?)", size)
	}
	// The page size is in the meta pages; find it as bbolt does: first page
	// first, else the second page at each possible page size.
	var pageSize int64
	if m, ok := readMeta(f, 0); ok {
		pageSize = int64(m.pageSize)
	} else {
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= size-1024 {
				break
			}
			if m, ok := readMeta(f, pos); ok {
				pageSize = int64(m.pageSize)
				break
			}
		}
	}
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return nil, corruptError(path, "no valid bbolt header: not an ontimebolt store, or both header pages are damaged")
	}
	m0, ok0 := readMeta(f, 0)
	m1, ok1 := readMeta(f, pageSize)
	m := m0
	switch {
	case ok0 && ok1:
		if m1.txid > m0.txid {
			m = m1
		}
	case ok1:
		m = m1
	case !ok0:
		return nil, corruptError(path, "no valid bbolt header: not an ontimebolt store, or both header pages are damaged")
	}
	if int64(m.pageSize) != pageSize {
		return nil, corruptError(path, "the two header pages disagree on the page size")
	}
	if m.pgid < 2 || m.pgid > uint64(size/pageSize) {
		return nil, corruptError(path, "file is truncated: %d bytes, but its header names %d pages of %d bytes (%d bytes)",
			size, m.pgid, pageSize, m.pgid*uint64(pageSize))
	}
	if m.root < 2 || m.root >= m.pgid || (m.freelist != noFreelistPgid && (m.freelist < 2 || m.freelist >= m.pgid)) {
		return nil, corruptError(path, "the header points outside the file (root page %d, free list page %d, %d pages)",
			m.root, m.freelist, m.pgid)
	}
	return &m, nil
}

// initLayout creates the store's buckets in a new file, checks them in an
// existing one, or migrates a file of format 1 (migrate.go). It reads no
// per-topic structure: its cost does not grow with the topics.
func (d *Driver) initLayout(o *Options) error {
	var format []byte
	err := d.view(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			foreign := false
			_ = tx.ForEach(func([]byte, *bbolt.Bucket) error {
				foreign = true
				return nil
			})
			if foreign {
				return corruptError(d.path, "not an ontimebolt store (bbolt file with other buckets)")
			}
			return nil
		}
		format = bytes.Clone(meta.Get(keyFormat))
		switch {
		case bytes.Equal(format, formatV2):
			_, err := dataBucketsOf(tx, d.path, d.near.Load())
			return err
		case bytes.Equal(format, formatV1), bytes.Equal(format, formatMigrating):
			if tx.Bucket(bucketV1Topics) == nil {
				return corruptError(d.path, "bucket %q is missing", bucketV1Topics)
			}
			return nil
		}
		return corruptError(d.path, "unknown store format %q (this version reads %q and %q)", format, formatV2, formatV1)
	})
	switch {
	case err != nil:
		return err
	case format == nil:
		return d.update(func(tx *bbolt.Tx) error {
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			if err := meta.Put(keyFormat, formatV2); err != nil {
				return err
			}
			return createDataBuckets(tx)
		})
	case !bytes.Equal(format, formatV2):
		return d.migrate(o)
	}
	return nil
}

// dropLeases ends every lease found in the file at Open. Only one process
// has the file open at a time, and its workers hold leases only while it
// runs, so a lease found at Open belongs to a process that is gone (it
// crashed, or closed the store without settling): nobody can settle it, and
// waiting for its deadline would only delay the timer. Each such timer is
// due again at once, at its own due time, keeping the attempt its last
// claim counted, so a timer whose handler crashed the process still moves
// towards MaxAttempts. A file without leases is not written.
func (d *Driver) dropLeases() error {
	var any bool
	err := d.view(func(tx *bbolt.Tx) error {
		s, err := dataBucketsOf(tx, d.path, d.near.Load())
		if err != nil {
			return err
		}
		k, _ := s.leases.Cursor().First()
		any = k != nil
		return nil
	})
	if err != nil || !any {
		return err
	}
	dropped := 0
	err = d.update(func(tx *bbolt.Tx) error {
		dropped = 0
		s, err := dataBucketsOf(tx, d.path, d.near.Load())
		if err != nil {
			return err
		}
		var keys [][]byte
		c := s.leases.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			if err := s.leases.Delete(k); err != nil {
				return err
			}
			topic, rest, ok := splitTopic(k)
			if !ok {
				continue
			}
			_, idb, ok := splitKey(rest)
			if !ok {
				continue
			}
			tb := s.topic(d.path, string(topic))
			id := string(idb)
			rec, found, err := tb.getTimer(id)
			if !found || err != nil || !rec.leased() {
				// A stale entry (now deleted), or a damaged record
				// (Claim moves that to the dead letters later).
				continue
			}
			if err := tb.deleteClaimable(tb.idx(rec.claimable(), id)); err != nil {
				return err
			}
			if err := tb.leases.Delete(tb.idx(rec.leaseUntil, id)); err != nil {
				return err
			}
			rec.token, rec.leaseUntil = 0, 0
			if err := tb.putTimer(id, &rec); err != nil {
				return err
			}
			dropped++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ontimebolt: %s: drop the leases of a previous process: %w", d.path, err)
	}
	d.log.Info("ontimebolt: leases of a previous process dropped; their timers are due again at once",
		"path", d.path, "timers", dropped)
	return nil
}
