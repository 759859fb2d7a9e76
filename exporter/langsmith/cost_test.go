package langsmith

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
)

// LangSmith's total_cost over the trace equals the sum of our per-call cost; the fake
// checks every usage_metadata against the spec (additionalProperties: false) and the
// inclusive cost arithmetic.
func TestCostReachesLangSmith(t *testing.T) {
	fake := newFake(t)
	h := mustStart(t, fake, nil)
	td, _ := fakevendor.AgentTrace(1, base)
	want := vendortest.PriceModelCalls(t, td, "")
	rss := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < rss.Len(); i++ { // the dispatching call carries its subagents' cost as metadata
		if _, ok := genai.SubagentUsageFromMap(rss.At(i).Attributes()); ok {
			genai.PutSubagentCost(rss.At(i).Attributes(), genai.Cost{Input: 0.5, Total: 0.5})
		}
	}
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	require.Empty(t, fake.Violations())

	var got float64
	var llm int
	for _, r := range fake.Runs() {
		um, ok := r["outputs"].(map[string]any)["usage_metadata"].(map[string]any)
		if !ok {
			continue
		}
		llm++
		got += um["total_cost"].(float64)
		assert.InDelta(t, um["total_cost"].(float64), um["input_cost"].(float64)+um["output_cost"].(float64), 1e-12)
	}
	assert.Equal(t, 4, llm)
	assert.InDelta(t, want, got, 1e-12)
	assert.Positive(t, got)

	chat := runsByName(fake)["chat gpt-4o"]
	md := chat["extra"].(map[string]any)["metadata"].(map[string]any)
	assert.Equal(t, 0.5, md["subagent_usage"].(map[string]any)["cost_usd"], "merged cost is metadata, never usage_metadata")
	um := chat["outputs"].(map[string]any)["usage_metadata"].(map[string]any)
	assert.Contains(t, um, "input_cost_details")
	assert.Contains(t, um, "output_cost_details")
}

func TestProviderTotalOnlyIsTotalCost(t *testing.T) {
	fake := newFake(t)
	h := mustStart(t, fake, nil)
	td, _ := fakevendor.AgentTrace(1, base)
	rss := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < rss.Len(); i++ {
		if _, ok := genai.UsageFromMap(rss.At(i).Attributes()); ok {
			genai.PutCost(rss.At(i).Attributes(), genai.Cost{Total: 0.01}, genai.CostSourceProvider)
		}
	}
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	require.Empty(t, fake.Violations())
	um := runsByName(fake)["chat gpt-4o"]["outputs"].(map[string]any)["usage_metadata"].(map[string]any)
	assert.Equal(t, 0.01, um["total_cost"])
	assert.NotContains(t, um, "input_cost", "no made-up split of a provider total")
}
