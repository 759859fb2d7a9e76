package shape

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

func TestCostDetails(t *testing.T) {
	assert.Equal(t, `{"input":0.0006,"input_cached_tokens":0.00006,"input_cache_creation":0.01875,"output":0.0075,"output_reasoning_tokens":0.0015,"total":0.02841}`,
		CostDetails(genai.Cost{Input: 0.0006, CacheRead: 0.00006, CacheCreation: 0.01875, Output: 0.0075, Reasoning: 0.0015, Total: 0.02841}))
	assert.Equal(t, `{"total":0.0123}`, CostDetails(genai.Cost{Total: 0.0123}), "a provider total without parts")
	assert.Equal(t, `{"total":0}`, CostDetails(genai.Cost{}))
}

// Our cost goes to cost_details, so Langfuse shows it instead of pricing the call with its
// own table; merged subagent cost goes to metadata only, so the trace total counts it once.
func TestCostGoesToCostDetailsAndSubagentCostToMetadata(t *testing.T) {
	td := twoSpanTrace(func(_, chat ptrace.Span) {
		a := chat.Attributes()
		genai.PutCost(a, genai.Cost{Input: 0.01, Output: 0.02, Total: 0.03}, genai.CostSourceTable)
		genai.PutSubagentUsage(a, genai.Usage{Input: 500, Output: 50})
		genai.PutSubagentCost(a, genai.Cost{Input: 0.4, Output: 0.1, Total: 0.5})
	})
	Traces(td)
	o := view(td, 1)
	assert.Equal(t, map[string]float64{"input": 0.01, "output": 0.02, "total": 0.03}, o.Cost)
	assert.InDelta(t, 0.03, o.CostTotal(), 1e-15)
	assert.Equal(t, 0.5, o.Metadata["subagent_cost_usd"])
	assert.Nil(t, view(td, 0).Cost, "the agent span has no cost")

	once := ptrace.NewTraces()
	td.CopyTo(once)
	Traces(td)
	assert.Equal(t, marshal(t, once), marshal(t, td), "shaping twice changes nothing")
}

func TestSpliceEqualsApplyWithCost(t *testing.T) {
	td := richBatch()
	n := 0
	forEach(td, func(_ string, sp ptrace.Span) {
		if sp.Attributes().Len() == 0 {
			return
		}
		if _, ok := genai.UsageFromMap(sp.Attributes()); ok {
			n++
			genai.PutCost(sp.Attributes(), genai.Cost{Input: 0.001 * float64(n), Total: 0.001 * float64(n)}, genai.CostSourceTable)
			genai.PutSubagentUsage(sp.Attributes(), genai.Usage{Input: 1, Output: 1})
			genai.PutSubagentCost(sp.Attributes(), genai.Cost{Output: 0.25, Total: 0.25})
		}
	})
	require.Positive(t, n)
	var s Splicer
	spliceMatchesApply(t, &s, td, NewPlan(td))
}

// Every model call gets usage and cost details, not only chat: a text_completion or
// generate_content call is counted by the token metrics, so Langfuse must show it too.
func TestEveryModelCallGetsUsageAndCostDetails(t *testing.T) {
	for _, op := range []string{genai.OpTextCompletion, genai.OpGenerateContent} {
		td := twoSpanTrace(func(_, call ptrace.Span) {
			a := call.Attributes()
			a.PutStr(genai.AttrOperationName, op)
			genai.PutCost(a, genai.Cost{Input: 0.01, Output: 0.02, Total: 0.03}, genai.CostSourceTable)
		})
		Traces(td)
		o := view(td, 1)
		assert.Equal(t, map[string]float64{"input": 0.01, "output": 0.02, "total": 0.03}, o.Cost, op)
		assert.Equal(t, `{"input":10,"output":5,"total":15}`, get(t, spanAt(td, 1), AttrObservationUsage), op)
	}
}
