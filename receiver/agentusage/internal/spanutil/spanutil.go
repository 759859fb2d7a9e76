// Package spanutil holds what the three agentusage decoders share: deterministic ids,
// lenient time parsing, tool-call id discovery in vendor JSON, a bounded pending store
// for half-finished runs, and a small builder that groups spans per resource.
package spanutil

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// ScopeName is the instrumentation scope of every span the receiver builds.
const ScopeName = "github.com/agentmeter/agentmeter/receiver/agentusage"

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

// ErrBadTime is returned for a value that is neither a timestamp string nor a number.
var ErrBadTime = errors.New("not an RFC 3339 / ISO-8601 timestamp or a Unix epoch number")

// ParseTime reads the timestamp shapes the SDKs send: RFC 3339 strings (with or
// without an offset; Python's isoformat omits it and means UTC) and epoch numbers,
// whose unit is guessed from the magnitude (s, ms, µs, ns). The JS LangSmith SDK sends
// end_time as epoch milliseconds.
func ParseTime(v any) (time.Time, error) {
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
			return ParseTime(string(raw[1 : len(raw)-1]))
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, ErrBadTime
		}
		return ParseTime(s)
	}
	return ParseTime(json.Number(raw))
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

// maxWalkDepth bounds recursion over untrusted JSON.
const maxWalkDepth = 48

// MaxWalkDepth is maxWalkDepth, for walkers over raw JSON that must agree with
// genai.FindString and ToolCallIDs.
const MaxWalkDepth = maxWalkDepth

// ToolCallIDs finds the ids of the tool calls a model response asked for, in order,
// without knowing the vendor's exact shape: every element of a "tool_calls" array
// (LangChain AIMessage, OpenAI choices) contributes its "id", and content blocks of type
// "tool_use" (Anthropic) or "function_call" (OpenAI Responses) contribute "id"/"call_id".
// Duplicates (the same message serialised twice, e.g. in kwargs and additional_kwargs)
// are dropped.
func ToolCallIDs(v any) []string {
	var out []string
	seen := map[string]bool{}
	add := func(id any) {
		if s, ok := id.(string); ok && s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > maxWalkDepth {
			return
		}
		switch t := v.(type) {
		case map[string]any:
			if typ, _ := t["type"].(string); typ == "tool_use" || typ == "function_call" {
				if id, ok := t["call_id"]; ok {
					add(id)
				} else {
					add(t["id"])
				}
			}
			if calls, ok := t["tool_calls"].([]any); ok {
				for _, c := range calls {
					if m, ok := c.(map[string]any); ok {
						add(m["id"])
					}
				}
			}
			for _, k := range slices.Sorted(maps.Keys(t)) {
				if k == "tool_calls" {
					continue
				}
				walk(t[k], depth+1)
			}
		case []any:
			for _, e := range t {
				walk(e, depth+1)
			}
		}
	}
	walk(v, 0)
	return out
}

// CallerFromTags applies DeerFlow's caller rule (DeerFlow's caller identification from tags): the first tag
// that is lead_agent or starts with subagent: or middleware: is the caller.
func CallerFromTags(tags []string) string {
	for _, t := range tags {
		if t == genai.BucketLeadAgent || strings.HasPrefix(t, genai.BucketSubagent+":") || strings.HasPrefix(t, genai.BucketMiddleware+":") {
			return t
		}
	}
	return ""
}

// ErrorType derives error.type from an error string: the exception class when the
// string starts with one ("ValueError('x')", "TimeoutError: x"), else "_OTHER" as semconv says.
func ErrorType(msg string) string {
	end := strings.IndexAny(msg, "(: \n")
	if end <= 0 {
		end = len(msg)
	}
	head := msg[:end]
	if head == "" || len(head) > 100 {
		return "_OTHER"
	}
	for i, r := range head {
		ok := r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return "_OTHER"
		}
	}
	if head[0] < 'A' || head[0] > 'Z' {
		return "_OTHER"
	}
	return head
}

// Truncate cuts s to at most n bytes on a rune boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// ToInt64 reads a non-negative token count from decoded JSON (number or numeric string).
func ToInt64(v any) (int64, bool) {
	switch t := v.(type) {
	case float64:
		if t < 0 || t > math.MaxInt64/2 || math.IsNaN(t) {
			return 0, false
		}
		return int64(t), true
	case json.Number:
		if i, err := t.Int64(); err == nil && i >= 0 {
			return i, true
		}
		if f, err := t.Float64(); err == nil && f >= 0 && f < math.MaxInt64/2 {
			return int64(f), true
		}
	case string:
		return ToInt64(json.Number(t))
	}
	return 0, false
}

// Timestamp converts a time, mapping the zero time to 0.
func Timestamp(t time.Time) pcommon.Timestamp {
	if t.IsZero() {
		return 0
	}
	return pcommon.NewTimestampFromTime(t)
}

// Builder collects spans into one ptrace.Traces, one ResourceSpans per service name.
type Builder struct {
	td     ptrace.Traces
	scopes map[string]ptrace.SpanSlice
}

// NewBuilder returns an empty builder.
func NewBuilder() *Builder {
	return &Builder{td: ptrace.NewTraces(), scopes: map[string]ptrace.SpanSlice{}}
}

// Span appends a new span under the resource named service.
func (b *Builder) Span(service string) ptrace.Span {
	spans, ok := b.scopes[service]
	if !ok {
		rs := b.td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr(genai.AttrServiceName, service)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(ScopeName)
		spans = ss.Spans()
		b.scopes[service] = spans
	}
	return spans.AppendEmpty()
}

// Traces returns what was built.
func (b *Builder) Traces() ptrace.Traces { return b.td }

// Len is the number of spans built so far.
func (b *Builder) Len() int { return b.td.SpanCount() }

// FieldError names the offending field of one item.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }
func (e *FieldError) Unwrap() error { return e.Err }

// Errorf builds a FieldError.
func Errorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}
