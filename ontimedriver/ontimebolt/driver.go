package ontimebolt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/ontime-go/ontime/ontimedriver"
)

var (
	_ ontimedriver.Driver     = (*Driver)(nil)
	_ ontimedriver.SlowClaims = (*Driver)(nil)
)

// Driver is the embedded store. It is safe for concurrent use. Create it with
// Open and release it with Close.
type Driver struct {
	path     string
	db       *bbolt.DB
	log      *slog.Logger
	maxBatch int

	// Write calls go through one writer goroutine that groups them into
	// shared transactions (see writer).
	reqs         chan *request
	quit         chan struct{}
	writerDone   chan struct{}
	promoterDone chan struct{}

	// Read by the tests (export_test.go) to check group commit: write
	// transactions committed by the writer, and write calls waiting to be
	// taken by it.
	commits atomic.Int64
	waiting atomic.Int64
	// promotions counts the promoter's runs (promote.go), for the tests.
	promotions atomic.Int64

	closed    atomic.Bool
	closeOnce sync.Once

	subMu      sync.Mutex
	subs       map[string]map[*subscription]struct{}
	topicSubs  map[*topicSubscription]struct{}
	subsClosed bool

	// keepFreelist: the free-page list is written at Close and after
	// freelistIdle without writes (freelist.go); freelistIdle <= 0: only
	// at Close.
	keepFreelist bool
	freelistIdle time.Duration

	// idx is the topic index (topicindex.go).
	idx *topicIndex

	// near splits the claim index (Unix µs): entries for earlier instants
	// are written to q, the others to f. The promoter moves it ahead of the
	// clock (promote.go).
	near atomic.Int64
}

// SlowClaims reports true: a Claim waits for its commit's fsync, so
// workers claim ahead of their free handler slots (see
// ontimedriver.SlowClaims).
func (d *Driver) SlowClaims() bool { return true }

// Path returns the file the driver keeps its timers in.
func (d *Driver) Path() string { return d.path }

// Ping reports whether the driver is open and its file readable.
func (d *Driver) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.view(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			return corruptError(d.path, "bucket %q is missing", bucketMeta)
		}
		return nil
	})
}

// Close stops the writer (a write call already handed to it finishes
// first), closes every Subscribe channel and closes the file. Later calls
// return ontimedriver.ErrClosed; a second Close returns nil.
func (d *Driver) Close() error {
	var err error
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		close(d.quit)
		<-d.promoterDone
		<-d.writerDone
		if d.keepFreelist {
			d.syncFreelist()
		}
		d.closeSubscriptions()
		if cerr := d.db.Close(); cerr != nil {
			err = fmt.Errorf("ontimebolt: close %s: %w", d.path, cerr)
		}
	})
	return err
}

// view runs fn in a read transaction. A panic from a damaged page (bbolt
// panics on some, and a page pointing outside the file faults) becomes an
// error wrapping ErrCorrupt.
func (d *Driver) view(fn func(tx *bbolt.Tx) error) (err error) {
	if d.closed.Load() {
		return ontimedriver.ErrClosed
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = d.panicError(r)
		}
	}()
	err = d.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ontimedriver.ErrClosed
	}
	return d.classify(err)
}

// classify turns bbolt errors that only damage can cause here into errors
// wrapping ErrCorrupt: the store never puts a value and a bucket under one
// name, so bbolt finding one where the other should be means a flipped flag.
func (d *Driver) classify(err error) error {
	if errors.Is(err, berrors.ErrIncompatibleValue) {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, d.path, err)
	}
	return err
}

func (d *Driver) panicError(r any) error {
	err := corruptError(d.path, "reading the file failed: %v", r)
	d.log.Error("ontimebolt: panic while accessing the store file; the file is probably damaged",
		"path", d.path, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return err
}

// A request is one write call waiting for the writer.
type request struct {
	ctx context.Context
	// topic is the topic fn writes ("" for none): its entry in the topic
	// index is set from the file after the commit.
	topic string
	// fn runs inside the shared transaction. It may run more than once
	// (when another call in the batch fails and the batch is redone), so it
	// must set its results from scratch each time and do nothing outside
	// the transaction.
	fn   func(tx *bbolt.Tx) error
	done chan error
}

// write hands fn to the writer and waits for the commit (and its fsync).
// Once the writer has taken the request, write waits for the outcome even if
// ctx ends, so that an error always means nothing was written.
func (d *Driver) write(ctx context.Context, topic string, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.closed.Load() {
		return ontimedriver.ErrClosed
	}
	r := &request{ctx: ctx, topic: topic, fn: fn, done: make(chan error, 1)}
	d.waiting.Add(1)
	select {
	case d.reqs <- r:
		d.waiting.Add(-1)
	case <-d.quit:
		d.waiting.Add(-1)
		return ontimedriver.ErrClosed
	case <-ctx.Done():
		d.waiting.Add(-1)
		return ctx.Err()
	}
	return <-r.done
}

// writer is the group commit loop. It takes one request, then every request
// already waiting (up to MaxBatch), and runs them in one transaction: one
// commit and one fsync for all. A lone caller pays one fsync and no added
// delay; under load, callers that arrive during a commit share the next one.
//
// When the writer has had nothing to do for freelistIdle after a commit,
// it writes bbolt's free-page list (see freelist.go).
func (d *Driver) writer() {
	defer close(d.writerDone)
	debug.SetPanicOnFault(true)
	batch := make([]*request, 0, d.maxBatch)
	idle := time.NewTimer(d.freelistIdle)
	if d.freelistIdle <= 0 {
		idle.Stop()
	}
	defer idle.Stop()
	for {
		select {
		case r := <-d.reqs:
			batch = append(batch[:0], r)
		case <-idle.C:
			d.syncFreelist()
			continue
		case <-d.quit:
			return
		}
	gather:
		for len(batch) < d.maxBatch {
			select {
			case r := <-d.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		d.runBatch(batch)
		clear(batch)
		if d.freelistIdle > 0 {
			idle.Reset(d.freelistIdle)
		}
	}
}

// runBatch commits a batch. A call whose fn fails is taken out and answered
// with its error, and the rest are redone in a fresh transaction, so one bad
// call never fails or half-applies another.
//
// The transaction ends by reading the head of every topic the batch wrote;
// the topic index takes them once the commit (and its fsync) is done, before
// any caller is answered, so the index never shows a rolled back write and
// a caller that was told of a write (or a Subscribe listener woken by it)
// finds the index up to date.
func (d *Driver) runBatch(batch []*request) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		live = append(live, r)
	}
	for len(live) > 0 {
		failed, failErr := -1, error(nil)
		topics := batchTopics(live)
		err := d.update(func(tx *bbolt.Tx) error {
			for i, r := range live {
				if err := d.call(r.fn, tx); err != nil {
					failed, failErr = i, err
					return err
				}
			}
			if len(topics) > 0 {
				heads := d.topicHeads(tx, topics)
				tx.OnCommit(func() { d.idx.apply(heads) })
			}
			return nil
		})
		if failed >= 0 {
			live[failed].done <- failErr
			live = append(live[:failed], live[failed+1:]...)
			continue
		}
		if err != nil {
			d.log.Error("ontimebolt: commit failed", "path", d.path, "err", err)
			err = fmt.Errorf("ontimebolt: %s: commit: %w", d.path, err)
			d.refreshIndex(topics)
		} else {
			d.commits.Add(1)
		}
		for _, r := range live {
			r.done <- err
		}
		return
	}
}

func (d *Driver) call(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = d.panicError(r)
		}
	}()
	return d.classify(fn(tx))
}

// update runs fn in a write transaction and commits it. A fault on a
// damaged page (while fn reads, or while the commit copies a node out of
// the file) becomes an error wrapping ErrCorrupt, and the transaction is
// rolled back: the writer goroutine faults this way already, and Open's
// goroutine (dropLeases, initLayout) needs it set here.
//
// It does what bbolt's DB.Update does, but rolls a transaction that
// panicked back from memory. bbolt's own rollback after a panic rebuilds
// its free list by walking every page when the file holds no written list,
// which is the case between this store's commits (see freelist.go): on a
// damaged file that walk panics in its turn with bbolt's write lock held,
// and every later write would wait for the lock forever.
func (d *Driver) update(fn func(*bbolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	tx, err := d.db.Begin(true)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = d.panicError(r)
			_ = tx.Rollback() // ErrTxClosed when the commit got as far as closing it
		}
	}()
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
