package langfuse

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// Langfuse's trace cost (the sum of its observations' cost) equals the sum of our per-call
// cost, and every cost_details value passes the spec's Observation.costDetails schema.
func TestCostReachesLangfuse(t *testing.T) {
	srv := langfusefake.New(t)
	exp, _ := started(t, testConfig(srv))
	td, _, _ := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	want := vendortest.PriceModelCalls(t, td, "claude-sonnet-4-5")
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
