// Package jsonw writes JSON by hand for the exporters' hot paths, where encoding/json's
// reflection and intermediate values cost more than the bytes written: strings escaped
// exactly as encoding/json escapes them.
package jsonw

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// jsonSafe marks ASCII bytes that are written as they are.
var jsonSafe = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// AppendString appends s as a JSON string: quotes, backslashes and control characters
// escaped, invalid UTF-8 replaced by U+FFFD, U+2028/U+2029 escaped as encoding/json does.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	// fast path: most ids, names and values need no escaping
	clean := true
	for i := 0; i < len(s); i++ {
		if !jsonSafe[s[i]] {
			clean = false
			break
		}
	}
	if clean {
		dst = append(dst, s...)
		return append(dst, '"')
	}
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
