package ontimebolt

import (
	"fmt"
	"os"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Space is how the bytes of the store file are used.
type Space struct {
	// File is the size of the file.
	File int64
	// Free is the part of File that holds nothing: pages freed by
	// deletes (and by the copy-on-write of every commit) and the space
	// bbolt grew the file by ahead of need. Later writes reuse it; only
	// Compact gives it back to the file system.
	Free int64
}

// Space reports how the bytes of the store file are used. It reads no page
// of the file.
func (d *Driver) Space() (Space, error) {
	if d.closed.Load() {
		return Space{}, ontimedriver.ErrClosed
	}
	info, err := os.Stat(d.path)
	if err != nil {
		return Space{}, fmt.Errorf("ontimebolt: %s: %w", d.path, err)
	}
	var inUse int64
	err = d.db.View(func(tx *bbolt.Tx) error {
		st := d.db.Stats()
		inUse = tx.Size() - int64(st.FreePageN+st.PendingPageN)*int64(d.db.Info().PageSize)
		return nil
	})
	if err != nil {
		return Space{}, fmt.Errorf("ontimebolt: %s: %w", d.path, err)
	}
	return Space{File: info.Size(), Free: max(info.Size()-inUse, 0)}, nil
}
