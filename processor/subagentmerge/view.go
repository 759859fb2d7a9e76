package subagentmerge

// Stream mode: the merge run over a ledger's whole skeleton, and the decoded view of
// it kept while its trace is extended.

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// mergedView is the merge run over a ledger's whole skeleton.
type mergedView struct{ v *ledgerView }

// span returns the merge's version of span id.
func (m mergedView) span(id pcommon.SpanID) (ptrace.Span, bool) {
	if m.v == nil {
		return ptrace.Span{}, false
	}
	i, ok := m.v.idx[id]
	if !ok {
		return ptrace.Span{}, false
	}
	return m.v.spans[i], true
}

// mergeLedger runs the merge over l's whole skeleton: on its cached view, with what
// the last run wrote taken off first, or on a fresh decode.
func (p *subagentMerge) mergeLedger(s *shard, l *ledger) (mergedView, error) {
	v := l.view
	if v == nil || l.upstream {
		var err error
		if v, err = p.decodeView(l.skel); err != nil {
			// only this processor's own encoding produced these bytes
			return mergedView{}, err
		}
		if !l.upstream {
			l.view = v
			s.led.viewed = append(s.led.viewed, l)
		}
	} else {
		for i, sp := range v.spans {
			attrs := sp.Attributes()
			attrs.RemoveIf(func(k string, _ pcommon.Value) bool {
				return isMergeWritten(k) || (k == genai.AttrCaller && !v.named[i])
			})
		}
	}
	merge.Apply(v.spans)
	return mergedView{v}, nil
}

// decodeView decodes a skeleton into a view.
func (p *subagentMerge) decodeView(skel [][]byte) (*ledgerView, error) {
	v := &ledgerView{td: ptrace.NewTraces()}
	for _, part := range skel {
		td, err := p.unmarshaler.UnmarshalTraces(part)
		if err != nil {
			return nil, err
		}
		v.add(appendSpans(nil, td))
		td.ResourceSpans().MoveAndAppendTo(v.td.ResourceSpans())
	}
	return v, nil
}

func (v *ledgerView) add(spans []ptrace.Span) {
	if v.idx == nil {
		v.idx = make(map[pcommon.SpanID]int32, len(spans))
	}
	for _, sp := range spans {
		v.idx[sp.SpanID()] = int32(len(v.spans))
		v.spans = append(v.spans, sp)
		_, named := sp.Attributes().Get(genai.AttrCaller)
		v.named = append(v.named, named)
	}
}

// extendView adds a batch's skeleton to l's cached view, if it has one.
func (p *subagentMerge) extendView(s *shard, l *ledger, delta []byte) error {
	if l.view == nil {
		return nil
	}
	td, err := p.unmarshaler.UnmarshalTraces(delta)
	if err != nil {
		l.view = nil
		return err
	}
	spans := appendSpans(nil, td)
	td.ResourceSpans().MoveAndAppendTo(l.view.td.ResourceSpans())
	l.view.add(spans)
	return nil
}

// dropViews lets go of the cached views of ledgers not extended since before cutoff
// (called under the shard's lock).
func (ls *ledgers) dropViews(cutoff int64) {
	keep := ls.viewed[:0]
	for _, l := range ls.viewed {
		if l.view != nil && l.lastSeen > cutoff {
			keep = append(keep, l)
			continue
		}
		l.view = nil
	}
	clear(ls.viewed[len(keep):])
	ls.viewed = keep
}
