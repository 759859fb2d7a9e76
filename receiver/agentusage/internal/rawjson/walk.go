package rawjson

import (
	"strconv"
)

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
