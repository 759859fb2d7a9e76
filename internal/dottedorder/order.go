// Package dottedorder holds LangSmith's addressing of runs: the run id of an OTel trace
// or span, its timestamps, and dotted_order, the chain of start times and run ids from
// a trace's root down to a run by which LangSmith places the run in its tree. The
// collector's LangSmith exporter writes it, and the agentmeter runtime puts it on its
// spans (langsmith.span.dotted_order) when they start, so a run can be placed before
// its parents have ended.
package dottedorder

import (
	"encoding/hex"
	"strings"
)

// TraceUUID formats a trace id as a hyphenated UUID: the 16 bytes are taken as they are,
// as LangSmith's own OTLP translator does, so the root run id is the trace id.
func TraceUUID(id [16]byte) string { return uuidString(id) }

// SpanUUID formats a span id as a UUID whose first 8 bytes are zero and whose last 8 are
// the span id (LangSmith's translator does the same). Deterministic, so a retried export
// upserts the same run (409 = already there) instead of creating a duplicate.
func SpanUUID(id [8]byte) string {
	var b [16]byte
	copy(b[8:], id[:])
	return uuidString(b)
}

func uuidString(b [16]byte) string {
	var out [UUIDLen]byte
	return string(AppendUUID(out[:0], b))
}

// UUIDLen is the length of a formatted UUID.
const UUIDLen = 36

// AppendUUID appends b formatted as a UUID.
func AppendUUID(dst []byte, b [16]byte) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, UUIDLen)...)
	out := dst[n:]
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return dst
}

// segTimeLen is the length of a segment's timestamp: YYYYMMDDTHHMMSS, 6 digits, Z.
const segTimeLen = len("20060102T150405000000Z")

// SegmentLen is the length of one segment: its timestamp and a run UUID.
const SegmentLen = segTimeLen + UUIDLen

// AppendSegment appends one dotted_order segment: the UTC start time as
// YYYYMMDDTHHMMSS + exactly 6 fractional digits + "Z", then the run UUID. LangSmith
// rejects 3- or 9-digit fractions, so the format is fixed by hand.
func AppendSegment(dst []byte, micros int64, runID string) []byte {
	c := civilFromMicros(micros)
	dst = appendDigits(dst, c.year, 4)
	dst = appendDigits(dst, c.month, 2)
	dst = appendDigits(dst, c.day, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, c.hour, 2)
	dst = appendDigits(dst, c.min, 2)
	dst = appendDigits(dst, c.sec, 2)
	dst = appendDigits(dst, c.micro, 6)
	dst = append(dst, 'Z')
	return append(dst, runID...)
}

// Root is the dotted_order of a trace's root span started at micros: one segment, whose
// run id is the trace id.
func Root(micros int64, trace [16]byte) string {
	return string(AppendSegment(make([]byte, 0, SegmentLen), micros, TraceUUID(trace)))
}

// Child is the dotted_order of span started at micros under the run whose dotted_order is
// parent; its run id is SpanUUID(span). Its segment's time is clamped to be no earlier
// than the parent's, as the SDKs do, so segment times never go backwards along a chain.
// A parent that is not a valid dotted_order gives "".
func Child(parent string, micros int64, span [8]byte) string {
	last, ok := Last(parent)
	if !ok {
		return ""
	}
	b := make([]byte, 0, len(parent)+1+SegmentLen)
	b = append(append(b, parent...), '.')
	return string(AppendSegment(b, max(micros, last.Micros), SpanUUID(span)))
}

// Segment is one run of a dotted_order chain.
type Segment struct {
	Micros int64  // its start time, Unix microseconds
	RunID  string // its run id, a hyphenated UUID
}

// Parse checks a dotted_order and returns its runs, root first. Anything but
// well-formed segments (a 6-digit UTC timestamp and a hyphenated UUID each) joined by
// "." is refused, as LangSmith refuses it.
func Parse(dotted string) ([]Segment, bool) {
	segs := make([]Segment, 0, (len(dotted)+1)/(SegmentLen+1))
	ok := walk(dotted, func(s Segment) { segs = append(segs, s) })
	return segs, ok
}

// Ends checks a dotted_order as Parse does and returns its first run (the trace's root),
// the last but one (the parent; zero for a root) and the last (the run it addresses),
// without building the list.
func Ends(dotted string) (root, parent, last Segment, ok bool) {
	n := 0
	ok = walk(dotted, func(s Segment) {
		if n == 0 {
			root = s
		}
		parent, last = last, s
		n++
	})
	return root, parent, last, ok
}

// walk calls fn on every run of dotted, root first, and reports whether all of dotted is
// well formed; it stops at the first segment that is not.
func walk(dotted string, fn func(Segment)) bool {
	if dotted == "" || (len(dotted)+1)%(SegmentLen+1) != 0 {
		return false
	}
	for part := range strings.SplitSeq(dotted, ".") {
		s, ok := parseSegment(part)
		if !ok {
			return false
		}
		fn(s)
	}
	return true
}

// Lower returns dotted with its run ids in lower case, as LangSmith writes them: its
// timestamps hold only digits, T and Z, so only the UUIDs' hex letters change.
func Lower(dotted string) string {
	if !strings.ContainsAny(dotted, "ABCDEF") {
		return dotted
	}
	b := []byte(dotted)
	for i, c := range b {
		if 'A' <= c && c <= 'F' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Last returns the last run of a dotted_order: the run it addresses.
func Last(dotted string) (Segment, bool) {
	if len(dotted) < SegmentLen || (len(dotted) > SegmentLen && dotted[len(dotted)-SegmentLen-1] != '.') {
		return Segment{}, false
	}
	return parseSegment(dotted[len(dotted)-SegmentLen:])
}

func parseSegment(s string) (Segment, bool) {
	if len(s) != SegmentLen || s[8] != 'T' || s[segTimeLen-1] != 'Z' || !isUUID(s[segTimeLen:]) {
		return Segment{}, false
	}
	var f [7]int // year month day hour min sec micro
	for i, w := range [7][2]int{{0, 4}, {4, 6}, {6, 8}, {9, 11}, {11, 13}, {13, 15}, {15, 21}} {
		for _, c := range []byte(s[w[0]:w[1]]) {
			if c < '0' || c > '9' {
				return Segment{}, false
			}
			f[i] = f[i]*10 + int(c-'0')
		}
	}
	if f[0] < 1 || f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 || f[3] > 23 || f[4] > 59 || f[5] > 59 {
		return Segment{}, false
	}
	days := daysFromCivil(f[0], f[1], f[2])
	us := ((days*86400+int64(f[3]*3600+f[4]*60+f[5]))*1_000_000 + int64(f[6]))
	// a day the month does not have (31 April, 29 February of 2023) rolls over
	if c := civilFromMicros(us); c.month != f[1] || c.day != f[2] {
		return Segment{}, false
	}
	return Segment{Micros: us, RunID: s[segTimeLen:]}, true
}

func isUUID(s string) bool {
	if len(s) != UUIDLen {
		return false
	}
	for i := 0; i < UUIDLen; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
