package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// encoding/json is lenient where a request must not be: it lets the last
// of two duplicate keys win, matches a key to a field in any letter case
// ({"IDS": …} fills "ids"), and turns invalid UTF-8 and lone UTF-16
// surrogates (\ud800) into U+FFFD, so that two different ids can become
// the same one. A body one reader sees as {"ids": ["a"]} and another as
// {"ids": null} is how a request is smuggled past a check. checkStrict
// refuses all of that after encoding/json has decoded the document (so
// that syntax and type errors keep their own words): the API reads a
// document one way only.

// checkStrict checks data, a JSON document that decodes into a value of
// type t: valid UTF-8, no lone surrogate escape, no key given twice in an
// object, and every key of one of the API's own objects spelled exactly
// as its field (and so never two keys that differ only in letter case).
// Objects inside a free-form body (a json.RawMessage field) may hold keys
// that differ in case, as JSON allows, but no duplicates.
func checkStrict(data []byte, t reflect.Type) *apiError {
	if !utf8.Valid(data) {
		return errorf(http.StatusBadRequest, "malformed_json", "the JSON document is not valid UTF-8 (byte %d); JSON text is UTF-8 (RFC 8259)", invalidUTF8At(data))
	}
	if i := loneSurrogate(data); i >= 0 {
		return errorf(http.StatusBadRequest, "malformed_json", "the string escape %s at byte %d is a lone UTF-16 surrogate, not a character; encode the character itself or a surrogate pair", data[i:i+6], i)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	c := keyChecker{dec: dec}
	return c.value(t, "")
}

// invalidUTF8At returns the offset of the first byte of data that is not
// part of valid UTF-8.
func invalidUTF8At(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// loneSurrogate returns the offset of the first \uXXXX escape of a JSON
// string in data that is a UTF-16 surrogate not paired as high then low,
// or -1. data is valid JSON as far as it matters: the scan only tracks
// strings and their escapes.
func loneSurrogate(data []byte) int {
	if bytes.IndexByte(data, '\\') < 0 {
		return -1
	}
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\':
			if i+1 >= len(data) {
				return -1
			}
			if data[i+1] != 'u' {
				i++ // \" \\ \/ \b \f \n \r \t
				continue
			}
			u, ok := hex4(data, i+2)
			if !ok {
				return -1 // a syntax error, already reported by the decoder
			}
			switch {
			case u >= 0xd800 && u < 0xdc00: // high: a low one must follow
				if i+12 > len(data) || data[i+6] != '\\' || data[i+7] != 'u' {
					return i
				}
				if lo, ok := hex4(data, i+8); !ok || lo < 0xdc00 || lo > 0xdfff {
					return i
				}
				i += 11
			case u >= 0xdc00 && u <= 0xdfff:
				return i
			default:
				i += 5
			}
		}
	}
	return -1
}

// hex4 reads the four hex digits at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// keyChecker walks a decoded document's tokens along its Go type.
type keyChecker struct {
	dec *json.Decoder
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// value checks the next value; t is its Go type (nil: free-form JSON).
func (c *keyChecker) value(t reflect.Type, path string) *apiError {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || t != nil && t.Kind() == reflect.Interface {
		t = nil
	}
	tok, err := c.dec.Token()
	if err != nil {
		return nil // the document decoded, so this cannot happen; the decoder has the words
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; c.dec.More(); i++ {
			if e := c.value(elem, fmt.Sprintf("%s[%d]", path, i)); e != nil {
				return e
			}
		}
	case '{':
		if e := c.object(t, path); e != nil {
			return e
		}
	}
	_, _ = c.dec.Token() // the closing delimiter
	return nil
}

// object checks the members of an object (its '{' read).
func (c *keyChecker) object(t reflect.Type, path string) *apiError {
	var fields map[string]reflect.Type
	var elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = jsonFields(t)
	case t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := map[string]bool{}
	for c.dec.More() {
		tok, err := c.dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		where := "the object"
		if path != "" {
			where = path
		}
		if seen[key] {
			return errorf(http.StatusBadRequest, "duplicate_field", "key %q appears twice in %s; give each key once", key, where)
		}
		seen[key] = true
		vt := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, key) {
						return errorf(http.StatusBadRequest, "unknown_field", "unknown field %q in %s: keys are case-sensitive; the field is %q", key, where, name)
					}
				}
				return errorf(http.StatusBadRequest, "unknown_field", "unknown field %q in %s", key, where)
			}
			vt = ft
		}
		if e := c.value(vt, joinPath(path, key)); e != nil {
			return e
		}
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldCache holds jsonFields' answers by type.
var fieldCache sync.Map

// jsonFields returns the JSON names of a struct's fields with their types,
// as encoding/json names them (the tag's name, else the field's name;
// "-" and unexported fields left out).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}
