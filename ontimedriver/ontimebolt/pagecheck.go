package ontimebolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// checkPages is the page-level half of Options.CheckOnOpen. It walks every
// page reachable from the header through the file itself (ReadAt, never
// bbolt's memory map), checking each offset before using it, so damage of
// any kind is an error and never a fault or an endless descent. It checks
// what bbolt's own Tx.Check does (page types, references in bounds, no page
// referenced twice, key order, every page either reachable or free), which
// bbolt runs on a goroutine of its own where a fault would end the process.
//
// bbolt's format: a page is a 16-byte header (id u64, flags u16, count u16,
// overflow u32) and count elements of 16 bytes. A branch element is (pos
// u32, ksize u32, child page u64); a leaf element is (flags u32, pos u32,
// ksize u32, vsize u32); pos is relative to the element. A leaf element with
// flag 1 is a nested bucket: its value is (root page u64, sequence u64),
// followed by the bucket's only page inline when root is 0.
func checkPages(f io.ReaderAt, path string, m boltMeta) error {
	c := &pageChecker{f: f, pageSize: uint64(m.pageSize), hwm: m.pgid, seen: make(map[uint64]bool)}
	c.seen[0], c.seen[1] = true, true // the two meta pages
	if err := c.tree(m.root, nil, nil, 0); err != nil {
		return corruptError(path, "page check: %v", err)
	}
	if m.freelist == noFreelistPgid {
		return nil // bbolt rebuilds the free list by scanning
	}
	free, err := c.freelist(m.freelist)
	if err != nil {
		return corruptError(path, "page check: free list: %v", err)
	}
	for id := uint64(2); id < c.hwm; id++ {
		if !c.seen[id] && !free[id] {
			return corruptError(path, "page check: page %d is neither in use nor free", id)
		}
	}
	return nil
}

const (
	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagFreelist = 0x10
	elemLen      = 16
	maxDepth     = 64
)

type pageChecker struct {
	f        io.ReaderAt
	pageSize uint64
	hwm      uint64
	seen     map[uint64]bool
	// shallow checks one page and the buckets inlined in it, not the pages
	// it points to (checkRoot).
	shallow bool
}

// checkRoot checks the root page and the buckets inlined in it, at every
// Open: the store's buckets are top-level, and a small one lives inside the
// root page. A write transaction copies an inlined bucket's page to the
// heap before it changes it, where bbolt would follow a damaged element's
// offset into other memory (which corrupts the heap rather than faulting
// on the map), so that page must be sound before anything writes. It
// reads one page.
func checkRoot(f io.ReaderAt, path string, m boltMeta) error {
	c := &pageChecker{f: f, pageSize: uint64(m.pageSize), hwm: m.pgid, seen: make(map[uint64]bool), shallow: true}
	if err := c.tree(m.root, nil, nil, 0); err != nil {
		return corruptError(path, "root page check: %v", err)
	}
	return nil
}

// page reads page id with its overflow pages and marks them seen.
func (c *pageChecker) page(id uint64) ([]byte, error) {
	if id < 2 || id >= c.hwm {
		return nil, fmt.Errorf("page %d is out of bounds (%d pages)", id, c.hwm)
	}
	hdr := make([]byte, pageHeaderLen)
	if _, err := c.f.ReadAt(hdr, int64(id*c.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d: %v", id, err)
	}
	if got := binary.LittleEndian.Uint64(hdr); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	n := uint64(binary.LittleEndian.Uint32(hdr[12:])) + 1
	if n > c.hwm-id {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the end", id, n-1)
	}
	for i := id; i < id+n; i++ {
		if c.seen[i] {
			return nil, fmt.Errorf("page %d is referenced twice", i)
		}
		c.seen[i] = true
	}
	buf := make([]byte, n*c.pageSize)
	if _, err := c.f.ReadAt(buf, int64(id*c.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d: %v", id, err)
	}
	return buf, nil
}

// tree checks the subtree at page id; its keys must lie in [lo, hi).
func (c *pageChecker) tree(id uint64, lo, hi []byte, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("page %d: tree deeper than %d", id, maxDepth)
	}
	buf, err := c.page(id)
	if err != nil {
		return err
	}
	if err := c.node(buf, lo, hi, depth); err != nil {
		return fmt.Errorf("page %d: %v", id, err)
	}
	return nil
}

// slice returns buf[off:off+n] if it is inside buf.
func slice(buf []byte, off, n uint64) ([]byte, bool) {
	if off > uint64(len(buf)) || n > uint64(len(buf))-off {
		return nil, false
	}
	return buf[off : off+n], true
}

// node checks one branch or leaf page (or inline bucket page) held in buf.
func (c *pageChecker) node(buf []byte, lo, hi []byte, depth int) error {
	if len(buf) < pageHeaderLen {
		return fmt.Errorf("page shorter than its header")
	}
	le := binary.LittleEndian
	flags, count := le.Uint16(buf[8:]), uint64(le.Uint16(buf[10:]))
	if flags != flagBranch && flags != flagLeaf {
		return fmt.Errorf("unexpected page type %#x", flags)
	}
	if pageHeaderLen+count*elemLen > uint64(len(buf)) {
		return fmt.Errorf("%d elements do not fit", count)
	}
	keys := make([][]byte, count)
	for i := range count {
		at := pageHeaderLen + i*elemLen
		e := buf[at : at+elemLen]
		var pos, ksize uint64
		if flags == flagBranch {
			pos, ksize = uint64(le.Uint32(e[0:])), uint64(le.Uint32(e[4:]))
		} else {
			pos, ksize = uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:]))
		}
		k, ok := slice(buf, at+pos, ksize)
		if !ok {
			return fmt.Errorf("element %d: key outside the page", i)
		}
		keys[i] = k
		switch {
		case i > 0 && bytes.Compare(keys[i-1], k) >= 0:
			return fmt.Errorf("element %d: keys out of order", i)
		case lo != nil && bytes.Compare(k, lo) < 0, hi != nil && bytes.Compare(k, hi) >= 0:
			return fmt.Errorf("element %d: key outside its parent's range", i)
		}
	}
	for i := range count {
		at := pageHeaderLen + i*elemLen
		e := buf[at : at+elemLen]
		if flags == flagBranch {
			if c.shallow {
				continue
			}
			childHi := hi
			if i+1 < count {
				childHi = keys[i+1]
			}
			// bbolt keeps a separator at or below its child's first key.
			if err := c.tree(le.Uint64(e[8:]), keys[i], childHi, depth+1); err != nil {
				return err
			}
			continue
		}
		v, ok := slice(buf, at+uint64(le.Uint32(e[4:]))+uint64(len(keys[i])), uint64(le.Uint32(e[12:])))
		if !ok {
			return fmt.Errorf("element %d: value outside the page", i)
		}
		if le.Uint32(e[0:])&0x01 == 0 {
			continue // a plain value
		}
		if len(v) < 16 {
			return fmt.Errorf("element %d: bucket header too short", i)
		}
		if root := le.Uint64(v); root != 0 {
			if c.shallow {
				continue
			}
			if err := c.tree(root, nil, nil, depth+1); err != nil {
				return fmt.Errorf("bucket %q: %v", keys[i], err)
			}
			continue
		}
		inline := v[16:]
		if len(inline) >= pageHeaderLen && le.Uint16(inline[8:]) != flagLeaf {
			return fmt.Errorf("bucket %q: inline page is not a leaf", keys[i])
		}
		if depth+1 > maxDepth {
			return fmt.Errorf("buckets nested deeper than %d", maxDepth)
		}
		if err := c.node(inline, nil, nil, depth+1); err != nil {
			return fmt.Errorf("bucket %q: %v", keys[i], err)
		}
	}
	return nil
}

// freelist reads the free list page and returns the free page ids.
func (c *pageChecker) freelist(id uint64) (map[uint64]bool, error) {
	buf, err := c.page(id)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	if flags := le.Uint16(buf[8:]); flags != flagFreelist {
		return nil, fmt.Errorf("page %d has type %#x", id, flags)
	}
	n, ids := uint64(le.Uint16(buf[10:])), buf[pageHeaderLen:]
	if n == 0xFFFF { // the count did not fit: it is the first element
		if len(ids) < 8 {
			return nil, fmt.Errorf("page %d: truncated count", id)
		}
		n, ids = le.Uint64(ids), ids[8:]
	}
	if n > uint64(len(ids))/8 {
		return nil, fmt.Errorf("page %d: %d ids do not fit", id, n)
	}
	free := make(map[uint64]bool, n)
	for i := range n {
		p := le.Uint64(ids[i*8:])
		switch {
		case p < 2 || p >= c.hwm:
			return nil, fmt.Errorf("free page %d is out of bounds", p)
		case free[p]:
			return nil, fmt.Errorf("page %d is free twice", p)
		case c.seen[p]:
			return nil, fmt.Errorf("page %d is both free and in use", p)
		}
		free[p] = true
	}
	return free, nil
}
