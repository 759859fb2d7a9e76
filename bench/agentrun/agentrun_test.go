package agentrun

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
)

// Both shapes: spans in end order (every child before its parent, the root last) and,
// once retimed, every parent enclosing its children and every span ending at its offset.
func TestRunsEndInOrderAndRetimeEnclosesChildren(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	start := time.Unix(1_800_000_000, 0)
	for i := range 50 {
		for _, run := range []Run{New(r, uint64(i)), Untraced(r, uint64(i))} {
			ends := run.Retime(start, 30*time.Second)
			require.Len(t, ends, len(run.Spans))
			require.True(t, run.Root().ParentSpanID().IsEmpty())
			require.Equal(t, run.Traces.SpanCount(), len(run.Spans))
			pos := map[pcommon.SpanID]int{}
			for j, sp := range run.Spans {
				pos[sp.SpanID()] = j
				require.Equal(t, pcommon.NewTimestampFromTime(start.Add(ends[j])), sp.EndTimestamp())
				require.Less(t, sp.StartTimestamp(), sp.EndTimestamp())
			}
			require.Equal(t, 30*time.Second, ends[len(ends)-1].Round(time.Second))
			for j, sp := range run.Spans {
				p, ok := pos[sp.ParentSpanID()]
				if !ok {
					continue
				}
				require.Greater(t, p, j, "parent ends after child")
				parent := run.Spans[p]
				require.LessOrEqual(t, parent.StartTimestamp(), sp.StartTimestamp())
				require.GreaterOrEqual(t, parent.EndTimestamp(), sp.EndTimestamp())
			}
		}
	}
}

// The untraced shape has only model calls under the root, some of them under a span
// that is never sent (the task), and no tool or agent spans.
func TestUntracedHasOnlyModelCallsAndAMissingParent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	missing := 0
	for i := range 20 {
		run := Untraced(r, uint64(i))
		ids := map[pcommon.SpanID]bool{}
		for _, sp := range run.Spans {
			ids[sp.SpanID()] = true
		}
		for _, sp := range run.Spans[:len(run.Spans)-1] {
			require.True(t, genai.IsModelCallSpan(sp.Name(), sp.Attributes()), sp.Name())
			require.Equal(t, ptrace.SpanKindClient, sp.Kind())
			if !ids[sp.ParentSpanID()] {
				missing++
			}
		}
	}
	require.Positive(t, missing, "some runs dispatch an untraced task")
}

// Every span of a DeerFlow-shaped run gets the placement the runtime gives it: its
// ancestors' start times and run ids, then its own. An untraced run's subagent calls,
// under a parent that never comes, get none.
func TestPlaceGivesEachSpanItsChain(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	start := time.Unix(1_800_000_000, 0)
	for i := range 20 {
		for _, run := range []Run{New(r, uint64(i)), Untraced(r, uint64(i))} {
			run.Retime(start, 30*time.Second)
			run.Place()
			byID := map[pcommon.SpanID]ptrace.Span{}
			for _, sp := range run.Spans {
				byID[sp.SpanID()] = sp
			}
			for _, sp := range run.Spans {
				v, ok := sp.Attributes().Get(genai.AttrLSDottedOrder)
				parent, hasParent := byID[sp.ParentSpanID()]
				if !sp.ParentSpanID().IsEmpty() && !hasParent {
					require.False(t, ok, "no placement under a parent that never comes")
					continue
				}
				require.True(t, ok)
				segs, valid := dottedorder.Parse(v.Str())
				require.True(t, valid, v.Str())
				last := segs[len(segs)-1]
				require.Equal(t, int64(sp.StartTimestamp())/1000, last.Micros)
				if !hasParent {
					require.Equal(t, []dottedorder.Segment{{Micros: last.Micros, RunID: dottedorder.TraceUUID(sp.TraceID())}}, segs)
					continue
				}
				require.Equal(t, dottedorder.SpanUUID(sp.SpanID()), last.RunID)
				pv, _ := parent.Attributes().Get(genai.AttrLSDottedOrder)
				require.Equal(t, pv.Str()+"."+v.Str()[len(pv.Str())+1:], v.Str())
			}
		}
	}
}
