// Package rawjson reads JSON request bodies without decoding them into generic maps:
// a face validates the body once (Parse), then walks the members it needs (Doc.Fields,
// Doc.Elems, Doc.Get) as slices of the body and decodes only the values it keeps
// (String, Value); or it reads the body while checking it (Walk), when it wants one
// pass and the byte where a body breaks (SyntaxError); or, for a flat object of counts,
// Counts. Decoding every vendor payload into map[string]any would be most of a JSON
// face's cost; a face built on this package needs no second decoder, because Parse,
// Walk and Counts run the package's one reading of the grammar, which accepts exactly
// the documents encoding/json accepts.
package rawjson

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting Parse accepts: encoding/json's own limit.
const MaxDepth = 10000

// tooDeep is why a document nested deeper than MaxDepth is refused.
var tooDeep = "nested deeper than " + strconv.Itoa(MaxDepth) + " levels"

// Doc is a document Parse accepted. It knows where each of its objects and arrays
// ends, so walking a member never reads again the containers inside it: a face that
// walks an event, then its body, then the body's members reads each byte about twice
// (once to validate, once where it is used), however deep the member it wants.
// A nil *Doc walks valid JSON checked elsewhere, skipping nested containers by reading
// them.
type Doc struct {
	b []byte
	// open and end are the offsets of every container's first byte and of the byte
	// after it, in document order (so open is sorted).
	open, end []int
	root      []byte
}

// Parse reports whether b is exactly one JSON value, surrounding white space allowed,
// with what encoding/json accepts (RFC 8259 grammar; any bytes but control characters
// inside strings, as encoding/json replaces invalid UTF-8 when decoding; numbers of any
// size; nesting up to MaxDepth). The functions and methods of the package take values
// of a parsed document (or parts of one).
func Parse(b []byte) (*Doc, bool) {
	d := &Doc{b: b}
	i := skipWS(b, 0)
	end, _, msg := scan(d, b, i, 0)
	if msg != "" || skipWS(b, end) != len(b) {
		return nil, false
	}
	d.root = b[i:end]
	return d, true
}

// Root is the document's value, without the white space around it.
func (d *Doc) Root() []byte { return d.root }

// skip returns the index in v (a slice of the document) after the value at v[i].
func (d *Doc) skip(v []byte, off, i int) int {
	if off >= 0 && i < len(v) && (v[i] == '{' || v[i] == '[') {
		if k, ok := slices.BinarySearch(d.open, off+i); ok && d.end[k]-off <= len(v) {
			return d.end[k] - off
		}
	}
	return skipValue(v, i)
}

// offset is where v starts in the document, or -1 when v is not a part of it.
func (d *Doc) offset(v []byte) int {
	if d == nil || len(v) == 0 {
		return -1
	}
	off := cap(d.b) - cap(v)
	if off < 0 || off >= len(d.b) || &d.b[off] != &v[0] {
		return -1
	}
	return off
}

// IsObject, IsArray, IsString and IsNull tell a value's type from its first byte.
func IsObject(v []byte) bool { return len(v) > 0 && v[0] == '{' }

// IsArray reports whether v is an array.
func IsArray(v []byte) bool { return len(v) > 0 && v[0] == '[' }

// IsString reports whether v is a string.
func IsString(v []byte) bool { return len(v) > 0 && v[0] == '"' }

// IsNull reports whether v is null or absent (nil), the two a decoded map cannot tell
// apart from a missing key's nil.
func IsNull(v []byte) bool { return len(v) == 0 || v[0] == 'n' }

// Fields calls fn with every member of the object obj, in document order, until fn
// returns false. The key is decoded (a slice of obj when it has no escapes; don't keep
// it). Like a decoded map, a caller that keeps the last of duplicate keys agrees with
// encoding/json.
func (d *Doc) Fields(obj []byte, fn func(key, val []byte) bool) {
	if !IsObject(obj) {
		return
	}
	off := d.offset(obj)
	i := skipWS(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		kend := skipString(obj, i)
		key := obj[i+1 : kend-1]
		if !plain(key) {
			s, _ := String(obj[i:kend])
			key = []byte(s)
		}
		i = skipWS(obj, kend)
		i = skipWS(obj, i+1) // the colon
		vend := d.skip(obj, off, i)
		if !fn(key, obj[i:vend]) {
			return
		}
		i = skipWS(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = skipWS(obj, i+1)
		}
	}
}

// Elems calls fn with every element of the array arr until fn returns false.
func (d *Doc) Elems(arr []byte, fn func(val []byte) bool) {
	if !IsArray(arr) {
		return
	}
	off := d.offset(arr)
	i := skipWS(arr, 1)
	for i < len(arr) && arr[i] != ']' {
		vend := d.skip(arr, off, i)
		if !fn(arr[i:vend]) {
			return
		}
		i = skipWS(arr, vend)
		if i < len(arr) && arr[i] == ',' {
			i = skipWS(arr, i+1)
		}
	}
}

// Get returns the value of key in the object obj; the last of duplicate keys wins, as
// in a decoded map.
func (d *Doc) Get(obj []byte, key string) ([]byte, bool) {
	var out []byte
	found := false
	d.Fields(obj, func(k, v []byte) bool {
		if string(k) == key {
			out, found = v, true
		}
		return true
	})
	return out, found
}

// plain reports whether the bytes of a string are its value: no escapes, valid UTF-8.
func plain(s []byte) bool {
	ascii := true
	for _, c := range s {
		if c == '\\' {
			return false
		}
		if c >= 0x80 {
			ascii = false
		}
	}
	return ascii || utf8.Valid(s)
}

// String returns the value of the string v, decoded as encoding/json decodes it
// (escapes resolved, invalid UTF-8 replaced); ok is false when v is not a string.
func String(v []byte) (string, bool) {
	if !IsString(v) || len(v) < 2 {
		return "", false
	}
	if body := v[1 : len(v)-1]; plain(body) {
		return string(body), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// Value decodes v as encoding/json with UseNumber decodes into an interface value:
// map[string]any, []any, string, json.Number, bool or nil. It reads v once, however
// deep (walking each level with Fields would re-read the levels below it).
func Value(v []byte) any {
	out, _ := value(v, 0)
	return out
}

// value decodes the (valid) value at b[i] and returns the index after it.
func value(b []byte, i int) (any, int) {
	if i >= len(b) {
		return nil, len(b)
	}
	switch b[i] {
	case '{':
		m := map[string]any{}
		i = skipWS(b, i+1)
		for i < len(b) && b[i] == '"' {
			kend := skipString(b, i)
			key, _ := String(b[i:kend])
			i = skipWS(b, skipWS(b, kend)+1) // the colon
			var v any
			v, i = value(b, i)
			m[key] = v
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
			}
		}
		return m, i + 1 // the closing brace
	case '[':
		out := []any{}
		i = skipWS(b, i+1)
		for i < len(b) && b[i] != ']' {
			var v any
			v, i = value(b, i)
			out = append(out, v)
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
			}
		}
		return out, i + 1
	case '"':
		end := skipString(b, i)
		s, _ := String(b[i:end])
		return s, end
	}
	end := skipValue(b, i)
	switch b[i] {
	case 't':
		return true, end
	case 'f':
		return false, end
	case 'n':
		return nil, end
	}
	return json.Number(b[i:end]), end
}
