package ontimebolt

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strconv"
	"unicode/utf8"
)

// Records are versioned and checksummed, so that a flipped byte on disk is
// reported instead of handed to a worker:
//
//	[0]    version (2)
//	[1:5]  CRC-32C (Castagnoli), little-endian, over the record's key and bytes [5:]
//	[5:]   fields as varints and length-prefixed strings; the payload last
//
// The key (which holds the id and the topic) is covered by the checksum
// rather than stored twice, so a record found under the wrong key, or the
// wrong topic's, is caught too. Version 1 (format 1) covered the id only;
// the migration reads it (see migrate.go).
const (
	recordVersion = 2
	headerLen     = 5
	maxErrorLen   = 1024
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errBadRecord = errors.New("bad record")

// record is a scheduled or leased timer.
type record struct {
	due        int64  // Unix µs
	token      uint64 // lease token; 0 when not leased
	leaseUntil int64  // Unix µs; meaningful only when token != 0
	attempt    uint64
	lastError  string
	payload    []byte // points into the transaction's memory after decode
}

func (r *record) leased() bool { return r.token != 0 }

// claimable is the record's key time in the q index.
func (r *record) claimable() int64 {
	if r.leased() {
		return r.leaseUntil
	}
	return r.due
}

// deadRecord is a dead letter.
type deadRecord struct {
	due     int64
	diedAt  int64
	attempt uint64
	reason  string
	errText string
	payload []byte
}

func checksum(key, body []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, body)
}

// seal fills the header of b, whose body starts at headerLen, for a
// record stored under key.
func seal(key, b []byte) []byte {
	b[0] = recordVersion
	binary.LittleEndian.PutUint32(b[1:headerLen], checksum(key, b[headerLen:]))
	return b
}

// open checks the header of a value stored under key (version is the
// record version the layout writes; domain what its checksum covers) and
// returns its body.
func open(version byte, domain, b []byte) ([]byte, error) {
	if len(b) < headerLen {
		return nil, errBadRecord
	}
	if b[0] != version {
		return nil, errors.New("unknown record version " + strconv.Itoa(int(b[0])))
	}
	if binary.LittleEndian.Uint32(b[1:headerLen]) != checksum(domain, b[headerLen:]) {
		return nil, errors.New("checksum mismatch")
	}
	return b[headerLen:], nil
}

// encode returns the record as stored under key.
func (r *record) encode(key []byte) []byte {
	b := make([]byte, headerLen, headerLen+4*binary.MaxVarintLen64+len(r.lastError)+len(r.payload))
	b = binary.AppendVarint(b, r.due)
	b = binary.AppendUvarint(b, r.token)
	if r.token != 0 {
		b = binary.AppendVarint(b, r.leaseUntil)
	}
	b = binary.AppendUvarint(b, r.attempt)
	b = appendString(b, r.lastError)
	b = append(b, r.payload...)
	return seal(key, b)
}

// decodeRecord decodes a timer record stored under key.
func decodeRecord(key, b []byte) (record, error) {
	body, err := open(recordVersion, key, b)
	if err != nil {
		return record{}, err
	}
	return decodeRecordBody(body)
}

func decodeRecordBody(body []byte) (record, error) {
	var r record
	d := decoder{b: body}
	r.due = d.varint()
	r.token = d.uvarint()
	if r.token != 0 {
		r.leaseUntil = d.varint()
	}
	r.attempt = d.uvarint()
	r.lastError = d.string()
	r.payload = d.rest()
	return r, d.err
}

// encode returns the dead record as stored under key.
func (r *deadRecord) encode(key []byte) []byte {
	b := make([]byte, headerLen, headerLen+5*binary.MaxVarintLen64+len(r.reason)+len(r.errText)+len(r.payload))
	b = binary.AppendVarint(b, r.due)
	b = binary.AppendVarint(b, r.diedAt)
	b = binary.AppendUvarint(b, r.attempt)
	b = appendString(b, r.reason)
	b = appendString(b, r.errText)
	b = append(b, r.payload...)
	return seal(key, b)
}

// decodeDead decodes a dead record stored under key.
func decodeDead(key, b []byte) (deadRecord, error) {
	body, err := open(recordVersion, key, b)
	if err != nil {
		return deadRecord{}, err
	}
	return decodeDeadBody(body)
}

func decodeDeadBody(body []byte) (deadRecord, error) {
	var r deadRecord
	d := decoder{b: body}
	r.due = d.varint()
	r.diedAt = d.varint()
	r.attempt = d.uvarint()
	r.reason = d.string()
	r.errText = d.string()
	r.payload = d.rest()
	return r, d.err
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads fields in order and remembers the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errBadRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errBadRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errBadRecord
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) rest() []byte {
	if d.err != nil {
		return nil
	}
	return d.b
}

// truncateError keeps at most maxErrorLen bytes of s, cut at a rune boundary.
func truncateError(s string) string {
	if len(s) <= maxErrorLen {
		return s
	}
	cut := maxErrorLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Lease tokens are the t bucket's sequence number in base 36. The sequence
// only grows (the migration from format 1 starts it above every topic's
// sequence there), so a token is never handed out twice in the life of the
// file.
func formatToken(seq uint64) string { return strconv.FormatUint(seq, 36) }

// parseToken accepts exactly the strings formatToken makes: another
// spelling of the same number ("A" for "a", "0a") is not the token that was
// handed out, so it does not fence.
func parseToken(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 36, 64)
	if err != nil || v == 0 || formatToken(v) != s {
		return 0, false
	}
	return v, true
}
