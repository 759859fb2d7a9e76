package langfuse

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/pricing"
)

// priceTrace prices every model call of td with the default table, as genaicost does,
// and returns the sum of the calls' own cost.
func priceTrace(t *testing.T, td ptrace.Traces, model string) float64 {
	t.Helper()
	tab, err := pricing.New(pricing.Layer{Name: "default", Rows: pricing.DefaultRows()})
	require.NoError(t, err)
	var sum float64
	for sp := range spaniter.All(td) {
		u, ok := genai.UsageFromMap(sp.Attributes())
		if !genai.IsModelCallSpan(sp.Name(), sp.Attributes()) || !ok {
			continue
		}
		row, ok := tab.Lookup("", model, time.Now())
		require.True(t, ok)
		c := pricing.Compute(pricing.Split(u, 0), row)
		genai.PutCost(sp.Attributes(), c, genai.CostSourceTable)
		sum += c.Total
	}
	return sum
}

// Langfuse's trace cost (the sum of its observations' cost) equals the sum of our per-call
// cost, and every cost_details value passes the spec's Observation.costDetails schema.
func TestCostReachesLangfuse(t *testing.T) {
	srv := langfusefake.New(t)
	exp, _ := started(t, testConfig(srv))
	td, _, _ := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	want := priceTrace(t, td, "claude-sonnet-4-5")
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	require.Empty(t, srv.Problems())

	var got float64
	var priced int
	for _, o := range srv.Observations() {
		if o.Cost != nil {
			priced++
			got += o.CostTotal()
			var parts float64
			for k, v := range o.Cost {
				if k != "total" {
					parts += v
				}
			}
			assert.InDelta(t, o.Cost["total"], parts, 1e-12, "%s: the parts add up to the total", o.Name)
		}
	}
	assert.Equal(t, 5, priced, "every chat span, no other")
	assert.InDelta(t, want, got, 1e-12)
	assert.Positive(t, got)
}
