package langsmith

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
)

// A minimal JSON scanner for the hot paths (/runs/batch and /runs/multipart). It
// validates strictly and reports !ok on anything it is not sure about; callers then
// fall back to encoding/json, so the scanner only ever has to agree with
// encoding/json on the inputs it accepts. Values stay as slices of the request body:
// a run's free-form outputs and extra are never decoded into generic maps, only
// searched for the few keys the mapping reads (see rawView).

// maxRawDepth bounds nesting; deeper documents take the encoding/json path.
const maxRawDepth = 512

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

// scanNumber scans a JSON number. Numbers float64 cannot hold are refused, as
// encoding/json refuses them when decoding into interface values.
func scanNumber(b []byte, i int) (int, bool) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return 0, false
	}
	exotic := false
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		exotic = true
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	if exotic || i-start > 300 {
		if _, err := strconv.ParseFloat(string(b[start:i]), 64); err != nil {
			return 0, false
		}
	}
	return i, true
}

// scanValue scans one value starting at b[i] (no leading space) and returns the
// index after it.
func scanValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxRawDepth {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, ok := scanString(b, i)
		return end, ok
	case c == '{':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, false
			}
			end, _, ok := scanString(b, i)
			if !ok {
				return 0, false
			}
			i = skipWS(b, end)
			if i >= len(b) || b[i] != ':' {
				return 0, false
			}
			if i, ok = scanValue(b, skipWS(b, i+1), depth+1); !ok {
				return 0, false
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, false
			}
			if b[i] == '}' {
				return i + 1, true
			}
			if b[i] != ',' {
				return 0, false
			}
			i = skipWS(b, i+1)
		}
	case c == '[':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = scanValue(b, i, depth+1); !ok {
				return 0, false
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, false
			}
			if b[i] == ']' {
				return i + 1, true
			}
			if b[i] != ',' {
				return 0, false
			}
			i = skipWS(b, i+1)
		}
	case c == 't':
		return lit(b, i, "true")
	case c == 'f':
		return lit(b, i, "false")
	case c == 'n':
		return lit(b, i, "null")
	default:
		return scanNumber(b, i)
	}
}

func lit(b []byte, i int, s string) (int, bool) {
	if len(b)-i >= len(s) && string(b[i:i+len(s)]) == s {
		return i + len(s), true
	}
	return 0, false
}

// validObject reports whether raw is exactly one JSON object (surrounding space
// allowed) that the scanner accepts.
func validObject(raw []byte) bool {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	end, ok := scanValue(raw, i, 0)
	return ok && skipWS(raw, end) == len(raw)
}

// decodeString returns the value of a scanned JSON string (quotes included).
func decodeString(raw []byte) (string, bool) {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 && isASCII(raw) {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// rawField is one member of a scanned object: its key (decoded) and raw value.
type rawField struct {
	key string
	val []byte
}

// eachField calls fn for every member of a validated object, in document order.
func eachField(obj []byte, fn func(key []byte, val []byte) bool) {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i = skipWS(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		kend := skipString(obj, i)
		key := obj[i+1 : kend-1]
		if !isPlain(key) {
			s, _ := decodeString(obj[i:kend])
			key = []byte(s)
		}
		i = skipWS(obj, kend)
		i = skipWS(obj, i+1) // ':'
		vend := skipValue(obj, i)
		if !fn(key, obj[i:vend]) {
			return
		}
		i = skipWS(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = skipWS(obj, i+1)
		}
	}
}

func isPlain(s []byte) bool {
	for _, c := range s {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// skipString returns the index after the string at b[i] == '"' of validated JSON.
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// skipValue returns the index after the value at b[i] of validated JSON.
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
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
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

// rawGet returns the value of key in a validated object; like a decoded map, the
// last of duplicate keys wins.
func rawGet(obj []byte, key string) ([]byte, bool) {
	var out []byte
	found := false
	eachField(obj, func(k, v []byte) bool {
		if string(k) == key {
			out, found = v, true
		}
		return true
	})
	return out, found
}

// sortedFields returns the members of a validated object as a decoded map would
// iterate them in sorted key order: sorted by key, the last of duplicates kept.
func sortedFields(obj []byte) []rawField {
	var fs []rawField
	eachField(obj, func(k, v []byte) bool {
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

// eachElem calls fn for every element of a validated array.
func eachElem(arr []byte, fn func(val []byte) bool) {
	i := skipWS(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i = skipWS(arr, i+1)
	for i < len(arr) && arr[i] != ']' {
		vend := skipValue(arr, i)
		if !fn(arr[i:vend]) {
			return
		}
		i = skipWS(arr, vend)
		if i < len(arr) && arr[i] == ',' {
			i = skipWS(arr, i+1)
		}
	}
}

func isObj(raw []byte) bool { return len(raw) > 0 && raw[0] == '{' }
func isArr(raw []byte) bool { return len(raw) > 0 && raw[0] == '[' }

// rawStr is the string value of raw, if it is a JSON string.
func rawStr(raw []byte) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	return decodeString(raw)
}

// rawScalar turns a scalar the way encoding/json decodes it into an interface value
// (numbers as float64), for record.Count.
func rawScalar(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		s, _ := decodeString(raw)
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
