package subagentmerge

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// mergeSays is what the merge decides of a span: its merge-written attributes and its
// caller (what writeMerged copies and fingerprint hashes).
func mergeSays(m pcommon.Map) map[string]any {
	out := map[string]any{}
	m.Range(func(k string, v pcommon.Value) bool {
		if merge.Written(k) || k == genai.AttrCaller {
			out[k] = v.AsRaw()
		}
		return true
	})
	return out
}

// A ledger's merge runs over facts, read as spans arrive or, for parts that came back
// from storage or a frozen block, from the skeleton. For random agent trees, split into
// parts that come either way, each span's merge-written attributes and caller must be
// what merge.Apply leaves on the decoded skeleton (how the merge ran over a ledger
// before it kept facts). Half the trees went through a merge already (their tool spans
// marked, their dispatchers carrying results), a third name their callers.
func TestLedgerFactsMergeAsTheSkeletonDoes(t *testing.T) {
	p := &subagentMerge{}
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		td := randomAgentTrace(r, seed)
		if seed%3 == 0 {
			nameCallers(td)
		}
		if seed%2 == 0 {
			merge.Apply(appendSpans(nil, td))
		}
		spans := appendSpans(nil, td)
		r.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })

		// the skeleton, merged the way mergeLedger used to
		var sw skeletonWriter
		for _, sp := range spans {
			sw.add(sp)
		}
		dec, err := p.unmarshaler.UnmarshalTraces(sw.message())
		require.NoError(t, err)
		skel := appendSpans(nil, dec)
		merge.Apply(skel)
		want := map[pcommon.SpanID]map[string]any{}
		for _, sp := range skel {
			want[sp.SpanID()] = mergeSays(sp.Attributes())
		}

		// the ledger: parts of 1–8 spans, each with its facts or without
		l := &ledger{}
		for len(spans) > 0 {
			n := min(len(spans), 1+r.IntN(8))
			var part skeletonWriter
			var facts []merge.Fact
			for _, sp := range spans[:n] {
				part.add(sp)
				facts = append(facts, merge.FactOf(sp, genai.Classify(sp.Name(), sp.Attributes()).Kind))
			}
			if r.IntN(3) == 0 {
				facts = nil // read from the skeleton at the merge run
			}
			l.addSkel(part.message(), facts)
			spans = spans[n:]
		}
		view, err := p.mergeLedger(l)
		require.NoError(t, err)
		require.Len(t, view.facts, len(want), "seed %d", seed)
		for id, w := range want {
			got, ok := view.attrs(id)
			require.True(t, ok, "seed %d span %s", seed, id)
			assert.Equal(t, w, mergeSays(got), "seed %d span %s", seed, id)
			// the shortcuts re-emission takes read the same as the attributes
			_, named := got.Get(genai.AttrCaller)
			assert.Equal(t, named, view.namesCaller(id), "seed %d span %s", seed, id)
			fp, m := fingerprint(got), mergeSays(got)
			var k keptSpan
			for i := range 2 { // read, then from k
				got, read, ok := view.fingerprint(id, &k)
				require.True(t, ok)
				assert.Equal(t, fp, got, "seed %d span %s", seed, id)
				if i == 0 {
					assert.Equal(t, m, mergeSays(read), "what it read is attrs")
				} else {
					assert.Equal(t, pcommon.Map{}, read, "nothing read")
				}
			}
		}
	}
}

// A ledger that is frozen, or whose skeleton is rewritten, forgets its facts, and the
// next merge run reads them from the skeleton again.
func TestLedgerFactsFollowTheSkeleton(t *testing.T) {
	td := randomAgentTrace(rand.New(rand.NewPCG(5, 5)), 5)
	spans := appendSpans(nil, td)
	var sw skeletonWriter
	var facts []merge.Fact
	for _, sp := range spans {
		sw.add(sp)
		facts = append(facts, merge.FactOf(sp, genai.Classify(sp.Name(), sp.Attributes()).Kind))
	}
	l := &ledger{kept: map[pcommon.SpanID]*keptSpan{}}
	l.addSkel(sw.message(), facts)
	assert.Equal(t, 1, l.factParts)
	require.Len(t, l.facts, 1)
	assert.Len(t, l.facts[0], len(spans))
	assert.Positive(t, l.factsLen)

	l.freeze()
	assert.Nil(t, l.facts)
	assert.Zero(t, l.factParts)
	assert.Zero(t, l.factsLen)

	// facts given for a part after one without are not taken: they would be out of
	// order with the skeleton's
	l.addSkel(sw.message(), facts)
	assert.Zero(t, l.factParts, "the thawed part has no facts yet")
	assert.Nil(t, l.facts)

	p := &subagentMerge{}
	view, err := p.mergeLedger(l)
	require.NoError(t, err)
	assert.Equal(t, 2, l.factParts)
	assert.Len(t, view.facts, 2*len(spans))
}

// The view of a span the ledger does not have is nothing.
func TestMergedViewOfAnUnknownSpan(t *testing.T) {
	var v mergedView
	_, ok := v.attrs(pcommon.SpanID{9})
	assert.False(t, ok)
}
