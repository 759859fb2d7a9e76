// Package ids makes the OTel trace and span ids of the spans the receiver builds from
// vendor identifiers. Every id is a function of the vendor's own id, so a resent run,
// observation or record lands on the same span and exporters upsert it.
package ids

import (
	"crypto/sha256"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// TraceID maps a vendor's trace identifier to an OTel trace id. A 32-hex string or a
// UUID keeps its bytes (so ids stay recognisable and LangSmith's own UUID↔OTel mapping
// holds); anything else is hashed. The same input always gives the same id, so a resent
// record lands in the same trace.
func TraceID(s string) pcommon.TraceID {
	var id pcommon.TraceID
	if hexInto(id[:], s) {
		return id
	}
	sum := sha256.Sum256([]byte("agentusage/trace\x00" + s))
	copy(id[:], sum[:16])
	return id
}

// SpanID derives a span id from a namespace and a stable identifier (a run id, an
// observation id, a record's source_run_id). Hashing, rather than taking the first
// bytes of a UUIDv7, avoids collisions between runs started in the same millisecond.
func SpanID(namespace, s string) pcommon.SpanID {
	var buf [128]byte // on the stack for the usual short ids
	b := append(buf[:0], "agentusage/span\x00"...)
	b = append(append(append(b, namespace...), 0), s...)
	sum := sha256.Sum256(b)
	var id pcommon.SpanID
	copy(id[:], sum[:8])
	if id.IsEmpty() { // astronomically unlikely, but an all-zero id is invalid OTLP
		id[7] = 1
	}
	return id
}

// hexInto decodes a 2n-hex string or, for n=16, a hyphenated UUID into dst (n bytes)
// without allocating: it is on every span's path. An all-zero id is refused (invalid
// in OTLP).
func hexInto(dst []byte, s string) bool {
	uuid := len(dst) == 16 && len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-'
	if !uuid && len(s) != 2*len(dst) {
		return false
	}
	j := 0
	nonZero := false
	for i := 0; i < len(dst); i++ {
		if uuid && (j == 8 || j == 13 || j == 18 || j == 23) {
			j++
		}
		hi, ok1 := unhex(s[j])
		lo, ok2 := unhex(s[j+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
		nonZero = nonZero || dst[i] != 0
		j += 2
	}
	return nonZero
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func IsUUIDOrHex(s string) bool {
	var buf [16]byte
	return hexInto(buf[:], s)
}
