package subagentmerge

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// spanEncoder encodes one span at a time as a TracesData message under its resource and
// scope, the form a kept span is stored in. The span is not copied: it is moved into the
// encoder's traces for the encoding and moved back, and the resource and scope are
// copied once for a run of spans that share them (a batch's spans mostly do). It holds
// the last resource and scope it was given, so reset it before their batch is let go.
type spanEncoder struct {
	td    ptrace.Traces
	res   pcommon.Resource
	scope pcommon.InstrumentationScope
	slot  ptrace.Span
	ready bool
}

// encode returns sp, under res and scope, as one TracesData message; sp is unchanged.
func (e *spanEncoder) encode(m *ptrace.ProtoMarshaler, sp ptrace.Span, res pcommon.Resource, scope pcommon.InstrumentationScope) ([]byte, error) {
	if !e.ready || e.res != res || e.scope != scope {
		e.td = ptrace.NewTraces()
		rs := e.td.ResourceSpans().AppendEmpty()
		res.CopyTo(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		scope.CopyTo(ss.Scope())
		e.slot = ss.Spans().AppendEmpty()
		e.res, e.scope, e.ready = res, scope, true
	}
	sp.MoveTo(e.slot)
	enc, err := m.MarshalTraces(e.td)
	e.slot.MoveTo(sp)
	return enc, err
}

// reset forgets the resource and scope it copied last.
func (e *spanEncoder) reset() { *e = spanEncoder{} }
