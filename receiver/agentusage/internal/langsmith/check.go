package langsmith

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

// The face's one JSON decoder. A body (or a multipart part) is checked while it is
// read: validValue, members and elements accept exactly the JSON encoding/json accepts
// (any nesting up to its 10000 levels, any number literal, invalid UTF-8 inside
// strings) and say where a body breaks; decode.go reads the runs out of the members
// as they are checked. Values stay as slices of the request body: a run's free-form
// inputs, outputs and extra are never decoded into generic maps, only searched, with
// internal/rawjson's readers, for the few keys the mapping reads (see view.go).

// maxDepth is encoding/json's nesting limit: deeper documents are refused, as there.
const maxDepth = 10000

// syntaxError is where and why a body is not JSON.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg) }

func synErr(off int, msg string) error { return &syntaxError{off: off, msg: msg} }

// validValue checks the one JSON value at b[i:] (space before it allowed) and returns
// the index after it. It runs without recursion (an explicit stack of open
// containers), so depth costs no goroutine stack.
func validValue(b []byte, i int) (int, error) {
	var buf [64]byte
	stack := buf[:0]
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return 0, synErr(i, "unexpected end of input")
		}
		open := false
		switch c := b[i]; c {
		case '{', '[':
			if len(stack) >= maxDepth {
				return 0, synErr(i, fmt.Sprintf("nested deeper than %d levels", maxDepth))
			}
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			j := skipWS(b, i+1)
			if j < len(b) && b[j] == closer {
				i = j + 1
				break
			}
			stack = append(stack, c)
			i, open = j, true
			if c == '{' {
				var err error
				if i, err = member(b, i); err != nil {
					return 0, err
				}
			}
		case '"':
			end, _, ok := scanString(b, i)
			if !ok {
				return 0, synErr(i, "invalid string")
			}
			i = end
		case 't', 'f', 'n':
			word := "null"
			if c == 't' {
				word = "true"
			} else if c == 'f' {
				word = "false"
			}
			end, ok := lit(b, i, word)
			if !ok {
				return 0, synErr(i, "invalid literal")
			}
			i = end
		default:
			end, ok := scanNumber(b, i)
			if !ok {
				return 0, synErr(i, "invalid value")
			}
			i = end
		}
		if open {
			continue
		}
		// after a value: close containers, or go on to the next element
		for {
			if len(stack) == 0 {
				return i, nil
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, synErr(i, "unexpected end of input")
			}
			top := stack[len(stack)-1]
			if b[i] == ',' {
				i++
				if top == '{' {
					var err error
					if i, err = member(b, i); err != nil {
						return 0, err
					}
				}
				break
			}
			if (top == '{' && b[i] == '}') || (top == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if top == '{' {
				return 0, synErr(i, "expected , or } after an object member")
			}
			return 0, synErr(i, "expected , or ] after an array element")
		}
	}
}

// member checks `"key":` at b[i:] (space allowed) and returns the index after the
// colon.
func member(b []byte, i int) (int, error) {
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '"' {
		return 0, synErr(i, "expected a string key")
	}
	end, _, ok := scanString(b, i)
	if !ok {
		return 0, synErr(i, "invalid string")
	}
	i = skipWS(b, end)
	if i >= len(b) || b[i] != ':' {
		return 0, synErr(i, "expected : after an object key")
	}
	return i + 1, nil
}

// members walks the object at b[i] == '{', checking it on the way: for each member,
// fn gets the decoded key and the index of its value, checks the value itself (with
// validValue, or by walking it) and returns the index after it. One pass over the
// bytes: a decoder reads what it needs while the body is checked.
func members(b []byte, i int, fn func(key []byte, at int) (int, error)) (int, error) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, synErr(i, "expected a string key")
		}
		kend, plain, ok := scanString(b, i)
		if !ok {
			return 0, synErr(i, "invalid string")
		}
		key := b[i+1 : kend-1]
		if !plain {
			s, _ := rawjson.String(b[i:kend])
			key = []byte(s)
		}
		i = skipWS(b, kend)
		if i >= len(b) || b[i] != ':' {
			return 0, synErr(i, "expected : after an object key")
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return 0, synErr(i, "unexpected end of input")
		}
		vend, err := fn(key, i)
		if err != nil {
			return 0, err
		}
		var done bool
		if i, done, err = after(b, vend, '}'); done || err != nil {
			return i, err
		}
	}
}

// after reads what follows a member or an element at b[i]: the container's closer
// (done, the index after it) or a comma (the index of the next one).
func after(b []byte, i int, closer byte) (int, bool, error) {
	i = skipWS(b, i)
	switch {
	case i >= len(b):
		return 0, false, synErr(i, "unexpected end of input")
	case b[i] == closer:
		return i + 1, true, nil
	case b[i] != ',':
		if closer == '}' {
			return 0, false, synErr(i, "expected , or } after an object member")
		}
		return 0, false, synErr(i, "expected , or ] after an array element")
	}
	return skipWS(b, i+1), false, nil
}

// elements walks the array at b[i] == '[' the way members walks an object.
func elements(b []byte, i int, fn func(at int) (int, error)) (int, error) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return 0, synErr(i, "unexpected end of input")
		}
		vend, err := fn(i)
		if err != nil {
			return 0, err
		}
		var done bool
		if i, done, err = after(b, vend, ']'); done || err != nil {
			return i, err
		}
	}
}

// validDoc checks that b holds exactly one JSON value (space around it allowed).
func validDoc(b []byte) error {
	end, err := validValue(b, 0)
	if err != nil {
		return err
	}
	if j := skipWS(b, end); j != len(b) {
		return synErr(j, "data after the JSON value")
	}
	return nil
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

// scanString scans the string starting at b[i] == '"'. It returns the index after
// the closing quote and whether the string is plain (printable ASCII, no escapes:
// its bytes are its value).
func scanString(b []byte, i int) (end int, plain, ok bool) {
	i++
	plain = true
	for i < len(b) {
		// eight bytes at a time while none of them ends the run of plain bytes
		for i+8 <= len(b) && !specialIn(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, plain, true
		case c == '\\':
			plain = false
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
		case c < 0x20:
			return 0, false, false
		case c >= 0x80:
			plain = false
			i++
		default:
			i++
		}
	}
	return 0, false, false
}

// specialIn reports whether one of the eight bytes of x is not plain: a quote, a
// backslash, a control byte or a byte of a multi-byte character (bit tricks: a byte
// equal to c is a zero byte of x^c; a byte below 0x20 borrows when 0x20 is taken
// from it). It never misses one; a false alarm only sends the bytes to the slower
// loop.
func specialIn(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - lo) & ^v & hi }
	return (zero(x^(lo*'"')) | zero(x^(lo*'\\')) | ((x - lo*0x20) &^ x & hi) | x&hi) != 0
}

// plainByte marks the bytes a string can hold as they are: printable ASCII but the
// quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// scanNumber scans a JSON number (syntax only: like encoding/json with UseNumber, a
// literal too big for float64 is still a number).
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		if d := digits(b, i+1); d > i+1 {
			i = d
		} else {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if d := digits(b, i); d > i {
			i = d
		} else {
			return 0, false
		}
	}
	return i, true
}

// digits returns the index after the decimal digits at b[i:].
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func lit(b []byte, i int, s string) (int, bool) {
	if len(b)-i >= len(s) && string(b[i:i+len(s)]) == s {
		return i + len(s), true
	}
	return 0, false
}

// validObject reports whether raw is exactly one JSON object (space around it
// allowed).
func validObject(raw []byte) bool {
	i := skipWS(raw, 0)
	return i < len(raw) && raw[i] == '{' && validDoc(raw) == nil
}

// rawField is one member of a scanned object: its key (decoded) and raw value.
type rawField struct {
	key string
	val []byte
}

// sortedFields returns the members of a validated object as a decoded map would
// iterate them in sorted key order: sorted by key, the last of duplicates kept.
func sortedFields(obj []byte) []rawField {
	var fs []rawField
	noDoc.Fields(obj, func(k, v []byte) bool {
		fs = append(fs, rawField{string(k), v})
		return true
	})
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].key < fs[j].key })
	out := fs[:0]
	for i, f := range fs {
		if i+1 < len(fs) && fs[i+1].key == f.key {
			continue
		}
		out = append(out, f)
	}
	return out
}

// rawScalar turns a scalar the way encoding/json decodes it into an interface value
// (numbers as float64), for record.Count.
func rawScalar(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		s, _ := rawjson.String(raw)
		return s
	case '{', '[', 't', 'f', 'n':
		return nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return nil
	}
	return f
}

// rawCount is record.Count of a raw scalar: a token count given as a number or a
// numeric string. Plain non-negative integers, the usual case, are read without
// boxing them into an interface value.
func rawCount(raw []byte) (int64, bool) {
	if n := len(raw); n > 0 && n <= 18 {
		var v int64
		plain := true
		for _, c := range raw {
			if c < '0' || c > '9' {
				plain = false
				break
			}
			v = v*10 + int64(c-'0')
		}
		if plain && (raw[0] != '0' || n == 1) {
			return v, true
		}
	}
	return record.Count(rawScalar(raw))
}

// noDoc reads checked values with internal/rawjson's readers. The face checks a body
// in its own pass (members, elements), so there is no parsed document whose index of
// container ends the readers could use: they skip nested values themselves.
var noDoc *rawjson.Doc
