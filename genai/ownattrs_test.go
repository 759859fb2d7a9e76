package genai

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// OwnAttrs fed every attribute of a span reads the same usage, cost and source as
// UsageFromMap and CostFromMap, whatever mix of keys and value types the span has.
func TestOwnAttrsReadsAsTheMapReaders(t *testing.T) {
	keys := []string{AttrUsageInput, AttrUsageOutput, AttrUsageCacheRead, AttrUsageCacheCreat, AttrUsageCacheWrite,
		AttrUsageReasoning, AttrCostTotal, AttrCostInput, AttrCostCacheRead, AttrCostCacheCreat, AttrCostOutput,
		AttrCostReasoning, AttrCostSource, AttrSubagentInput, AttrCostCacheSavings, AttrOperationName, "other"}
	put := func(m pcommon.Map, k string, r *rand.Rand) {
		switch r.IntN(7) {
		case 0:
			m.PutInt(k, r.Int64N(5000)-10)
		case 1:
			m.PutDouble(k, r.Float64()*100)
		case 2:
			m.PutStr(k, "1234")
		case 3:
			m.PutStr(k, "0.0025")
		case 4:
			m.PutStr(k, "not a number")
		case 5:
			m.PutDouble(k, math.NaN())
		case 6:
			m.PutBool(k, true)
		}
	}
	r := rand.New(rand.NewPCG(9, 9))
	for range 5000 {
		m := pcommon.NewMap()
		for _, k := range keys {
			if r.IntN(2) == 0 {
				put(m, k, r)
			}
		}
		var o OwnAttrs
		for k, v := range m.All() {
			o.Offer(k, v)
		}
		wu, wok := UsageFromMap(m)
		gu, gok := o.Usage()
		require.Equal(t, wok, gok, "%v", m.AsRaw())
		require.Equal(t, wu, gu, "%v", m.AsRaw())
		wc, ws, wcok := CostFromMap(m)
		gc, gs, gcok := o.Cost()
		require.Equal(t, wcok, gcok, "%v", m.AsRaw())
		require.Equal(t, ws, gs)
		if wcok {
			// NaN parts compare unequal to themselves: compare their bits
			require.Equal(t, math.Float64bits(wc.Total), math.Float64bits(gc.Total))
			for i, k := range wc.Kinds() {
				require.Equal(t, math.Float64bits(k.USD), math.Float64bits(gc.Kinds()[i].USD), "%v", m.AsRaw())
			}
		}
	}
}
