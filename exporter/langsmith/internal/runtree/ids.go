// Package runtree turns OTel spans into LangSmith runs: deterministic run ids, the
// dotted_order of each run's ancestor chain, run types, usage_metadata and metadata.
// Vendor rules: ../shared/vendors/langfuse-langsmith.md §2.4 and §2.7.
package runtree

import (
	"encoding/hex"
	"time"

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
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// AppendSegment appends one dotted_order segment: the UTC start time as
// YYYYMMDDTHHMMSS + exactly 6 fractional digits + "Z", then the run UUID. LangSmith
// rejects 3- or 9-digit fractions (vendor notes §2.4), so the format is fixed by hand.
func AppendSegment(dst []byte, micros int64, runID string) []byte {
	t := time.UnixMicro(micros).UTC()
	dst = t.AppendFormat(dst, "20060102T150405")
	us := t.Nanosecond() / 1000
	var frac [6]byte
	for i := 5; i >= 0; i-- {
		frac[i] = byte('0' + us%10)
		us /= 10
	}
	dst = append(dst, frac[:]...)
	dst = append(dst, 'Z')
	return append(dst, runID...)
}

// FormatTime renders a timestamp as RFC 3339 UTC with microseconds, the precision
// LangSmith stores.
func FormatTime(micros int64) string {
	return time.UnixMicro(micros).UTC().Format("2006-01-02T15:04:05.000000Z")
}
