package subagentmerge

// Stream mode: the merge run over a ledger's whole skeleton.

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// mergedView is the merge run over a ledger's whole skeleton.
type mergedView struct {
	spans []ptrace.Span
	idx   map[pcommon.SpanID]int32
}

// span returns the merge's version of span id.
func (m mergedView) span(id pcommon.SpanID) (ptrace.Span, bool) {
	i, ok := m.idx[id]
	if !ok {
		return ptrace.Span{}, false
	}
	return m.spans[i], true
}

// mergeLedger decodes l's skeleton and runs the merge over it. The decoded form is not
// kept: the merge runs rarely (effect.go), and a view per live trace would cost more heap,
// and more garbage-collector work, than decoding again.
func (p *subagentMerge) mergeLedger(l *ledger) (mergedView, error) {
	var v mergedView
	if err := l.thaw(); err != nil {
		return v, err
	}
	for _, part := range l.skel {
		td, err := p.unmarshaler.UnmarshalTraces(part)
		if err != nil {
			// only this processor's own encoding produced these bytes
			return mergedView{}, err
		}
		v.spans = appendSpans(v.spans, td)
	}
	v.idx = make(map[pcommon.SpanID]int32, len(v.spans))
	for i, sp := range v.spans {
		v.idx[sp.SpanID()] = int32(i)
	}
	merge.Apply(v.spans)
	return v, nil
}
