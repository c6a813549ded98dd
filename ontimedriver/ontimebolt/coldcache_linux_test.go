package ontimebolt_test

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cold page cache for one file, without touching the rest of the machine's
// cache (other tests and programs share it): the file's cached pages are
// dropped with posix_fadvise(POSIX_FADV_DONTNEED), and what a call read of
// it is the number of its pages resident in the cache afterwards
// (mincore). bbolt maps the file with MADV_RANDOM, so a page fault reads
// the one page; the reads of the file header (precheck's and bbolt's
// ReadAt) bring their readahead in too, the same for every file.

// dropCache evicts path's pages from the page cache.
func dropCache(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if n := residentPages(t, path); n > 0 {
		t.Fatalf("%d pages of %s still cached after FADV_DONTNEED", n, path)
	}
}

// residentPages counts path's pages in the page cache.
func residentPages(t testing.TB, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() == 0 {
		return 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(info.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(m) }()
	pageSize := os.Getpagesize()
	vec := make([]byte, (len(m)+pageSize-1)/pageSize)
	// x/sys/unix has no mincore wrapper on Linux.
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
