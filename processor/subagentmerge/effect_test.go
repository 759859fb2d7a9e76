package subagentmerge

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// hasModelUnder is the rule modelsBelow computes, asked span by span: some model call
// has keys[i] among its ancestors, walking up through the spans present.
func hasModelUnder(s *spanSet, i int) bool {
	for j := range s.keys {
		if s.keys[j].kind&kindModel == 0 {
			continue
		}
		k := s.keys[j]
		for steps := 0; !k.root() && steps <= len(s.keys); steps++ {
			p := s.find(k.parent)
			if p < 0 {
				break
			}
			if p == i {
				return true
			}
			k = s.keys[p]
		}
	}
	return false
}

// modelsBelow answers as the span-by-span rule does over random sets: parents missing,
// parents that arrive after their children, cycles of parent links, sets past the
// linear-search limit.
func TestModelsBelowAsTheRuleSpanBySpan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 27))
	for round := range 2000 {
		n := 1 + rng.IntN(2*linearLimit)
		var s spanSet
		id := func(i int) pcommon.SpanID { return pcommon.SpanID{1, byte(i >> 8), byte(i)} }
		for i := range n {
			k := spanKey{id: id(i)}
			if r := rng.IntN(10); r > 0 { // one in ten is a local root
				// mostly an earlier span, sometimes a later one, one never present or itself
				k.parent = id(rng.IntN(n + n/4 + 1))
			}
			switch rng.IntN(3) {
			case 0:
				k.kind = kindModel
			case 1:
				k.kind = kindTool
			}
			s.add(k, nil)
		}
		below := &modelsBelow{s: &s}
		for i := range s.keys {
			require.Equal(t, hasModelUnder(&s, i), below.has(i), "round %d, span %d of %d", round, i, n)
		}
	}
}
