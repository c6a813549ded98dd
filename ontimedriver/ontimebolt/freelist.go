package ontimebolt

import (
	"time"

	"go.etcd.io/bbolt"
)

// bbolt keeps the list of free pages in memory and, by default, writes it
// whole at every commit: after mass deletes a file with a hundred thousand
// free pages writes (and sorts) 800 KB of page numbers per commit, whatever
// the commit wrote besides (TestPublishAfterMassCancel: 3.4 times the
// bytes of pages per publish commit). The store opens bbolt with NoFreelistSync, so that
// commits never write it, and writes it itself where it costs nothing:
// when the writer has been idle for defaultFreelistIdle, and at Close. A
// file whose last commit wrote it opens in a millisecond; one whose
// process died while writing (no list) opens after bbolt rebuilds the list
// by reading every page (see Options.NoFreelistSync).
const defaultFreelistIdle = time.Second

// syncFreelist writes the free-page list with an empty commit. It runs on
// the writer goroutine, or after it has stopped (Close): bbolt reads
// NoFreelistSync only while committing. A failure is logged: the file is
// sound without a list, and the next Open rebuilds it.
func (d *Driver) syncFreelist() {
	d.db.NoFreelistSync = false
	err := d.update(func(*bbolt.Tx) error { return nil })
	d.db.NoFreelistSync = true
	if err != nil {
		d.log.Warn("ontimebolt: writing the free-page list failed; the next open rebuilds it from the pages", "path", d.path, "err", err)
	}
}
