package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestCostAdd(t *testing.T) {
	a := Cost{Input: 1, CacheRead: 0.5, Output: 2, Total: 3.5}
	b := Cost{CacheCreation: 0.25, Reasoning: 1, Total: 1.25}
	assert.Equal(t, Cost{Input: 1, CacheRead: 0.5, CacheCreation: 0.25, Output: 2, Reasoning: 1, Total: 4.75}, a.Add(b))
	assert.True(t, Cost{}.IsZero())
	assert.False(t, a.IsZero())
}

func TestCostMapRoundTrip(t *testing.T) {
	m := pcommon.NewMap()
	c := Cost{Input: 0.001, CacheRead: 0.0002, CacheCreation: 0.003, Output: 0.004, Reasoning: 0.005}
	c.Total = c.PartsSum()
	PutCost(m, c, CostSourceTable)
	got, src, ok := CostFromMap(m)
	require.True(t, ok)
	assert.Equal(t, c, got)
	assert.Equal(t, CostSourceTable, src)

	PutSubagentCost(m, c)
	sub, ok := SubagentCostFromMap(m)
	require.True(t, ok)
	assert.Equal(t, c, sub)
}

func TestCostAbsentIsNotZero(t *testing.T) {
	_, _, ok := CostFromMap(pcommon.NewMap())
	assert.False(t, ok)
	m := pcommon.NewMap()
	PutCost(m, Cost{}, CostSourceTable)
	_, _, ok = CostFromMap(m)
	assert.True(t, ok, "a priced call that cost 0 is priced")
	assert.Equal(t, 2, m.Len(), "zero parts are not written")
}

func TestCostToleratesStringsAndInts(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr(AttrCostTotal, "0.0125")
	m.PutInt(AttrCostOutput, 1)
	c, _, ok := CostFromMap(m)
	require.True(t, ok)
	assert.Equal(t, 0.0125, c.Total)
	assert.Equal(t, 1.0, c.Output)

	m.PutStr(AttrCostTotal, "NaN")
	_, _, ok = CostFromMap(m)
	assert.False(t, ok, "NaN is no cost")
}

func TestCostKindsAddUpToTotal(t *testing.T) {
	provider := Cost{Total: 0.02} // OpenRouter-style total without breakdown
	var sum float64
	for _, k := range provider.Kinds() {
		sum += k.USD
	}
	assert.InDelta(t, 0.02, sum, 1e-15)
	assert.Equal(t, 0.02, provider.Kinds()[5].USD)

	table := Cost{Input: 0.01, Output: 0.02, Total: 0.03}
	assert.Zero(t, table.Unsplit())
}

func TestCostAttributes(t *testing.T) {
	kv := Cost{Total: 0.5, Output: 0.5}.Attributes(CostSourceProvider)
	assert.Len(t, kv, 3)
	assert.Equal(t, AttrCostSource, string(kv[1].Key))
}

func TestCacheCreation1h(t *testing.T) {
	m := pcommon.NewMap()
	assert.Zero(t, CacheCreation1hFromMap(m))
	m.PutInt(AttrUsageCacheCreat1h, 300)
	assert.Equal(t, int64(300), CacheCreation1hFromMap(m))
}

func TestForeignCost(t *testing.T) {
	m := pcommon.NewMap()
	_, ok := ForeignCostFromMap(m)
	assert.False(t, ok)
	m.PutDouble(AttrOpenInferenceCostTotal, 0.25)
	v, ok := ForeignCostFromMap(m)
	assert.True(t, ok)
	assert.Equal(t, 0.25, v)
	m.PutStr(AttrForeignUsageCost, "0.5")
	v, _ = ForeignCostFromMap(m)
	assert.Equal(t, 0.5, v, "gen_ai.usage.cost first")
	m.PutDouble(AttrForeignUsageCost, -1)
	v, _ = ForeignCostFromMap(m)
	assert.Equal(t, 0.25, v, "a negative cost is skipped")
}
