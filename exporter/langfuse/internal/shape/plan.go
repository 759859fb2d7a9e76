package shape

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
)

// Attr is one attribute a plan adds to a span: a string, an int or a string array.
type Attr struct {
	Key  string
	Str  string
	Int  int64
	Dbl  float64
	Strs []string
	Kind pcommon.ValueType
}

// Plan holds the attributes to add to each span of a batch, in the batch's span order
// (resource spans, scope spans, spans). It is applied either to the pdata (Apply) or,
// on the export path, spliced into the already encoded OTLP protobuf (Splice), which
// costs a copy of the bytes instead of growing every span's attribute slice.
type Plan struct {
	items []Attr
	ioff  []int32 // span i adds items[ioff[i]:ioff[i+1]]
	enc   []byte  // the same attributes encoded as Span.attributes fields
	eoff  []int32 // span i's encoded attributes are enc[eoff[i]:eoff[i+1]]
	facts []spanFacts
	// versions are the spans' keys and merge revisions, read in the same pass
	versions []vendorhttp.Version
	// traces are the batch's traces, indexed by traceIdx
	traces   []traceInfo
	traceIdx map[pcommon.TraceID]int32
}

// Versions are the spans' keys and merge revisions, in span order.
func (p *Plan) Versions() []vendorhttp.Version { return p.versions }

// Spans is the number of spans the plan covers.
func (p *Plan) Spans() int { return len(p.ioff) - 1 }

// SpanAttrs returns what the plan adds to span i.
func (p *Plan) SpanAttrs(i int) []Attr { return p.items[p.ioff[i]:p.ioff[i+1]] }

var planPool = sync.Pool{New: func() any { return new(Plan) }}

// Release hands the plan (and every Slice of it) back for reuse; use none of them after.
func (p *Plan) Release() {
	if cap(p.enc) > 4<<20 { // don't pin the buffers of a rare giant batch
		return
	}
	clear(p.items) // drop string references
	p.items, p.ioff, p.enc, p.eoff = p.items[:0], p.ioff[:0], p.enc[:0], p.eoff[:0]
	clear(p.facts)
	clear(p.traces)
	clear(p.traceIdx)
	p.facts, p.versions, p.traces = p.facts[:0], p.versions[:0], p.traces[:0]
	planPool.Put(p)
}

// Slice is the plan of spans [from, to), for a batch split in span order.
func (p *Plan) Slice(from, to int) *Plan {
	return &Plan{items: p.items, ioff: p.ioff[from : to+1], enc: p.enc, eoff: p.eoff[from : to+1]}
}

func (p *Plan) str(key, v string) {
	p.items = append(p.items, Attr{Key: key, Str: v, Kind: pcommon.ValueTypeStr})
	valLen := protowire.SizeTag(anyStringValue) + protowire.SizeBytes(len(v))
	p.enc = appendKVHeader(p.enc, key, valLen)
	p.enc = protowire.AppendTag(p.enc, anyStringValue, protowire.BytesType)
	p.enc = protowire.AppendString(p.enc, v)
}

func (p *Plan) int(key string, v int64) {
	p.items = append(p.items, Attr{Key: key, Int: v, Kind: pcommon.ValueTypeInt})
	valLen := protowire.SizeTag(anyIntValue) + protowire.SizeVarint(uint64(v))
	p.enc = appendKVHeader(p.enc, key, valLen)
	p.enc = protowire.AppendTag(p.enc, anyIntValue, protowire.VarintType)
	p.enc = protowire.AppendVarint(p.enc, uint64(v))
}

func (p *Plan) dbl(key string, v float64) {
	p.items = append(p.items, Attr{Key: key, Dbl: v, Kind: pcommon.ValueTypeDouble})
	valLen := protowire.SizeTag(anyDoubleValue) + protowire.SizeFixed64()
	p.enc = appendKVHeader(p.enc, key, valLen)
	p.enc = protowire.AppendTag(p.enc, anyDoubleValue, protowire.Fixed64Type)
	p.enc = protowire.AppendFixed64(p.enc, math.Float64bits(v))
}

func (p *Plan) strs(key string, vs []string) {
	p.items = append(p.items, Attr{Key: key, Strs: vs, Kind: pcommon.ValueTypeSlice})
	arrLen := 0
	for _, v := range vs {
		arrLen += protowire.SizeTag(arrayValues) + protowire.SizeBytes(protowire.SizeTag(anyStringValue)+protowire.SizeBytes(len(v)))
	}
	valLen := protowire.SizeTag(anyArrayValue) + protowire.SizeBytes(arrLen)
	p.enc = appendKVHeader(p.enc, key, valLen)
	p.enc = protowire.AppendTag(p.enc, anyArrayValue, protowire.BytesType)
	p.enc = protowire.AppendVarint(p.enc, uint64(arrLen))
	for _, v := range vs {
		p.enc = protowire.AppendTag(p.enc, arrayValues, protowire.BytesType)
		p.enc = protowire.AppendVarint(p.enc, uint64(protowire.SizeTag(anyStringValue)+protowire.SizeBytes(len(v))))
		p.enc = protowire.AppendTag(p.enc, anyStringValue, protowire.BytesType)
		p.enc = protowire.AppendString(p.enc, v)
	}
}

// appendKVHeader starts one Span.attributes field holding KeyValue{key, value}, where
// the encoded AnyValue (valLen bytes) follows.
func appendKVHeader(b []byte, key string, valLen int) []byte {
	kvLen := protowire.SizeTag(kvKey) + protowire.SizeBytes(len(key)) +
		protowire.SizeTag(kvValue) + protowire.SizeBytes(valLen)
	b = protowire.AppendTag(b, spanAttributes, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(kvLen))
	b = protowire.AppendTag(b, kvKey, protowire.BytesType)
	b = protowire.AppendString(b, key)
	b = protowire.AppendTag(b, kvValue, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(valLen))
}

// Apply adds the planned attributes to td, which must be the batch the plan was made
// for (or the part of it the plan was sliced for).
func (p *Plan) Apply(td ptrace.Traces) {
	i := 0
	forEach(td, func(_ string, sp ptrace.Span) {
		if i >= p.Spans() {
			return
		}
		items := p.SpanAttrs(i)
		i++
		if len(items) == 0 {
			return
		}
		attrs := sp.Attributes()
		attrs.EnsureCapacity(attrs.Len() + len(items))
		for _, a := range items {
			switch a.Kind {
			case pcommon.ValueTypeStr:
				attrs.PutStr(a.Key, a.Str)
			case pcommon.ValueTypeInt:
				attrs.PutInt(a.Key, a.Int)
			case pcommon.ValueTypeDouble:
				attrs.PutDouble(a.Key, a.Dbl)
			case pcommon.ValueTypeSlice:
				s := attrs.PutEmptySlice(a.Key)
				s.EnsureCapacity(len(a.Strs))
				for _, v := range a.Strs {
					s.AppendEmpty().SetStr(v)
				}
			}
		}
	})
}

// OTLP protobuf field numbers (opentelemetry-proto: collector/trace/v1, trace/v1, common/v1).
const (
	requestResourceSpans protowire.Number = 1 // ExportTraceServiceRequest.resource_spans
	resourceScopeSpans   protowire.Number = 2 // ResourceSpans.scope_spans
	scopeSpans           protowire.Number = 2 // ScopeSpans.spans
	spanAttributes       protowire.Number = 9 // Span.attributes
	kvKey                protowire.Number = 1 // KeyValue.key
	kvValue              protowire.Number = 2 // KeyValue.value
	anyStringValue       protowire.Number = 1 // AnyValue.string_value
	anyIntValue          protowire.Number = 3 // AnyValue.int_value
	anyDoubleValue       protowire.Number = 4 // AnyValue.double_value
	anyArrayValue        protowire.Number = 5 // AnyValue.array_value
	arrayValues          protowire.Number = 1 // ArrayValue.values
)

var errMalformed = errors.New("shape: malformed OTLP protobuf")

// Splicer splices plans into encoded requests, reusing its buffers between calls. It is
// not safe for concurrent use; keep one per goroutine (a sync.Pool).
type Splicer struct {
	rs, ss []byte
}

// Splice appends to dst the ExportTraceServiceRequest src (as encoded by pdata from the
// batch the plan was made for) with each span's planned attributes appended to it.
// Protobuf merges repeated fields wherever they appear, so an attribute appended at the
// end of a Span message is the same as one in its attribute list; only the lengths of the
// enclosing ResourceSpans, ScopeSpans and Span change.
func (s *Splicer) Splice(dst, src []byte, p *Plan) ([]byte, error) {
	span := 0
	out, err := eachField(dst, src, requestResourceSpans, func(dst, rs []byte) ([]byte, error) {
		var err error
		if s.rs, err = s.resourceSpans(s.rs[:0], rs, p, &span); err != nil {
			return nil, err
		}
		return appendMessage(dst, requestResourceSpans, s.rs), nil
	})
	if err != nil {
		return nil, err
	}
	if span != p.Spans() {
		return nil, fmt.Errorf("shape: plan for %d spans applied to %d", p.Spans(), span)
	}
	return out, nil
}

func (s *Splicer) resourceSpans(dst, src []byte, p *Plan, span *int) ([]byte, error) {
	return eachField(dst, src, resourceScopeSpans, func(dst, ss []byte) ([]byte, error) {
		var err error
		if s.ss, err = spans(s.ss[:0], ss, p, span); err != nil {
			return nil, err
		}
		return appendMessage(dst, resourceScopeSpans, s.ss), nil
	})
}

// spans copies a ScopeSpans message, appending each span's planned attributes.
func spans(dst, src []byte, p *Plan, span *int) ([]byte, error) {
	return eachField(dst, src, scopeSpans, func(dst, sp []byte) ([]byte, error) {
		if *span >= p.Spans() {
			return nil, fmt.Errorf("shape: more spans than the plan covers (%d)", p.Spans())
		}
		extra := p.enc[p.eoff[*span]:p.eoff[*span+1]]
		*span++
		dst = protowire.AppendTag(dst, scopeSpans, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(len(sp)+len(extra)))
		dst = append(dst, sp...)
		return append(dst, extra...), nil
	})
}

// eachField copies the protobuf message src into dst field by field, except that every
// length-delimited field num is handed to fn, which appends its replacement (tag
// included) to dst. It is the one walk the three nesting levels of a request share.
func eachField(dst, src []byte, num protowire.Number, fn func(dst, field []byte) ([]byte, error)) ([]byte, error) {
	for len(src) > 0 {
		n, typ, k := protowire.ConsumeTag(src)
		if k < 0 {
			return nil, errMalformed
		}
		if n != num || typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(n, typ, src[k:])
			if m < 0 {
				return nil, errMalformed
			}
			dst = append(dst, src[:k+m]...)
			src = src[k+m:]
			continue
		}
		field, m := protowire.ConsumeBytes(src[k:])
		if m < 0 {
			return nil, errMalformed
		}
		var err error
		if dst, err = fn(dst, field); err != nil {
			return nil, err
		}
		src = src[k+m:]
	}
	return dst, nil
}

// appendMessage appends field num holding the encoded message msg.
func appendMessage(dst []byte, num protowire.Number, msg []byte) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, msg)
}
