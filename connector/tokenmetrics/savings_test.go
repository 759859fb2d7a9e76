package tokenmetrics

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentmeter/agentmeter/genai"
)

// The cache-savings counter sums each priced call's agentmeter.cost.cache_savings_usd with
// the token labels; a call without a cost, or a correction, adds nothing.
func TestCacheSavingsCounter(t *testing.T) {
	h := newHarness(t, nil)
	b := newTrace("agent")
	b.chat("claude-sonnet-4-5", genai.Usage{Input: 100, Output: 10, CacheRead: 80}, map[string]any{
		genai.AttrCostCacheSavings: 0.25, genai.AttrCaller: "lead_agent"})
	genai.PutCost(b.ss.Spans().At(0).Attributes(), genai.Cost{Input: 0.1, Total: 0.1}, genai.CostSourceTable)
	b.chat("claude-haiku-4-5", genai.Usage{Input: 100, Output: 10, CacheRead: 80}, map[string]any{
		genai.AttrCostCacheSavings: 0.5, genai.AttrCaller: "subagent:researcher"})
	genai.PutCost(b.ss.Spans().At(1).Attributes(), genai.Cost{Input: 0.1, Total: 0.1}, genai.CostSourceTable)
	b.chat("unpriced", genai.Usage{Input: 10, Output: 1}, map[string]any{genai.AttrCostCacheSavings: 7.0})
	b.chat("claude-haiku-4-5", genai.Usage{Input: 10, Output: 1}, map[string]any{
		genai.AttrCostCacheSavings: 9.0, genai.AttrMergeStatus: genai.MergeCorrected})
	genai.PutCost(b.ss.Spans().At(3).Attributes(), genai.Cost{Input: 0.1, Total: 0.1}, genai.CostSourceTable)
	h.send(b.traces())

	pts := latest(t, h.sink)
	assert.InDelta(t, 0.75, total(t, pts, genai.MetricCacheSavings, nil), 1e-12)
	assert.InDelta(t, 0.5, total(t, pts, genai.MetricCacheSavings, map[string]any{"agent": "researcher", "caller": "subagent"}), 1e-12)
}
