package store

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/journal"
)

// The token-usage aggregate adds cost per model and in total from each run's stored
// per-model cost, in added keys that are absent while nothing was priced.
func TestAggregateCost(t *testing.T) {
	u := Aggregate([]AggregateRow{
		{TotalTokens: 30, ByModel: map[string]journal.ModelUsage{"a": {TotalTokens: 10, CostUSD: 0.25}, "b": {TotalTokens: 20, CostUSD: 0.5}}},
		{TotalTokens: 5, ByModel: map[string]journal.ModelUsage{"a": {TotalTokens: 5, CostUSD: 0.125}}},
	})
	assert.InDelta(t, 0.875, u.TotalCostUSD, 1e-15)
	assert.InDelta(t, 0.375, u.ByModel["a"].CostUSD, 1e-15)
	b, err := json.Marshal(Aggregate([]AggregateRow{{TotalTokens: 3, ModelName: "m"}}))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "cost", "DeerFlow's body when nothing was priced")
}
