// Package timestamps reads the timestamp shapes the vendor SDKs send.
package timestamps

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// ErrBadTime is returned for a value that is neither a timestamp string nor a number.
var ErrBadTime = errors.New("not an RFC 3339 / ISO-8601 timestamp or a Unix epoch number")

// parseTime reads the timestamp shapes the SDKs send: RFC 3339 strings (with or
// without an offset; Python's isoformat omits it and means UTC) and epoch numbers,
// whose unit is guessed from the magnitude (s, ms, µs, ns). The JS LangSmith SDK sends
// end_time as epoch milliseconds.
func parseTime(v any) (time.Time, error) {
	switch t := v.(type) {
	case string:
		return parseTimeString(t)
	case float64:
		return epoch(t)
	case json.Number:
		f, err := t.Float64()
		if err != nil {
			return time.Time{}, ErrBadTime
		}
		return epoch(f)
	}
	return time.Time{}, ErrBadTime
}

// ParseRawTime parses a timestamp left as raw JSON by a typed decoder (a string or a
// number); null or absent is the zero time.
func ParseRawTime(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, nil
	}
	if raw[0] == '"' {
		if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
			return parseTime(string(raw[1 : len(raw)-1]))
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, ErrBadTime
		}
		return parseTime(s)
	}
	return parseTime(json.Number(raw))
}

var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
}

func parseTimeString(s string) (time.Time, error) {
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	if f, err := json.Number(s).Float64(); err == nil {
		return epoch(f)
	}
	return time.Time{}, ErrBadTime
}

func epoch(f float64) (time.Time, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e19 {
		return time.Time{}, ErrBadTime
	}
	switch {
	case f >= 1e17:
		return time.Unix(0, int64(f)).UTC(), nil
	case f >= 1e14:
		return time.UnixMicro(int64(f)).UTC(), nil
	case f >= 1e11:
		return time.UnixMilli(int64(f)).UTC(), nil
	default:
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	}
}

// Timestamp converts a time, mapping the zero time to 0.
func Timestamp(t time.Time) pcommon.Timestamp {
	if t.IsZero() {
		return 0
	}
	return pcommon.NewTimestampFromTime(t)
}
