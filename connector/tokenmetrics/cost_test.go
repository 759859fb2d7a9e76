package tokenmetrics

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentmeter/agentmeter/genai"
)

// The cost counter sums each model call's own cost (agentmeter.cost.*) by cost type with
// the token labels: never the merged subagent cost, never a correction, never a negative.
func TestCostCounter(t *testing.T) {
	h := newHarness(t, nil)
	b := newTrace("agent")
	priced := func(model string, c genai.Cost, extra map[string]any) {
		b.chat(model, genai.Usage{Input: 100, Output: 10}, extra)
		genai.PutCost(b.ss.Spans().At(b.ss.Spans().Len()-1).Attributes(), c, genai.CostSourceTable)
	}
	priced("gpt-4o", genai.Cost{Input: 0.001, CacheRead: 0.0005, Output: 0.002, Total: 0.0035}, map[string]any{
		genai.AttrSubagentCostTotal: 9.0, genai.AttrCaller: "lead_agent"})
	priced("gpt-4o", genai.Cost{Input: 0.004, Output: 0.001, Reasoning: 0.003, Total: 0.008}, map[string]any{genai.AttrCaller: "subagent:researcher"})
	priced("sonar", genai.Cost{Total: 0.02}, nil)           // a provider total without parts
	priced("gpt-4o", genai.Cost{Input: -1, Total: -1}, nil) // broken: tokens count, cost does not
	priced("gpt-4o", genai.Cost{Input: 5, Total: 5}, map[string]any{genai.AttrMergeStatus: genai.MergeCorrected})
	b.chat("unpriced", genai.Usage{Input: 1, Output: 1}, nil)
	h.send(b.traces())

	pts := latest(t, h.sink)
	const mCost = genai.MetricCost
	assert.InDelta(t, 0.0315, total(t, pts, mCost, nil), 1e-12)
	got := by(pts, mCost, "cost_type")
	for typ, v := range map[string]float64{"input": 0.005, "cache_read": 0.0005, "output": 0.003, "reasoning": 0.003, "unsplit": 0.02} {
		assert.InDelta(t, v, got[typ], 1e-12, typ)
	}
	assert.NotContains(t, got, "cache_creation", "no series for a cost type that was always 0")
	assert.InDelta(t, 0.008, total(t, pts, mCost, map[string]any{"agent": "researcher", "caller": "subagent"}), 1e-12)
	assert.InDelta(t, 0.02, total(t, pts, mCost, map[string]any{"model": "sonar", "provider": "openai"}), 1e-12)
	assert.Equal(t, float64(4*110+2), total(t, pts, mTokens, nil), "the broken-cost call's tokens still count; the correction's do not")
	for _, md := range h.sink.AllMetrics() {
		ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for i := 0; i < ms.Len(); i++ {
			if ms.At(i).Name() == mCost {
				assert.Equal(t, "{USD}", ms.At(i).Unit())
			}
		}
	}
}
