package subagentmerge

import (
	"math"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentmeter/agentmeter/genai"
)

// The skeleton of a released trace (correction.go) is written straight as OTLP protobuf,
// a TracesData message holding one ResourceSpans / ScopeSpans with the trimmed spans:
// building pdata copies first and marshalling them cost as much as the rest of the
// processor. Concatenated TracesData messages decode as one, so adding late spans to a
// record is appending another encoded message.

// OTLP field numbers (opentelemetry/proto/trace/v1/trace.proto, common/v1/common.proto).
const (
	fTracesDataResourceSpans = 1
	fResourceSpansScopeSpans = 2
	fScopeSpansSpans         = 2
	fSpanTraceID             = 1
	fSpanSpanID              = 2
	fSpanParentSpanID        = 4
	fSpanName                = 5
	fSpanKind                = 6
	fSpanStart               = 7
	fSpanEnd                 = 8
	fSpanAttributes          = 9
	fSpanFlags               = 16
	fKeyValueKey             = 1
	fKeyValueValue           = 2
	fAnyString               = 1
	fAnyBool                 = 2
	fAnyInt                  = 3
	fAnyDouble               = 4
	fAnyArray                = 5
	fArrayValues             = 1
)

// skeletonWriter encodes trimmed spans; its buffers are reused between spans.
type skeletonWriter struct {
	spans []byte // encoded Span fields of ScopeSpans.spans, each with its tag
	span  []byte // the span being written
	kv    []byte
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
	b = protowire.AppendTag(b, fSpanTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, tid[:])
	b = protowire.AppendTag(b, fSpanSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, sid[:])
	if !pid.IsEmpty() {
		b = protowire.AppendTag(b, fSpanParentSpanID, protowire.BytesType)
		b = protowire.AppendBytes(b, pid[:])
	}
	b = protowire.AppendTag(b, fSpanName, protowire.BytesType)
	b = protowire.AppendString(b, sp.Name())
	if k := sp.Kind(); k != 0 {
		b = protowire.AppendTag(b, fSpanKind, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(k))
	}
	b = protowire.AppendTag(b, fSpanStart, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(sp.StartTimestamp()))
	b = protowire.AppendTag(b, fSpanEnd, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(sp.EndTimestamp()))
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
				one = protowire.AppendTag(one, fAnyString, protowire.BytesType)
				one = protowire.AppendString(one, id)
				arr = protowire.AppendTag(arr, fArrayValues, protowire.BytesType)
				arr = protowire.AppendBytes(arr, one)
			}
			var any []byte
			any = protowire.AppendTag(any, fAnyArray, protowire.BytesType)
			any = protowire.AppendBytes(any, arr)
			b = w.appendKV(b, genai.AttrResponseToolCallIDs, any)
		}
	}
	if f := sp.Flags(); f != 0 {
		b = protowire.AppendTag(b, fSpanFlags, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, f)
	}
	w.span = b
	w.spans = protowire.AppendTag(w.spans, fScopeSpansSpans, protowire.BytesType)
	w.spans = protowire.AppendBytes(w.spans, b)
	return f
}

func (w *skeletonWriter) appendKV(b []byte, k string, val []byte) []byte {
	kv := w.kv[:0]
	kv = protowire.AppendTag(kv, fKeyValueKey, protowire.BytesType)
	kv = protowire.AppendString(kv, k)
	kv = protowire.AppendTag(kv, fKeyValueValue, protowire.BytesType)
	kv = protowire.AppendBytes(kv, val)
	w.kv = kv
	b = protowire.AppendTag(b, fSpanAttributes, protowire.BytesType)
	return protowire.AppendBytes(b, kv)
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
			arr = protowire.AppendTag(arr, fArrayValues, protowire.BytesType)
			arr = protowire.AppendBytes(arr, one)
		}
		w.arr = arr
		b := protowire.AppendTag(w.val[:0], fAnyArray, protowire.BytesType)
		w.val = protowire.AppendBytes(b, arr)
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
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		return protowire.AppendString(b, v.Str()), true
	case pcommon.ValueTypeBool:
		b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.Bool())), true
	case pcommon.ValueTypeInt:
		b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.Int())), true
	case pcommon.ValueTypeDouble:
		b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.Double())), true
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
			arr = protowire.AppendTag(arr, fArrayValues, protowire.BytesType)
			arr = protowire.AppendBytes(arr, one)
		}
		b = protowire.AppendTag(b, fAnyArray, protowire.BytesType)
		return protowire.AppendBytes(b, arr), true
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

// message returns the spans written since reset as one TracesData message.
func (w *skeletonWriter) message() []byte {
	rs := make([]byte, 0, len(w.spans)+8)
	rs = protowire.AppendTag(rs, fResourceSpansScopeSpans, protowire.BytesType)
	rs = protowire.AppendBytes(rs, w.spans)
	out := make([]byte, 0, len(rs)+8)
	out = protowire.AppendTag(out, fTracesDataResourceSpans, protowire.BytesType)
	return protowire.AppendBytes(out, rs)
}
