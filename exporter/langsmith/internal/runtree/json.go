package runtree

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"

	"github.com/agentmeter/agentmeter/genai"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/exporter/internal/jsonw"
)

// The run JSON is written by hand: encoding/json's reflection over maps of span
// attributes was most of the exporter's cost (see BenchmarkVsOTLPHTTP*). The output is
// checked against encoding/json and the vendor schema in the tests.

// AppendHead appends the run object without the split-out fields.
func (h *Head) AppendJSON(dst []byte) []byte {
	// ids, dotted_order, run type, timestamps and status are generated here from hex
	// digits and fixed words: they need no escaping
	dst = append(dst, `{"id":"`...)
	dst = append(dst, h.ID...)
	dst = append(dst, '"')
	if !h.Unplaced {
		dst = append(dst, `,"trace_id":"`...)
		dst = append(dst, h.TraceID...)
		dst = append(dst, `","dotted_order":"`...)
		dst = append(dst, h.DottedOrder...)
		dst = append(dst, '"')
		if h.ParentRunID != "" {
			dst = append(dst, `,"parent_run_id":"`...)
			dst = append(dst, h.ParentRunID...)
			dst = append(dst, '"')
		}
	}
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, h.Name)
	dst = append(dst, `,"run_type":"`...)
	dst = append(dst, h.RunType...)
	dst = append(dst, `","start_time":"`...)
	dst = append(dst, h.StartTime...)
	dst = append(dst, '"')
	if h.EndTime != "" {
		dst = append(dst, `,"end_time":"`...)
		dst = append(dst, h.EndTime...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"session_name":`...)
	dst = appendString(dst, h.SessionName)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, h.Status...)
	dst = append(dst, '"')
	if len(h.Tags) > 0 {
		dst = append(dst, `,"tags":`...)
		dst = appendStrings(dst, h.Tags)
	}
	return append(dst, '}')
}

// AppendJSON appends the inputs object.
func (in *Inputs) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	first := true
	dst = appendRaw(dst, &first, "messages", in.Messages)
	dst = appendRaw(dst, &first, "system_instructions", in.SystemInstructions)
	return append(dst, '}')
}

// AppendJSON appends the outputs object.
func (o *Outputs) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	first := true
	dst = appendRaw(dst, &first, "messages", o.Messages)
	if o.UsageMetadata != nil {
		dst = appendKey(dst, &first, "usage_metadata")
		dst = o.UsageMetadata.AppendJSON(dst)
	}
	return append(dst, '}')
}

// AppendJSON appends the usage_metadata object.
func (u *UsageMetadata) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, u.InputTokens, 10)
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, u.OutputTokens, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, u.TotalTokens, 10)
	if u.CacheRead != 0 || u.CacheCreation != 0 {
		dst = append(dst, `,"input_token_details":{`...)
		first := true
		if u.CacheRead != 0 {
			dst = appendKey(dst, &first, "cache_read")
			dst = strconv.AppendInt(dst, u.CacheRead, 10)
		}
		if u.CacheCreation != 0 {
			dst = appendKey(dst, &first, "cache_creation")
			dst = strconv.AppendInt(dst, u.CacheCreation, 10)
		}
		dst = append(dst, '}')
	}
	if u.Reasoning != 0 {
		dst = append(dst, `,"output_token_details":{"reasoning":`...)
		dst = strconv.AppendInt(dst, u.Reasoning, 10)
		dst = append(dst, '}')
	}
	if u.Cost != nil {
		dst = appendCost(dst, u.Cost)
	}
	return append(dst, '}')
}

// appendCost writes LangSmith's cost fields from a call's cost. They are inclusive like
// the token fields: input_cost covers uncached input, cache reads and cache writes
// (input_cost_details: cache_read, cache_creation), output_cost covers output with
// reasoning (output_cost_details: reasoning). A provider total without parts is
// total_cost alone.
func appendCost(dst []byte, c *genai.Cost) []byte {
	if c.Unsplit() == 0 {
		dst = appendFloatField(dst, "input_cost", c.Input+c.CacheRead+c.CacheCreation)
		dst = appendFloatField(dst, "output_cost", c.Output+c.Reasoning)
	}
	dst = appendFloatField(dst, "total_cost", c.Total)
	if c.CacheRead > 0 || c.CacheCreation > 0 {
		dst = append(dst, `,"input_cost_details":{`...)
		first := true
		if c.CacheRead > 0 {
			dst = appendKey(dst, &first, "cache_read")
			dst = strconv.AppendFloat(dst, c.CacheRead, 'f', -1, 64)
		}
		if c.CacheCreation > 0 {
			dst = appendKey(dst, &first, "cache_creation")
			dst = strconv.AppendFloat(dst, c.CacheCreation, 'f', -1, 64)
		}
		dst = append(dst, '}')
	}
	if c.Reasoning > 0 {
		dst = append(dst, `,"output_cost_details":{"reasoning":`...)
		dst = strconv.AppendFloat(dst, c.Reasoning, 'f', -1, 64)
		dst = append(dst, '}')
	}
	return dst
}

func appendFloatField(dst []byte, key string, v float64) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, key...)
	dst = append(dst, '"', ':')
	return strconv.AppendFloat(dst, v, 'f', -1, 64) // plain decimals: 0.00006, not 6e-05
}

// AppendJSON appends the extra object.
func (e *Extra) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"metadata":{`...)
	first := true
	if e.HasAttrs {
		e.Attrs.Range(func(k string, v pcommon.Value) bool {
			if !copiedAttr(k) {
				return true
			}
			if key, ok := metadataKey(k, e.Attrs); ok {
				k = key
			} else if key != "" {
				return true // the same key is written another way
			}
			dst = appendKey(dst, &first, k)
			dst = appendValue(dst, v)
			return true
		})
	}
	dst = e.Metadata.appendEntries(dst, first)
	dst = append(dst, '}')
	if len(e.InvocationParams) > 0 {
		dst = append(dst, `,"invocation_params":`...)
		dst = e.InvocationParams.AppendJSON(dst)
	}
	return append(dst, '}')
}

// AppendJSON appends the key/values as one JSON object, in order.
func (m Metadata) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = m.appendEntries(dst, true)
	return append(dst, '}')
}

// appendEntries appends the key/values as members of an object, after a comma unless
// first.
func (m Metadata) appendEntries(dst []byte, first bool) []byte {
	for i := range m {
		dst = appendKey(dst, &first, m[i].Key)
		if m[i].IsStr {
			dst = appendString(dst, m[i].Str)
		} else {
			dst = appendAny(dst, m[i].Value)
		}
	}
	return dst
}

// AppendJSON appends the merged subagent usage object.
func (s *SubagentUsage) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"usage":`...)
	dst = s.Usage.AppendJSON(dst)
	if s.Cost != nil {
		dst = appendFloatField(dst, "cost_usd", s.Cost.Total)
	}
	if s.HasDispatches {
		dst = append(dst, `,"dispatches":`...)
		dst = appendValue(dst, s.Dispatches)
	}
	if len(s.ToolCallIDs) > 0 {
		dst = append(dst, `,"tool_call_ids":`...)
		dst = appendStrings(dst, s.ToolCallIDs)
	}
	return append(dst, '}')
}

// MarshalJSON implementations make the parts usable with encoding/json (tests, tools).
func (h Head) MarshalJSON() ([]byte, error)          { return h.AppendJSON(nil), nil }
func (in Inputs) MarshalJSON() ([]byte, error)       { return in.AppendJSON(nil), nil }
func (o Outputs) MarshalJSON() ([]byte, error)       { return o.AppendJSON(nil), nil }
func (u UsageMetadata) MarshalJSON() ([]byte, error) { return u.AppendJSON(nil), nil }
func (e Extra) MarshalJSON() ([]byte, error)         { return e.AppendJSON(nil), nil }
func (m Metadata) MarshalJSON() ([]byte, error)      { return m.AppendJSON(nil), nil }
func (s SubagentUsage) MarshalJSON() ([]byte, error) { return s.AppendJSON(nil), nil }

func appendKey(dst []byte, first *bool, key string) []byte {
	if !*first {
		dst = append(dst, ',')
	}
	*first = false
	dst = appendString(dst, key)
	return append(dst, ':')
}

func appendRaw(dst []byte, first *bool, key string, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return dst
	}
	dst = appendKey(dst, first, key)
	return append(dst, raw...)
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

func appendAny(dst []byte, v any) []byte {
	switch x := v.(type) {
	case pcommon.Value:
		return appendValue(dst, x)
	case string:
		return appendString(dst, x)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case bool:
		return strconv.AppendBool(dst, x)
	case []string:
		return appendStrings(dst, x)
	case *SubagentUsage:
		return x.AppendJSON(dst)
	case *UsageMetadata:
		return x.AppendJSON(dst)
	case nil:
		return append(dst, "null"...)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}

// appendValue writes an attribute value as JSON, like pcommon.Value.AsRaw through
// encoding/json, except that non-finite doubles (not JSON) become strings.
func appendValue(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendString(dst, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(dst, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return appendString(dst, strconv.FormatFloat(f, 'g', -1, 64))
		}
		return strconv.AppendFloat(dst, f, 'g', -1, 64)
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(dst, v.Bool())
	case pcommon.ValueTypeBytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes().AsRaw())
		return append(dst, '"')
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		dst = append(dst, '[')
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, s.At(i))
		}
		return append(dst, ']')
	case pcommon.ValueTypeMap:
		dst = append(dst, '{')
		first := true
		v.Map().Range(func(k string, mv pcommon.Value) bool {
			dst = appendKey(dst, &first, k)
			dst = appendValue(dst, mv)
			return true
		})
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

// appendString writes s as a JSON string (jsonw.AppendString).
func appendString(dst []byte, s string) []byte { return jsonw.AppendString(dst, s) }

// AppendJSONString appends s as a JSON string.
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }
