package merge

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

func priced(sp ptrace.Span, u genai.Usage, c genai.Cost) {
	genai.PutUsage(sp.Attributes(), u)
	genai.PutCost(sp.Attributes(), c, genai.CostSourceTable)
}

func TestApplyCarriesCostLikeTokens(t *testing.T) {
	ss := ptrace.NewSpanSlice()
	d := leadDispatch(ss)
	priced(d, genai.Usage{Input: 100, Output: 10}, genai.Cost{Input: 1, Total: 1}) // own cost never merged onto itself
	newSpan(ss, 4, 3, genai.OpInvokeAgent)
	s1 := newSpan(ss, 5, 4, genai.OpChat)
	priced(s1, genai.Usage{Input: 10, Output: 1}, genai.Cost{Input: 0.008, Output: 0.002, Total: 0.01})
	s2 := newSpan(ss, 6, 4, genai.OpChat) // unknown model: usage, no cost
	genai.PutUsage(s2.Attributes(), genai.Usage{Input: 5, Output: 1})
	s3 := newSpan(ss, 7, 4, genai.OpChat) // the subagent dispatches a task of its own
	genai.PutStrings(s3.Attributes(), genai.AttrResponseToolCallIDs, []string{"c2"})
	priced(s3, genai.Usage{Input: 10, Output: 1}, genai.Cost{CacheRead: 0.005, Total: 0.005})
	inner := newSpan(ss, 8, 4, genai.OpExecuteTool)
	inner.Attributes().PutStr(genai.AttrToolCallID, "c2")
	newSpan(ss, 9, 8, genai.OpInvokeAgent)
	s4 := newSpan(ss, 10, 9, genai.OpChat)
	priced(s4, genai.Usage{Input: 10, Output: 1}, genai.Cost{Reasoning: 0.02, Total: 0.02})

	spans := make([]ptrace.Span, ss.Len())
	for i := range spans {
		spans[i] = ss.At(i)
	}
	Apply(spans)

	got, ok := genai.SubagentCostFromMap(d.Attributes())
	require.True(t, ok)
	assert.InDelta(t, 0.035, got.Total, 1e-12, "every call under the task, nested ones included")
	assert.InDelta(t, 0.008, got.Input, 1e-12)
	assert.InDelta(t, 0.005, got.CacheRead, 1e-12)
	assert.InDelta(t, 0.02, got.Reasoning, 1e-12)
	n, _ := d.Attributes().Get(genai.AttrSubagentCostUnpriced)
	assert.Equal(t, int64(1), n.Int(), "the unknown model's call is counted, not guessed")
	own, _, _ := genai.CostFromMap(d.Attributes())
	assert.Equal(t, 1.0, own.Total, "own cost unchanged")

	innerCost, ok := genai.SubagentCostFromMap(s3.Attributes())
	require.True(t, ok)
	assert.InDelta(t, 0.02, innerCost.Total, 1e-12)
	_, has := s3.Attributes().Get(genai.AttrSubagentCostUnpriced)
	assert.False(t, has)
}

func TestApplyWithoutCostClaimsNone(t *testing.T) {
	ss := ptrace.NewSpanSlice()
	d := leadDispatch(ss)
	sub := newSpan(ss, 4, 3, genai.OpChat)
	genai.PutUsage(sub.Attributes(), genai.Usage{Input: 5, Output: 1})
	Apply([]ptrace.Span{ss.At(0), ss.At(1), ss.At(2), ss.At(3)})
	_, ok := genai.SubagentCostFromMap(d.Attributes())
	assert.False(t, ok)
	_, ok = d.Attributes().Get(genai.AttrSubagentCostUnpriced)
	assert.False(t, ok)
}

// TestMergedCostPropertyRandomTrees builds random agent trees (tasks nested up to four
// deep, several calls per run, some unpriced) and checks on every dispatching call that
// its merged cost is the sum of the own cost of the model calls under the tasks it
// dispatched, and its unpriced count the number of those calls without cost.
func TestMergedCostPropertyRandomTrees(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 17))
			ss := ptrace.NewSpanSlice()
			var next uint64
			id := func() pcommon.SpanID {
				next++
				var b pcommon.SpanID
				for i := range 8 {
					b[i] = byte(next >> (8 * i))
				}
				return b
			}
			type expect struct {
				span     ptrace.Span
				total    float64
				unpriced int64
				any      bool
			}
			var checks []*expect
			// run builds an agent run under parent and returns the cost and unpriced
			// count of every model call in it (its own calls and all nested tasks).
			var run func(parent pcommon.SpanID, depth int) (float64, int64, bool)
			run = func(parent pcommon.SpanID, depth int) (float64, int64, bool) {
				agent := ss.AppendEmpty()
				agent.SetSpanID(id())
				agent.SetParentSpanID(parent)
				agent.SetName("invoke_agent a")
				agent.Attributes().PutStr(genai.AttrOperationName, genai.OpInvokeAgent)
				var total float64
				var unpriced int64
				var any bool
				for c := range 1 + r.IntN(3) {
					call := ss.AppendEmpty()
					call.SetSpanID(id())
					call.SetParentSpanID(agent.SpanID())
					call.SetName("chat m")
					call.Attributes().PutStr(genai.AttrOperationName, genai.OpChat)
					u := genai.Usage{Input: int64(1 + r.IntN(1000)), Output: int64(r.IntN(100))}
					if r.IntN(5) == 0 {
						genai.PutUsage(call.Attributes(), u)
						unpriced++
					} else {
						cost := float64(r.IntN(1_000_000)) / 1e9
						priced(call, u, genai.Cost{Input: cost, Total: cost})
						total += cost
						any = true
					}
					if depth < 4 && r.IntN(3) == 0 {
						callID := fmt.Sprintf("call-%d-%d", next, c)
						genai.PutStrings(call.Attributes(), genai.AttrResponseToolCallIDs, []string{callID})
						tool := ss.AppendEmpty()
						tool.SetSpanID(id())
						tool.SetParentSpanID(agent.SpanID())
						tool.SetName("execute_tool task")
						tool.Attributes().PutStr(genai.AttrOperationName, genai.OpExecuteTool)
						tool.Attributes().PutStr(genai.AttrToolCallID, callID)
						st, su, sa := run(tool.SpanID(), depth+1)
						checks = append(checks, &expect{span: call, total: st, unpriced: su, any: sa})
						total, unpriced, any = total+st, unpriced+su, any || sa
					}
				}
				return total, unpriced, any
			}
			run(pcommon.SpanID{}, 0)
			spans := make([]ptrace.Span, ss.Len())
			for i := range spans {
				spans[i] = ss.At(i)
			}
			r.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
			Apply(spans)
			for _, e := range checks {
				got, ok := genai.SubagentCostFromMap(e.span.Attributes())
				require.Equal(t, e.any, ok)
				if !ok {
					continue
				}
				assert.LessOrEqual(t, math.Abs(got.Total-e.total), 1e-12)
				var n int64
				if v, has := e.span.Attributes().Get(genai.AttrSubagentCostUnpriced); has {
					n = v.Int()
				}
				assert.Equal(t, e.unpriced, n)
			}
		})
	}
}
