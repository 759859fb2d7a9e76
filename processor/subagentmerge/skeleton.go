package subagentmerge

import (
	"math"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentmeter/agentmeter/internal/otlpwire"

	"github.com/agentmeter/agentmeter/genai"
)

// The skeleton of a released trace (correction.go) is written straight as OTLP protobuf,
// a TracesData message holding one ResourceSpans / ScopeSpans with the trimmed spans:
// building pdata copies first and marshalling them cost as much as the rest of the
// processor. Concatenated TracesData messages decode as one, so adding late spans to a
// record is appending another encoded message.

// skeletonWriter encodes trimmed spans; its buffers are reused between spans.
type skeletonWriter struct {
	spans []byte // encoded Span fields of ScopeSpans.spans, each with its tag
	span  []byte // the span being written
	val   []byte
	arr   []byte // an array value's elements
	one   []byte // one element
}

func (w *skeletonWriter) reset() { w.spans = w.spans[:0] }

// add appends a trimmed copy of sp: what merge.Apply reads (ids, name, kind, times,
// and the attributes skeletonKeeps), without contents, events, links or status. Tool-call ids a response asked for only in
// gen_ai.output.messages are kept as agentmeter.response.tool_call_ids.
func (w *skeletonWriter) add(sp ptrace.Span) spanFacts {
	b := w.span[:0]
	tid, sid, pid := sp.TraceID(), sp.SpanID(), sp.ParentSpanID()
	b = otlpwire.AppendBytes(b, otlpwire.SpanTraceID, tid[:])
	b = otlpwire.AppendBytes(b, otlpwire.SpanSpanID, sid[:])
	if !pid.IsEmpty() {
		b = otlpwire.AppendBytes(b, otlpwire.SpanParentSpanID, pid[:])
	}
	b = otlpwire.AppendString(b, otlpwire.SpanName, sp.Name())
	if k := sp.Kind(); k != 0 {
		b = otlpwire.AppendVarint(b, otlpwire.SpanKind, uint64(k))
	}
	b = otlpwire.AppendFixed64(b, otlpwire.SpanStart, uint64(sp.StartTimestamp()))
	b = otlpwire.AppendFixed64(b, otlpwire.SpanEnd, uint64(sp.EndTimestamp()))
	hasIDs := false
	var outMsgs string
	var f spanFacts
	sp.Attributes().Range(func(k string, v pcommon.Value) bool {
		f.see(k, v)
		switch k {
		case genai.AttrResponseToolCallIDs:
			hasIDs = true
		case genai.AttrOutputMessages:
			outMsgs = v.AsString()
		}
		if !skeletonKeeps(k) {
			return true
		}
		if val, ok := w.value(v); ok {
			b = w.appendKV(b, k, val)
		}
		return true
	})
	if !hasIDs && outMsgs != "" {
		if ids := genai.ToolCallIDsFromOutputMessages(outMsgs); len(ids) > 0 {
			arr := w.val[:0]
			for _, id := range ids {
				var one []byte
				one = otlpwire.AppendString(one, otlpwire.AnyString, id)
				arr = otlpwire.AppendBytes(arr, otlpwire.ArrayValues, one)
			}
			var any []byte
			any = otlpwire.AppendBytes(any, otlpwire.AnyArray, arr)
			b = w.appendKV(b, genai.AttrResponseToolCallIDs, any)
		}
	}
	if f := sp.Flags(); f != 0 {
		b = otlpwire.AppendFixed32(b, otlpwire.SpanFlags, f)
	}
	w.span = b
	w.spans = otlpwire.AppendBytes(w.spans, otlpwire.ScopeSpansSpans, b)
	return f
}

func (w *skeletonWriter) appendKV(b []byte, k string, val []byte) []byte {
	return otlpwire.AppendKeyValue(b, otlpwire.SpanAttributes, k, val)
}

// value encodes v as an AnyValue into w.val, or reports that the skeleton drops it.
func (w *skeletonWriter) value(v pcommon.Value) ([]byte, bool) {
	if v.Type() == pcommon.ValueTypeSlice {
		s := v.Slice()
		if s.Len() > 64 {
			return nil, false
		}
		arr := w.arr[:0]
		for i := 0; i < s.Len(); i++ {
			one, ok := appendAny(w.one[:0], s.At(i), false)
			if !ok {
				return nil, false
			}
			w.one = one
			arr = otlpwire.AppendBytes(arr, otlpwire.ArrayValues, one)
		}
		w.arr = arr
		w.val = otlpwire.AppendBytes(w.val[:0], otlpwire.AnyArray, arr)
		return w.val, true
	}
	b, ok := appendAny(w.val[:0], v, true)
	if ok {
		w.val = b
	}
	return b, ok
}

func appendAny(b []byte, v pcommon.Value, top bool) ([]byte, bool) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		if len(v.Str()) > maxSkeletonString {
			return b, false
		}
		return otlpwire.AppendString(b, otlpwire.AnyString, v.Str()), true
	case pcommon.ValueTypeBool:
		return otlpwire.AppendVarint(b, otlpwire.AnyBool, protowire.EncodeBool(v.Bool())), true
	case pcommon.ValueTypeInt:
		return otlpwire.AppendVarint(b, otlpwire.AnyInt, uint64(v.Int())), true
	case pcommon.ValueTypeDouble:
		return otlpwire.AppendFixed64(b, otlpwire.AnyDouble, math.Float64bits(v.Double())), true
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		if !top || s.Len() > 64 {
			return b, false
		}
		var arr []byte
		for i := 0; i < s.Len(); i++ {
			one, ok := appendAny(nil, s.At(i), false)
			if !ok {
				return b, false
			}
			arr = otlpwire.AppendBytes(arr, otlpwire.ArrayValues, one)
		}
		return otlpwire.AppendBytes(b, otlpwire.AnyArray, arr), true
	}
	return b, false // maps, bytes, empty: contents, not read by the merge
}

// skeletonKeeps names the attributes a record keeps: the ones the merge reads (which
// spans are model calls, tools and agent runs; usage, cost and merge results; tool-call
// ids), nothing of a request's or response's contents.
func skeletonKeeps(k string) bool {
	switch k {
	case genai.AttrOperationName, genai.AttrToolCallID, genai.AttrToolName, genai.AttrAgentName,
		genai.AttrFinishReasons, genai.AttrOpenInferenceSpanKind, genai.AttrAIOperationID, genai.AttrLLMRequestType:
		return true
	}
	return strings.HasPrefix(k, "gen_ai.usage.") || strings.HasPrefix(k, "agentmeter.")
}

// messageOf returns the spans written at parts (ranges of w.spans) as one TracesData
// message.
func (w *skeletonWriter) messageOf(parts [][2]int32) []byte {
	n := 0
	for _, pt := range parts {
		n += int(pt[1] - pt[0])
	}
	// TracesData{resource_spans: ResourceSpans{scope_spans: ScopeSpans{spans...}}},
	// written into one buffer: each length is known before its bytes
	rsLen := protowire.SizeTag(otlpwire.ResourceSpansScopeSpans) + protowire.SizeBytes(n)
	out := make([]byte, 0, protowire.SizeTag(otlpwire.TracesResourceSpans)+protowire.SizeBytes(rsLen))
	out = otlpwire.AppendHeader(out, otlpwire.TracesResourceSpans, rsLen)
	out = otlpwire.AppendHeader(out, otlpwire.ResourceSpansScopeSpans, n)
	for _, pt := range parts {
		out = append(out, w.spans[pt[0]:pt[1]]...)
	}
	return out
}

// message returns the spans written since reset as one TracesData message.
func (w *skeletonWriter) message() []byte {
	return w.messageOf([][2]int32{{0, int32(len(w.spans))}})
}
