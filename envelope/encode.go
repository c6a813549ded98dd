package envelope

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
)

const (
	magic         = "\x89BIN\r\n\x1a\n"
	formatVersion = 1
	// fixedLen is the size of magic, version and the two offsets.
	fixedLen = 18
	// prefixLen is fixedLen plus the header count, as written by Encode.
	prefixLen = fixedLen + 2
	// maxField is the largest key, value or header count a u16 can hold.
	maxField = math.MaxUint16
	// smallHeaders is the header count up to which duplicate keys are
	// resolved by scanning instead of with a map (scanning allocates nothing).
	smallHeaders = 32
)

// Encode returns an envelope in BinaryMessageFormatV1 holding the given
// correlation id, content type, headers and body.
//
// Headers are written in the order the Python writer uses: correlation_id
// first; content-type if contentType is not empty; then headers in order. A
// header whose key equals an earlier key (including correlation_id and
// content-type) replaces that earlier value in place: the key keeps its first
// position and takes the last value given for it.
//
// Length fields hold byte lengths. The Python writer stores code-point counts,
// which are identical for ASCII; see the package documentation.
//
// Encode returns an error if any key or value is longer than 65535 bytes, if
// more than 65535 distinct headers would be written, or if the envelope would
// be larger than 4 GiB − 1 bytes (its offsets are 32-bit).
func Encode(correlationID, contentType string, headers []Header, body []byte) ([]byte, error) {
	return AppendEncode(nil, correlationID, contentType, headers, body)
}

// AppendEncode is like [Encode] but appends the envelope to dst and returns
// the extended slice. If dst has enough spare capacity and there are at most
// 32 headers, it does not allocate. On error dst is returned unchanged.
func AppendEncode(dst []byte, correlationID, contentType string, headers []Header, body []byte) ([]byte, error) {
	l := headerList{corr: correlationID, ct: contentType, hasCT: contentType != "", user: headers}
	if err := l.validate(); err != nil {
		return dst, err
	}
	l.resolve()

	count, block := 0, uint64(0)
	l.each(func(k, v string) {
		count++
		block += 4 + uint64(len(k)) + uint64(len(v))
	})
	if count > maxField {
		return dst, errors.New("envelope: " + strconv.Itoa(count) + " headers, at most 65535 allowed")
	}
	dataStart := prefixLen + block
	total, err := encodedSize(dataStart, uint64(len(body)))
	if err != nil {
		return dst, err
	}

	dst = slices.Grow(dst, int(total))
	dst = append(dst, magic...)
	dst = binary.BigEndian.AppendUint16(dst, formatVersion)
	dst = binary.BigEndian.AppendUint32(dst, fixedLen)
	dst = binary.BigEndian.AppendUint32(dst, uint32(dataStart))
	dst = binary.BigEndian.AppendUint16(dst, uint16(count))
	l.each(func(k, v string) {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(v)))
		dst = append(dst, v...)
	})
	return append(dst, body...), nil
}

// encodedSize returns the size of an envelope whose body starts at dataStart,
// or an error if it does not fit the format's 32-bit offsets (or an int).
func encodedSize(dataStart, bodyLen uint64) (uint64, error) {
	total := dataStart + bodyLen
	if total > math.MaxUint32 || total > math.MaxInt {
		return 0, errors.New("envelope: encoded size " + strconv.FormatUint(total, 10) + " exceeds 4294967295 bytes")
	}
	return total, nil
}

// headerList is the sequence of headers as given to Encode, before
// duplicate keys are resolved: correlation_id, content-type (if any), then the
// user headers.
type headerList struct {
	corr, ct string
	hasCT    bool
	user     []Header
	// resolved holds the effective headers when there are too many to
	// resolve by scanning; nil otherwise.
	resolved []Header
}

func (l *headerList) len() int {
	n := 1 + len(l.user)
	if l.hasCT {
		n++
	}
	return n
}

func (l *headerList) at(i int) Header {
	if i == 0 {
		return Header{HeaderCorrelationID, l.corr}
	}
	i--
	if l.hasCT {
		if i == 0 {
			return Header{HeaderContentType, l.ct}
		}
		i--
	}
	return l.user[i]
}

// validate checks every key and value given, including those that a later
// header replaces.
func (l *headerList) validate() error {
	if len(l.corr) > maxField {
		return errors.New("envelope: correlation id is " + strconv.Itoa(len(l.corr)) + " bytes, at most 65535 allowed")
	}
	if len(l.ct) > maxField {
		return errors.New("envelope: content type is " + strconv.Itoa(len(l.ct)) + " bytes, at most 65535 allowed")
	}
	for i, h := range l.user {
		if len(h.Key) > maxField {
			return errors.New("envelope: header " + strconv.Itoa(i) + ": key is " + strconv.Itoa(len(h.Key)) + " bytes, at most 65535 allowed")
		}
		if len(h.Value) > maxField {
			return errors.New("envelope: header " + strconv.Itoa(i) + " (" + strconv.Quote(truncate(h.Key, 64)) + "): value is " + strconv.Itoa(len(h.Value)) + " bytes, at most 65535 allowed")
		}
	}
	return nil
}

// resolve precomputes the effective headers with a map when the list is too
// long for each's quadratic scan.
func (l *headerList) resolve() {
	n := l.len()
	if n <= smallHeaders {
		return
	}
	pos := make(map[string]int, n)
	out := make([]Header, 0, n)
	for i := 0; i < n; i++ {
		h := l.at(i)
		if p, ok := pos[h.Key]; ok {
			out[p].Value = h.Value
			continue
		}
		pos[h.Key] = len(out)
		out = append(out, h)
	}
	l.resolved = out
}

// each calls fn for every header that is written, in wire order: each key at
// its first position, with the last value given for it.
func (l *headerList) each(fn func(key, value string)) {
	if l.resolved != nil {
		for _, h := range l.resolved {
			fn(h.Key, h.Value)
		}
		return
	}
	n := l.len()
outer:
	for i := 0; i < n; i++ {
		h := l.at(i)
		for j := 0; j < i; j++ {
			if l.at(j).Key == h.Key {
				continue outer // written at its first position already
			}
		}
		v := h.Value
		for j := i + 1; j < n; j++ {
			if hj := l.at(j); hj.Key == h.Key {
				v = hj.Value
			}
		}
		fn(h.Key, v)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
