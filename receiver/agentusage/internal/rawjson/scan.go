package rawjson

import (
	"encoding/binary"
)

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
