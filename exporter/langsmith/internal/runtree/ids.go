// Package runtree turns OTel spans into LangSmith runs: deterministic run ids, the
// dotted_order of each run's ancestor chain, run types, usage_metadata and metadata.
// Vendor rules: docs/langsmith.md#span--run.
package runtree

import (
	"encoding/hex"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// TraceUUID formats a trace id as a hyphenated UUID: the 16 bytes are taken as they are,
// as LangSmith's own OTLP translator does, so the root run id is the trace id.
func TraceUUID(id pcommon.TraceID) string { return uuidString(id) }

// SpanUUID formats a span id as a UUID whose first 8 bytes are zero and whose last 8 are
// the span id (LangSmith's translator does the same). Deterministic, so a retried export
// upserts the same run (409 = already there) instead of creating a duplicate.
func SpanUUID(id pcommon.SpanID) string {
	var b [16]byte
	copy(b[8:], id[:])
	return uuidString(b)
}

func uuidString(b [16]byte) string {
	var out [uuidLen]byte
	return string(appendUUID(out[:0], b))
}

// uuidLen is the length of a formatted UUID.
const uuidLen = 36

// appendUUID appends b formatted as a UUID.
func appendUUID(dst []byte, b [16]byte) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, uuidLen)...)
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

// AppendSegment appends one dotted_order segment: the UTC start time as
// YYYYMMDDTHHMMSS + exactly 6 fractional digits + "Z", then the run UUID. LangSmith
// rejects 3- or 9-digit fractions (docs/langsmith.md), so the format is fixed by hand.
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

// FormatTime renders a timestamp as RFC 3339 UTC with microseconds, the precision
// LangSmith stores.
func FormatTime(micros int64) string { return string(AppendTime(make([]byte, 0, timeLen), micros)) }

// timeLen is the length of a FormatTime timestamp.
const timeLen = len("2006-01-02T15:04:05.000000Z")

// AppendTime appends FormatTime(micros).
func AppendTime(b []byte, micros int64) []byte {
	c := civilFromMicros(micros)
	b = appendDigits(b, c.year, 4)
	b = append(b, '-')
	b = appendDigits(b, c.month, 2)
	b = append(b, '-')
	b = appendDigits(b, c.day, 2)
	b = append(b, 'T')
	b = appendDigits(b, c.hour, 2)
	b = append(b, ':')
	b = appendDigits(b, c.min, 2)
	b = append(b, ':')
	b = appendDigits(b, c.sec, 2)
	b = append(b, '.')
	b = appendDigits(b, c.micro, 6)
	return append(b, 'Z')
}

type civil struct{ year, month, day, hour, min, sec, micro int }

// civilFromMicros splits a Unix time in microseconds into UTC calendar fields with
// Howard Hinnant's days-to-civil algorithm: time.Time's Date/Clock were a visible cost
// at three timestamps per run. TestCivilMatchesTime checks it against the time package.
func civilFromMicros(us int64) civil {
	const day = 86400 * 1_000_000
	days := us / day
	rem := us % day
	if rem < 0 {
		rem += day
		days--
	}
	secs := int(rem / 1_000_000)
	c := civil{hour: secs / 3600, min: secs / 60 % 60, sec: secs % 60, micro: int(rem % 1_000_000)}
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	c.day = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		c.month = int(mp + 3)
	} else {
		c.month = int(mp - 9)
	}
	c.year = int(yoe + era*400)
	if c.month <= 2 {
		c.year++
	}
	return c
}

func appendDigits(dst []byte, v, width int) []byte {
	if v < 0 {
		v = 0
	}
	var buf [8]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[:width]...)
}
