package subagentmerge

// Stream mode: the merge run over a ledger's whole trace.

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// mergedView is the merge run over a ledger's facts.
type mergedView struct {
	facts []*merge.Fact            // the ledger's facts, in the run's order
	out   []merge.Outcome          // out[i] for facts[i]; nil: the run wrote nothing
	idx   map[pcommon.SpanID]int32 // a span id's index in facts (the run's)
	m     pcommon.Map              // what attrs returns, reused
}

// attrs returns what the merge says of span id: the merge-written attributes it arrived
// with and the caller it names, with the run's outcome written over them, the way
// merge.Apply would leave them on the span. The map is reused by the next call.
func (v *mergedView) attrs(id pcommon.SpanID) (pcommon.Map, bool) {
	i, ok := v.idx[id]
	if !ok {
		return pcommon.Map{}, false
	}
	if v.m == (pcommon.Map{}) {
		v.m = pcommon.NewMap()
	}
	m := v.m
	f := v.facts[i]
	if f.Prior != (pcommon.Map{}) {
		f.Prior.CopyTo(m)
	} else {
		m.Clear()
	}
	if f.HasCaller {
		m.PutStr(genai.AttrCaller, f.Caller)
	}
	if v.out != nil {
		v.out[i].WriteTo(m)
	}
	return m, true
}

// fingerprint is fingerprint(v.attrs(id)), taken from k when the run's outcome for the
// span is the one k's last fingerprint was read from: what attrs returns is the span's
// fact (the same for the same span) with the outcome written over it, so the same
// outcome reads the same. A re-emission checks every kept span of its ledger, and most
// have not changed; building their attributes was most of its cost on long runs. m is
// what attrs returned when it was read here (until the next attrs call), zero when the
// fingerprint came from k.
func (v *mergedView) fingerprint(id pcommon.SpanID, k *keptSpan) (fp uint64, m pcommon.Map, ok bool) {
	i, ok := v.idx[id]
	if !ok {
		return 0, pcommon.Map{}, false
	}
	var o merge.Outcome
	if v.out != nil {
		o = v.out[i]
	}
	h := o.Hash()
	if h == k.outHash {
		return k.outFP, pcommon.Map{}, true
	}
	m, _ = v.attrs(id)
	fp = fingerprint(m)
	k.outHash, k.outFP = h, fp
	return fp, m, true
}

// namesCaller reports whether attrs(id) names a caller: the span's own, or the one the
// run gives it (the attributes the span arrived with that attrs starts from are only
// merge-written ones, merge.Written, which the caller is not).
func (v *mergedView) namesCaller(id pcommon.SpanID) bool {
	i, ok := v.idx[id]
	if !ok {
		return false
	}
	return v.facts[i].HasCaller || (v.out != nil && v.out[i].Caller != "")
}

// mergeLedger runs the merge over l's facts. The facts of a thawed ledger's spans are
// read as they arrive (streamTrace); those of parts that came back from storage or a
// frozen block are read here, from the skeleton, once.
func (p *subagentMerge) mergeLedger(l *ledger) (mergedView, error) {
	if err := l.thaw(); err != nil {
		return mergedView{}, err
	}
	for l.factParts < len(l.skel) {
		td, err := p.unmarshaler.UnmarshalTraces(l.skel[l.factParts])
		if err != nil {
			// only this processor's own encoding produced these bytes
			return mergedView{}, err
		}
		spans := appendSpans(nil, td)
		part := make([]merge.Fact, len(spans))
		for i, sp := range spans {
			part[i] = merge.FactOf(sp, genai.Classify(sp.Name(), sp.Attributes()).Kind)
		}
		l.addFacts(part)
	}
	n := 0
	for _, part := range l.facts {
		n += len(part)
	}
	v := mergedView{facts: make([]*merge.Fact, 0, n)}
	for _, part := range l.facts {
		for i := range part {
			v.facts = append(v.facts, &part[i])
		}
	}
	v.out, v.idx, _ = merge.Run(l.facts...)
	return v, nil
}
