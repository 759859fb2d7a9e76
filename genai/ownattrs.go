package genai

import "go.opentelemetry.io/collector/pdata/pcommon"

// OwnAttrs gathers a model call's own usage and cost attributes for a reader that ranges
// over the span's attributes anyway: it offers every attribute once, then reads Usage
// and Cost, with the rules of UsageFromMap and CostFromMap, instead of a search of the
// attributes per key (a dozen of them on a priced call). The zero value is empty.
type OwnAttrs struct {
	vals [numOwn]pcommon.Value
	set  [numOwn]bool
}

// slots: the own usage block in usageOf's order, cache_write, then the cost block in
// costOf's order and its source
const (
	oInput = iota
	oOutput
	oCacheRead
	oCacheCreat
	oReasoning
	oCacheWrite
	oCostTotal
	oCostInput
	oCostCacheRead
	oCostCacheCreat
	oCostOutput
	oCostReasoning
	oCostSource
	numOwn
)

func ownSlot(key string) int {
	switch key {
	case AttrUsageInput:
		return oInput
	case AttrUsageOutput:
		return oOutput
	case AttrUsageCacheRead:
		return oCacheRead
	case AttrUsageCacheCreat:
		return oCacheCreat
	case AttrUsageCacheWrite:
		return oCacheWrite
	case AttrUsageReasoning:
		return oReasoning
	case AttrCostTotal:
		return oCostTotal
	case AttrCostInput:
		return oCostInput
	case AttrCostCacheRead:
		return oCostCacheRead
	case AttrCostCacheCreat:
		return oCostCacheCreat
	case AttrCostOutput:
		return oCostOutput
	case AttrCostReasoning:
		return oCostReasoning
	case AttrCostSource:
		return oCostSource
	}
	return -1
}

// Offer keeps v when key is one of the call's own usage or cost attributes and reports
// whether it was. The first value of a key wins, as with pcommon.Map.Get.
func (o *OwnAttrs) Offer(key string, v pcommon.Value) bool {
	i := ownSlot(key)
	if i < 0 {
		return false
	}
	if !o.set[i] {
		o.vals[i], o.set[i] = v, true
	}
	return true
}

// Usage is UsageFromMap of the offered attributes.
func (o *OwnAttrs) Usage() (Usage, bool) {
	u, ok := usageOf(o.vals[oInput:oReasoning+1], o.set[oInput:oReasoning+1])
	if !o.set[oCacheCreat] {
		u, ok = withCacheWrite(u, ok, o.vals[oCacheWrite], o.set[oCacheWrite])
	}
	return u, ok
}

// Cost is CostFromMap of the offered attributes.
func (o *OwnAttrs) Cost() (c Cost, source string, ok bool) {
	c, ok = costOf(o.vals[oCostTotal:oCostReasoning+1], o.set[oCostTotal:oCostReasoning+1])
	if o.set[oCostSource] {
		source = o.vals[oCostSource].AsString()
	}
	return c, source, ok
}
