package shape

import (
	"fmt"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/internal/otlpwire"
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

// Release hands the plan back for reuse; do not use it after.
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

func (p *Plan) str(key, v string) {
	p.items = append(p.items, Attr{Key: key, Str: v, Kind: pcommon.ValueTypeStr})
	p.enc = otlpwire.AppendKeyValueHeader(p.enc, otlpwire.SpanAttributes, key, otlpwire.StringValueLen(v))
	p.enc = otlpwire.AppendStringValue(p.enc, v)
}

func (p *Plan) int(key string, v int64) {
	p.items = append(p.items, Attr{Key: key, Int: v, Kind: pcommon.ValueTypeInt})
	p.enc = otlpwire.AppendKeyValueHeader(p.enc, otlpwire.SpanAttributes, key, otlpwire.IntValueLen(v))
	p.enc = otlpwire.AppendIntValue(p.enc, v)
}

func (p *Plan) dbl(key string, v float64) {
	p.items = append(p.items, Attr{Key: key, Dbl: v, Kind: pcommon.ValueTypeDouble})
	p.enc = otlpwire.AppendKeyValueHeader(p.enc, otlpwire.SpanAttributes, key, otlpwire.DoubleValueLen())
	p.enc = otlpwire.AppendDoubleValue(p.enc, v)
}

func (p *Plan) strs(key string, vs []string) {
	p.items = append(p.items, Attr{Key: key, Strs: vs, Kind: pcommon.ValueTypeSlice})
	p.enc = otlpwire.AppendKeyValueHeader(p.enc, otlpwire.SpanAttributes, key, otlpwire.StringArrayValueLen(vs))
	p.enc = otlpwire.AppendStringArrayValue(p.enc, vs)
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

// Splicer splices plans into encoded requests, reusing its buffer between calls. It is
// not safe for concurrent use; keep one per goroutine (a sync.Pool).
type Splicer struct {
	lens []int // the new length of every ResourceSpans and ScopeSpans, in the order met
}

// Splice appends to dst the ExportTraceServiceRequest src (as encoded by pdata from the
// batch the plan was made for) with each span's planned attributes appended to it.
// Protobuf merges repeated fields wherever they appear, so an attribute appended at the
// end of a Span message is the same as one in its attribute list; only the lengths of the
// enclosing ResourceSpans, ScopeSpans and Span change.
//
// A first walk measures every enclosing message's new length, so the second writes each
// length before its message, straight into dst, grown once: a request of some MiB is
// copied once instead of once per nesting level into buffers grown by doubling.
func (s *Splicer) Splice(dst, src []byte, p *Plan) ([]byte, error) {
	s.lens = s.lens[:0]
	span := 0
	size, err := s.measure(src, p, &span)
	if err != nil {
		return nil, err
	}
	if span != p.Spans() {
		return nil, fmt.Errorf("shape: plan for %d spans applied to %d", p.Spans(), span)
	}
	dst = slices.Grow(dst, size)
	span, at := 0, 0
	next := func() int { at++; return s.lens[at-1] }
	return otlpwire.EachField(dst, src, otlpwire.TracesResourceSpans, func(dst, rs []byte) ([]byte, error) {
		dst = otlpwire.AppendHeader(dst, otlpwire.TracesResourceSpans, next())
		return otlpwire.EachField(dst, rs, otlpwire.ResourceSpansScopeSpans, func(dst, ss []byte) ([]byte, error) {
			dst = otlpwire.AppendHeader(dst, otlpwire.ResourceSpansScopeSpans, next())
			return otlpwire.EachField(dst, ss, otlpwire.ScopeSpansSpans, func(dst, sp []byte) ([]byte, error) {
				extra := p.enc[p.eoff[span]:p.eoff[span+1]]
				span++
				dst = otlpwire.AppendHeader(dst, otlpwire.ScopeSpansSpans, len(sp)+len(extra))
				dst = append(dst, sp...)
				return append(dst, extra...), nil
			})
		})
	})
}

// measure returns the spliced size of the request src and appends to s.lens the new
// length of each ResourceSpans and ScopeSpans in it, each ahead of those it encloses.
func (s *Splicer) measure(src []byte, p *Plan, span *int) (int, error) {
	return otlpwire.EachFieldSize(src, otlpwire.TracesResourceSpans, func(rs []byte) (int, error) {
		at := len(s.lens)
		s.lens = append(s.lens, 0)
		n, err := otlpwire.EachFieldSize(rs, otlpwire.ResourceSpansScopeSpans, func(ss []byte) (int, error) {
			at := len(s.lens)
			s.lens = append(s.lens, 0)
			n, err := otlpwire.EachFieldSize(ss, otlpwire.ScopeSpansSpans, func(sp []byte) (int, error) {
				if *span >= p.Spans() {
					return 0, fmt.Errorf("shape: more spans than the plan covers (%d)", p.Spans())
				}
				*span++
				return len(sp) + int(p.eoff[*span]-p.eoff[*span-1]), nil
			})
			s.lens[at] = n
			return n, err
		})
		s.lens[at] = n
		return n, err
	})
}
