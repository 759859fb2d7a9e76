// Package rawjson reads JSON request bodies without decoding them into generic maps:
// a face validates the body once (Parse), then walks the members it needs (Doc.Fields,
// Doc.Elems, Doc.Get) as slices of the body and decodes only the values it keeps
// (String, Value); or it reads the body while checking it (Walk), when it wants one
// pass and the byte where a body breaks (SyntaxError). Decoding every vendor payload
// into map[string]any was most of a JSON face's cost; a face built on this package
// needs no second decoder, because Parse and Walk run the package's one scanner, which
// accepts exactly the documents encoding/json accepts.
package rawjson

import (
	"encoding/binary"
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

// SyntaxError is where and why a document is not JSON.
type SyntaxError struct {
	Offset int    // of the byte where the document stops being JSON (its length at its end)
	Msg    string // what was found, or expected, there
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at byte " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// Validate is Parse for a document a face keeps as bytes and reads later (without an
// index): it says whether b is exactly one JSON value and, when it is not, where it
// breaks (a *SyntaxError).
func Validate(b []byte) error {
	w := NewWalk(b)
	end, err := w.Value(0)
	if err != nil {
		return err
	}
	return w.End(end)
}

// Walk is the checking walk, for a face that reads a body while it checks it (one pass
// over the bytes, no index): Members and Elements walk a container, Value checks (and
// skips) a value the face does not read, End checks what follows the document's
// value. Offsets are indexes in the body; the grammar, the depth limit and the errors
// are Parse's.
type Walk struct {
	b     []byte
	depth int // containers around the value being walked
}

// NewWalk walks the body b.
func NewWalk(b []byte) Walk { return Walk{b: b} }

// Value checks the one JSON value at b[i:] (white space before it allowed) and
// returns the index after it.
func (w *Walk) Value(i int) (int, error) {
	if i < len(w.b) && w.b[i] == '"' { // most members are strings: no detour through scan
		if end, _, ok := scanString(w.b, i); ok {
			return end, nil
		}
	}
	end, at, msg := scan(nil, w.b, i, w.depth)
	if msg != "" {
		return 0, &SyntaxError{Offset: at, Msg: msg}
	}
	return end, nil
}

// Counts reads b when it is exactly a flat object of counts, {"key": <count>, ...}
// (white space around it allowed; a count is a non-negative integer literal that fits
// in an int64), calling fn with each key (decoded; don't keep it) and count, in
// document order, until fn returns false. ok is false when fn stopped it or b is
// anything else (a nested value, a string, a float, a negative number, not JSON),
// perhaps after some calls: the caller then reads b another way. It is the fast path
// for the usage objects SDKs send, read in one pass without an index or a decoded map.
func Counts(b []byte, fn func(key []byte, n int64) bool) (ok bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		// a usage key is short plain ASCII: read it byte by byte, and anything else
		// (an escape, a non-ASCII byte) as member reads any key
		kend := i + 1
		for kend < len(b) && b[kend] < 0x80 && plainByte[b[kend]] {
			kend++
		}
		var key []byte
		vstart := 0
		if kend < len(b) && b[kend] == '"' {
			key, kend = b[i+1:kend], kend+1
			if vstart = skipWS(b, kend); vstart >= len(b) || b[vstart] != ':' {
				return false
			}
			vstart++
		} else {
			var isPlain bool
			var msg string
			if vstart, kend, isPlain, _, msg = member(b, i); msg != "" {
				return false
			}
			key = b[i+1 : kend-1]
			if !isPlain {
				s, _ := String(b[i:kend])
				key = []byte(s)
			}
		}
		n, vend, isCount := count(b, skipWS(b, vstart))
		if !isCount || !fn(key, n) {
			return false
		}
		next, done, valid := after(b, vend, true)
		switch {
		case !valid:
			return false
		case done:
			return skipWS(b, next) == len(b)
		}
		i = skipWS(b, next)
	}
}

// count reads the count at b[i] (see Counts) and returns it and the index after it.
func count(b []byte, i int) (n int64, end int, ok bool) {
	start := i
	for i < len(b) && isDigit(b[i]) {
		n = n*10 + int64(b[i]-'0') // wraps past 18 digits: read again below
		i++
	}
	digits := i - start
	switch {
	case digits == 0 || digits > 19 || (b[start] == '0' && digits > 1):
		return 0, 0, false
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'):
		return 0, 0, false
	case digits == 19: // may not fit
		v, err := strconv.ParseInt(string(b[start:i]), 10, 64)
		return v, i, err == nil
	}
	return n, i, true
}

// SkipSpace returns the index of the first byte at or after b[i] that is not white
// space.
func (w *Walk) SkipSpace(i int) int { return skipWS(w.b, i) }

// TrimSpace strips the white space JSON allows around a value.
func TrimSpace(b []byte) []byte {
	i, j := skipWS(b, 0), len(b)
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\n' || b[j-1] == '\r') {
		j--
	}
	return b[i:j]
}

// End checks that only white space follows the document's value, which ends at b[i].
func (w *Walk) End(i int) error {
	if j := skipWS(w.b, i); j != len(w.b) {
		return &SyntaxError{Offset: j, Msg: "data after the JSON value"}
	}
	return nil
}

// Members walks the object at b[i] == '{', checking it on the way: for each member fn
// gets the decoded key (don't keep it) and the index of its value, checks the value
// itself (Value, or walking it with Members or Elements) and returns the index after
// it. Members returns the index after the object.
func (w *Walk) Members(i int, fn func(key []byte, at int) (int, error)) (int, error) {
	i, empty, err := w.enter(i, '}')
	if empty || err != nil {
		return i, err
	}
	return w.leave(w.members(i, fn))
}

// leave ends a container enter counted.
func (w *Walk) leave(end int, err error) (int, error) {
	w.depth--
	return end, err
}

// enter reads past the opener of the container at b[i], checking the depth limit, and
// counts the container in the depth unless it is empty (next is then the index after
// its closer).
func (w *Walk) enter(i int, closer byte) (next int, empty bool, err error) {
	if w.depth >= MaxDepth {
		return 0, false, &SyntaxError{Offset: i, Msg: tooDeep}
	}
	i = skipWS(w.b, i+1)
	if i < len(w.b) && w.b[i] == closer {
		return i + 1, true, nil
	}
	w.depth++
	return i, false, nil
}

func (w *Walk) members(i int, fn func(key []byte, at int) (int, error)) (int, error) {
	b := w.b
	for {
		kstart := i
		vstart, kend, isPlain, at, msg := member(b, kstart)
		if msg != "" {
			return 0, &SyntaxError{Offset: at, Msg: msg}
		}
		key := b[kstart+1 : kend-1]
		if !isPlain {
			s, _ := String(b[kstart:kend])
			key = []byte(s)
		}
		vstart = skipWS(b, vstart)
		if vstart >= len(b) {
			return 0, &SyntaxError{Offset: vstart, Msg: "unexpected end of input"}
		}
		vend, err := fn(key, vstart)
		if err != nil {
			return 0, err
		}
		var done bool
		if i, done, err = w.item(vend, true); done || err != nil {
			return i, err
		}
	}
}

// item reads what follows the member (obj) or element that ends at b[vend]: done and
// the index after the container, or the index of the next member or element.
func (w *Walk) item(vend int, obj bool) (int, bool, error) {
	next, done, ok := after(w.b, vend, obj)
	switch {
	case !ok:
		return 0, false, &SyntaxError{Offset: next, Msg: afterError(w.b, next, obj)}
	case done:
		return next, true, nil
	}
	return skipWS(w.b, next), false, nil
}

// Elements walks the array at b[i] == '[' the way Members walks an object.
func (w *Walk) Elements(i int, fn func(at int) (int, error)) (int, error) {
	i, empty, err := w.enter(i, ']')
	if empty || err != nil {
		return i, err
	}
	return w.leave(w.elements(i, fn))
}

func (w *Walk) elements(i int, fn func(at int) (int, error)) (int, error) {
	b := w.b
	for {
		if i >= len(b) {
			return 0, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
		}
		vend, err := fn(i)
		if err != nil {
			return 0, err
		}
		var done bool
		if i, done, err = w.item(vend, false); done || err != nil {
			return i, err
		}
	}
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

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainByte marks the bytes a string holds as they are: anything but control
// characters, the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x100; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// specialIn reports whether one of the eight bytes of x (little-endian) is not plain:
// a quote, a backslash or a control byte (bit tricks: a byte equal to c is a zero byte
// of x^c; a byte below 0x20 borrows when 0x20 is taken from it). It never misses one;
// a false alarm only sends the bytes to the byte-at-a-time loop.
func specialIn(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - lo) & ^v & hi }
	return (zero(x^(lo*'"')) | zero(x^(lo*'\\')) | ((x - lo*0x20) &^ x & hi)) != 0
}

// scanString scans the string starting at b[i] == '"' and returns the index after its
// closing quote, and whether the string is plain ASCII without escapes (its bytes are
// its value).
func scanString(b []byte, i int) (end int, plain, ok bool) {
	i++
	var high uint64 // the bytes seen, or-ed: bit 7 of a byte is set by a non-ASCII one
	esc := false
	for i < len(b) {
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if specialIn(x) {
				break
			}
			high |= x
			i += 8
		}
		for i < len(b) && plainByte[b[i]] {
			high |= uint64(b[i])
			i++
		}
		if i >= len(b) {
			return 0, false, false
		}
		switch b[i] {
		case '"':
			return i + 1, !esc && high&0x8080808080808080 == 0, true
		case '\\':
			esc = true
			if i+1 >= len(b) {
				return 0, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return 0, false, false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return 0, false, false
					}
				}
				i += 6
			default:
				return 0, false, false
			}
		default: // a control character
			return 0, false, false
		}
	}
	return 0, false, false
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber scans -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	ok := true
	if i < len(b) && b[i] == '0' {
		i++
	} else if i, ok = digits(b, i); !ok {
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		if i, ok = digits(b, i+1); !ok {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i, ok = digits(b, i); !ok {
			return 0, false
		}
	}
	return i, true
}

// digits scans one or more decimal digits.
func digits(b []byte, i int) (int, bool) {
	start := i
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i, i > start
}

// scan checks the one JSON value at b[i:] (white space before it allowed) and returns
// the index after it; on failure, msg says why and at where (the messages a sender
// sees in a 400). It is the package's one reading of the grammar: Parse runs it with
// its Doc, recording the index of container ends, the checking walk without (d nil).
// depth is the number of containers around the value. It runs without recursion (an
// explicit stack of open containers), so depth costs no goroutine stack.
func scan(d *Doc, b []byte, i, depth int) (end, at int, msg string) {
	i = skipWS(b, i)
	if i < len(b) && b[i] != '{' && b[i] != '[' {
		return scanScalar(b, i)
	}
	return scanNested(d, b, i, depth)
}

// scanScalar checks the string, number or literal at b[i].
func scanScalar(b []byte, i int) (end, at int, msg string) {
	var ok bool
	switch c := b[i]; c {
	case '"':
		if end, _, ok = scanString(b, i); !ok {
			return 0, i, "invalid string"
		}
	case 't', 'f', 'n':
		word := "null"
		if c == 't' {
			word = "true"
		} else if c == 'f' {
			word = "false"
		}
		if end, ok = literal(b, i, word); !ok {
			return 0, i, "invalid literal"
		}
	default:
		if end, ok = scanNumber(b, i); !ok {
			return 0, i, "invalid value"
		}
	}
	return end, 0, ""
}

// scanNested is scan of a value that may be a container (or the end of the input).
func scanNested(d *Doc, b []byte, i, depth int) (end, at int, msg string) {
	// the open containers: the index of each in d.open (0 without d) << 1, | 1 for an
	// object. Small: it is zeroed for every container a checking walk checks, and
	// deeper documents grow it.
	var buf [16]uint64
	stack := buf[:0]
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return 0, i, "unexpected end of input"
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth+len(stack) >= MaxDepth {
				return 0, i, tooDeep
			}
			k := 0
			if d != nil {
				k = len(d.open)
				d.open = append(d.open, i)
				d.end = append(d.end, 0)
			}
			closer, obj := byte('}'), 1
			if c == '[' {
				closer, obj = ']', 0
			}
			j := skipWS(b, i+1)
			if j < len(b) && b[j] == closer {
				i = j + 1
				if d != nil {
					d.end[k] = i
				}
				break
			}
			stack = append(stack, uint64(k)<<1|uint64(obj))
			i = j
			if obj == 1 {
				if i, _, _, at, msg = member(b, i); msg != "" {
					return 0, at, msg
				}
			}
			continue
		default:
			if i, at, msg = scanScalar(b, i); msg != "" {
				return 0, at, msg
			}
		}
		// after a value: close containers, or go on to the next member or element
		for {
			if len(stack) == 0 {
				return i, 0, ""
			}
			top := stack[len(stack)-1]
			obj := top&1 == 1
			next, done, ok := after(b, i, obj)
			if !ok {
				return 0, next, afterError(b, next, obj)
			}
			i = next
			if !done {
				if obj {
					if i, _, _, at, msg = member(b, i); msg != "" {
						return 0, at, msg
					}
				}
				break
			}
			if d != nil {
				d.end[int(top>>1)] = i
			}
			stack = stack[:len(stack)-1]
		}
	}
}

// member checks `"key":` at b[i:] (white space before it allowed) and returns the
// index after the colon, the index after the key and whether the key is plain.
func member(b []byte, i int) (next, kend int, plain bool, at int, msg string) {
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '"' {
		return 0, 0, false, i, "expected a string key"
	}
	kend, plain, ok := scanString(b, i)
	if !ok {
		return 0, 0, false, i, "invalid string"
	}
	i = skipWS(b, kend)
	if i >= len(b) || b[i] != ':' {
		return 0, 0, false, i, "expected : after an object key"
	}
	return i + 1, kend, plain, 0, ""
}

// after reads what follows a member (obj) or an element at b[i]: a comma (the index
// after it) or the container's closer (done, the index after it). When it
// is neither, ok is false and next is where (afterError says why).
func after(b []byte, i int, obj bool) (next int, done, ok bool) {
	i = skipWS(b, i)
	if i < len(b) {
		switch b[i] {
		case ',':
			return i + 1, false, true
		case '}':
			if obj {
				return i + 1, true, true
			}
		case ']':
			if !obj {
				return i + 1, true, true
			}
		}
	}
	return i, false, false
}

// afterError is why after found neither a comma nor the closer at b[i].
func afterError(b []byte, i int, obj bool) string {
	switch {
	case i >= len(b):
		return "unexpected end of input"
	case obj:
		return "expected , or } after an object member"
	}
	return "expected , or ] after an array element"
}

func literal(b []byte, i int, s string) (int, bool) {
	if len(b)-i >= len(s) && string(b[i:i+len(s)]) == s {
		return i + len(s), true
	}
	return 0, false
}

// skipString returns the index after the (valid) string at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) || b[i] == '"' {
			return i + 1
		}
		i++ // a backslash: skip what it escapes
	}
	return len(b)
}

// structural marks the bytes skipValue stops at inside a container.
var structural = func() (t [256]bool) {
	for _, c := range `"{}[]` {
		t[c] = true
	}
	return t
}()

// skipValue returns the index after the (valid) value at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			for i < len(b) && !structural[b[i]] {
				i++
			}
			if i >= len(b) {
				break
			}
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			default:
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default: // number or literal
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
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
