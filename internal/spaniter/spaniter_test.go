package spaniter

import (
	"iter"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// batch builds traces with the given span counts per scope, per resource, naming each
// span by its position so order is visible.
func batch(prefix string, layout [][]int) ptrace.Traces {
	td := ptrace.NewTraces()
	for i, scopes := range layout {
		rs := td.ResourceSpans().AppendEmpty()
		for j, n := range scopes {
			ss := rs.ScopeSpans().AppendEmpty()
			for k := 0; k < n; k++ {
				ss.Spans().AppendEmpty().SetName(prefix + string(rune('0'+i)) + string(rune('0'+j)) + string(rune('0'+k)))
			}
		}
	}
	return td
}

func names(seq iter.Seq[ptrace.Span]) []string {
	var out []string
	for sp := range seq {
		out = append(out, sp.Name())
	}
	return out
}

func TestAllYieldsEverySpanInOrder(t *testing.T) {
	td := batch("a", [][]int{{2, 0, 1}, {}, {1}})
	assert.Equal(t, []string{"a000", "a001", "a020", "a200"}, names(All(td)))
	assert.Empty(t, names(All(ptrace.NewTraces())))
}

func TestAllStopsWhenTheLoopBreaks(t *testing.T) {
	td := batch("a", [][]int{{3}, {3}})
	var seen []string
	for sp := range All(td) {
		seen = append(seen, sp.Name())
		if len(seen) == 4 {
			break
		}
	}
	assert.Equal(t, []string{"a000", "a001", "a002", "a100"}, seen)
}

func TestAllYieldsTheTracesOwnSpans(t *testing.T) {
	td := batch("a", [][]int{{1}})
	for sp := range All(td) {
		sp.SetName("renamed")
	}
	assert.Equal(t, "renamed", td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Name())
}

func TestInWalksBatchesInOrder(t *testing.T) {
	tds := []ptrace.Traces{batch("a", [][]int{{1}}), ptrace.NewTraces(), batch("b", [][]int{{1, 1}})}
	assert.Equal(t, []string{"a000", "b000", "b010"}, names(In(tds)))
	n := 0
	for range In(tds) {
		n++
		break
	}
	assert.Equal(t, 1, n)
	assert.Len(t, slices.Collect(In(nil)), 0)
}

// RemoveIf visits every span in the order of All, removes those it is told to, and
// then the scopes and resources left empty (empty ones it was given too).
func TestRemoveIfTakesEmptiedScopesAndResourcesWithIt(t *testing.T) {
	td := batch("a", [][]int{{2, 1}, {1}, {}})
	var visited []string
	RemoveIf(td, func(sp ptrace.Span) bool {
		visited = append(visited, sp.Name())
		return sp.Name() != "a001"
	})
	assert.Equal(t, []string{"a000", "a001", "a010", "a100"}, visited)
	assert.Equal(t, []string{"a001"}, names(All(td)))
	assert.Equal(t, 1, td.ResourceSpans().Len())
	assert.Equal(t, 1, td.ResourceSpans().At(0).ScopeSpans().Len())
}
