package ontimebolt

import (
	"os"

	"golang.org/x/sys/unix"
)

// noReadahead tells the kernel that f is read at random: no readahead.
// The store reads its file through bbolt's map (which bbolt maps with
// MADV_RANDOM) apart from the header, a page or two; without this the
// kernel reads megabytes ahead of the header at every cold Open (the
// readahead window of a disk is often 8 MiB). Advice only: an error is
// ignored.
func noReadahead(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM) }
