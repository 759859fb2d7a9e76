package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
)

func TestUsageArithmetic(t *testing.T) {
	a := Usage{Input: 10, Output: 5, CacheRead: 3, CacheCreation: 2, Reasoning: 1}
	b := Usage{Input: 20, Output: 7, Reasoning: 4}
	sum := a.Add(b)
	assert.Equal(t, Usage{Input: 30, Output: 12, CacheRead: 3, CacheCreation: 2, Reasoning: 5}, sum)
	assert.Equal(t, int64(42), sum.Total())
	assert.Equal(t, a, sum.Sub(b))
	assert.True(t, Usage{}.IsZero())
	assert.False(t, a.IsZero())
}

func TestUsageMapRoundTrip(t *testing.T) {
	m := pcommon.NewMap()
	u := Usage{Input: 100, Output: 40, CacheRead: 60, CacheCreation: 10, Reasoning: 25}
	PutUsage(m, u)
	got, ok := UsageFromMap(m)
	require.True(t, ok)
	assert.Equal(t, u, got)
	assert.Equal(t, 5, m.Len())
}

func TestUsageAbsentIsNotZero(t *testing.T) {
	_, ok := UsageFromMap(pcommon.NewMap())
	assert.False(t, ok, "a span without usage attributes reports no usage")

	m := pcommon.NewMap()
	PutUsage(m, Usage{})
	u, ok := UsageFromMap(m)
	assert.True(t, ok, "a reported zero is usage")
	assert.True(t, u.IsZero())
	assert.Equal(t, 2, m.Len(), "detail kinds are omitted when zero")
}

func TestCacheWriteAlias(t *testing.T) {
	m := pcommon.NewMap()
	m.PutInt(AttrUsageInput, 50)
	m.PutInt(AttrUsageCacheWrite, 12)
	u, ok := UsageFromMap(m)
	require.True(t, ok)
	assert.Equal(t, int64(12), u.CacheCreation)

	// the contract's own key wins over the alias
	m.PutInt(AttrUsageCacheCreat, 7)
	u, _ = UsageFromMap(m)
	assert.Equal(t, int64(7), u.CacheCreation)

	// only the alias present still counts as usage
	only := pcommon.NewMap()
	only.PutInt(AttrUsageCacheWrite, 3)
	u, ok = UsageFromMap(only)
	assert.True(t, ok)
	assert.Equal(t, int64(3), u.CacheCreation)
}

func TestUsageToleratesNumericEncodings(t *testing.T) {
	m := pcommon.NewMap()
	m.PutDouble(AttrUsageInput, 12)
	m.PutStr(AttrUsageOutput, "8")
	m.PutStr(AttrUsageReasoning, "not a number")
	u, ok := UsageFromMap(m)
	require.True(t, ok)
	assert.Equal(t, Usage{Input: 12, Output: 8}, u)
}

func TestSubagentUsage(t *testing.T) {
	m := pcommon.NewMap()
	PutUsage(m, Usage{Input: 1, Output: 2})
	PutSubagentUsage(m, Usage{Input: 30, Output: 12, CacheRead: 5})
	sub, ok := SubagentUsageFromMap(m)
	require.True(t, ok)
	assert.Equal(t, Usage{Input: 30, Output: 12, CacheRead: 5}, sub)
	tot, _ := m.Get(AttrSubagentTotal)
	assert.Equal(t, int64(42), tot.Int())
	own, _ := UsageFromMap(m)
	assert.Equal(t, Usage{Input: 1, Output: 2}, own, "merged usage never touches own usage")
}

func TestUsageAttributes(t *testing.T) {
	kv := Usage{Input: 9, Output: 3, CacheRead: 4}.Attributes()
	assert.Equal(t, []attribute.KeyValue{
		attribute.Int64(AttrUsageInput, 9),
		attribute.Int64(AttrUsageOutput, 3),
		attribute.Int64(AttrUsageCacheRead, 4),
	}, kv)
}

func TestKinds(t *testing.T) {
	k := Usage{Input: 1, Output: 2, CacheRead: 3, CacheCreation: 4, Reasoning: 5}.Kinds()
	assert.Equal(t, KindValue{TokenTypeCacheCreat, 4}, k[3])
	var sum int64
	for _, kv := range k {
		sum += kv.Tokens
	}
	assert.Equal(t, int64(15), sum)
}
