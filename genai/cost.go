package genai

import (
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
)

// Cost attributes of a model-call span, in USD. The parts are disjoint, like Langfuse's
// usage buckets, so every token is priced exactly once:
//
//	input          = uncached input tokens (input − cache_read − cache_creation) × input price
//	cache_read     = cache-read tokens × cache-read price
//	cache_creation = cache-write tokens × their write price (5-minute or 1-hour)
//	output         = non-reasoning output tokens (output − reasoning) × output price
//	reasoning      = reasoning tokens × reasoning price
//
// agentmeter.cost.usd is the total. It equals the sum of the parts for a table price; a
// provider that reports only a total (OpenRouter's usage.cost) gives a total without parts.
const (
	AttrCostTotal      = "agentmeter.cost.usd"
	AttrCostInput      = "agentmeter.cost.input_usd"
	AttrCostCacheRead  = "agentmeter.cost.cache_read_usd"
	AttrCostCacheCreat = "agentmeter.cost.cache_creation_usd"
	AttrCostOutput     = "agentmeter.cost.output_usd"
	AttrCostReasoning  = "agentmeter.cost.reasoning_usd"
	// AttrCostSource says where the cost came from: CostSourceProvider or CostSourceTable.
	AttrCostSource = "agentmeter.cost.source"
	// AttrCostPrice names the price-table row a table cost used ("anthropic/claude-sonnet-4@2025-05-22"),
	// so a cost can be traced back to the price that made it.
	AttrCostPrice = "agentmeter.cost.price"
	// AttrCostCacheSavings is what the call's cache reads saved against paying the input
	// rate for them (cache_read tokens × (input rate − cache-read rate), USD); written by
	// the cost step with a table cost, when positive.
	AttrCostCacheSavings = "agentmeter.cost.cache_savings_usd"

	// Merged subagent cost on a dispatching model call: the sum of the cost of the model
	// calls under its task runs, like agentmeter.subagent.*_tokens.
	AttrSubagentCostTotal      = "agentmeter.subagent.cost.usd"
	AttrSubagentCostInput      = "agentmeter.subagent.cost.input_usd"
	AttrSubagentCostCacheRead  = "agentmeter.subagent.cost.cache_read_usd"
	AttrSubagentCostCacheCreat = "agentmeter.subagent.cost.cache_creation_usd"
	AttrSubagentCostOutput     = "agentmeter.subagent.cost.output_usd"
	AttrSubagentCostReasoning  = "agentmeter.subagent.cost.reasoning_usd"
	// AttrSubagentCostUnpriced counts model calls under the tasks that had usage but no
	// cost (unknown model), so a merged cost never silently looks complete.
	AttrSubagentCostUnpriced = "agentmeter.subagent.cost.unpriced_calls"

	// AttrUsageCacheCreat1h is the part of gen_ai.usage.cache_creation.input_tokens written
	// with a 1-hour lifetime (Anthropic's usage.cache_creation.ephemeral_1h_input_tokens);
	// the rest of the cache writes are 5-minute writes. Semconv has no key for it.
	AttrUsageCacheCreat1h = "agentmeter.usage.cache_creation.ephemeral_1h.input_tokens"
)

// Foreign keys holding a provider-reported total cost in USD, read (never written) by the
// cost step: LiteLLM's and OpenLLMetry's gen_ai.usage.cost, OpenInference's llm.cost.total.
// Langfuse reads the same two as a cost total.
const (
	AttrForeignUsageCost       = "gen_ai.usage.cost"
	AttrOpenInferenceCostTotal = "llm.cost.total"
)

// Values of agentmeter.cost.source.
const (
	// CostSourceProvider: the provider (or the emitter on its behalf) reported the cost.
	// An emitter sets agentmeter.cost.usd (and parts if it has them) with this source;
	// the cost step never overwrites it.
	CostSourceProvider = "provider"
	// CostSourceTable: computed from the price table.
	CostSourceTable = "table"
)

// Cost metric (Prometheus agentmeter_cost_usd_total), labelled like the token counter
// plus cost_type.
const (
	MetricCost     = "agentmeter.cost.usd"
	MetricCostUnit = "{USD}"
	MetricCostProm = "agentmeter_cost_usd_total"
	// MetricCacheSavings counts agentmeter.cost.cache_savings_usd (Prometheus
	// agentmeter_cache_savings_usd_total), with the token counter's labels.
	MetricCacheSavings     = "agentmeter.cache_savings.usd"
	MetricCacheSavingsProm = "agentmeter_cache_savings_usd_total"
	LabelCostType          = "cost_type"
	// CostTypeUnsplit is the cost_type of the part of a provider-reported total that came
	// without a breakdown, so the cost_type series still add up to the total.
	CostTypeUnsplit = "unsplit"
)

// Cost is one model call's (or a sum of calls') cost in USD. Input, CacheRead,
// CacheCreation, Output and Reasoning are disjoint parts (see the attribute keys);
// Total is their sum, or a provider's total when it came without parts.
type Cost struct {
	Input         float64
	CacheRead     float64
	CacheCreation float64
	Output        float64
	Reasoning     float64
	Total         float64
}

// Add returns c + o, part by part.
func (c Cost) Add(o Cost) Cost {
	return Cost{
		Input:         c.Input + o.Input,
		CacheRead:     c.CacheRead + o.CacheRead,
		CacheCreation: c.CacheCreation + o.CacheCreation,
		Output:        c.Output + o.Output,
		Reasoning:     c.Reasoning + o.Reasoning,
		Total:         c.Total + o.Total,
	}
}

// IsZero reports whether every part and the total are zero.
func (c Cost) IsZero() bool { return c == Cost{} }

// PartsSum is the sum of the five parts.
func (c Cost) PartsSum() float64 {
	return c.Input + c.CacheRead + c.CacheCreation + c.Output + c.Reasoning
}

// Unsplit is the part of Total not covered by the parts (a provider total without a
// breakdown); 0 when the parts add up to the total within rounding.
func (c Cost) Unsplit() float64 {
	d := c.Total - c.PartsSum()
	if math.Abs(d) <= 1e-12*math.Max(1, math.Abs(c.Total)) {
		return 0
	}
	return d
}

// CostKindValue is one cost type (its cost_type label value) and its USD amount.
type CostKindValue struct {
	CostType string
	USD      float64
}

// Kinds lists the parts with their cost_type label values (the token_type values, so cost
// and token series join), plus "unsplit" for a provider total without parts. The amounts
// add up to Total.
func (c Cost) Kinds() [6]CostKindValue {
	return [6]CostKindValue{
		{TokenTypeInput, c.Input},
		{TokenTypeOutput, c.Output},
		{TokenTypeCacheRead, c.CacheRead},
		{TokenTypeCacheCreat, c.CacheCreation},
		{TokenTypeReasoning, c.Reasoning},
		{CostTypeUnsplit, c.Unsplit()},
	}
}

type costKeys struct {
	total, input, cacheRead, cacheCreation, output, reasoning string
}

var (
	ownCostKeys = costKeys{AttrCostTotal, AttrCostInput, AttrCostCacheRead, AttrCostCacheCreat, AttrCostOutput, AttrCostReasoning}
	subCostKeys = costKeys{AttrSubagentCostTotal, AttrSubagentCostInput, AttrSubagentCostCacheRead, AttrSubagentCostCacheCreat, AttrSubagentCostOutput, AttrSubagentCostReasoning}
)

// CostFromMap reads a span's own cost and its source. ok is false when the span has no
// agentmeter.cost.usd: it was not priced (which differs from a call that cost 0).
func CostFromMap(m pcommon.Map) (c Cost, source string, ok bool) {
	c, ok = readCost(m, ownCostKeys)
	if v, has := m.Get(AttrCostSource); has {
		source = v.AsString()
	}
	return c, source, ok
}

// PutCost writes c as a span's own cost with its source. The total is always written,
// the parts only when non-zero (absent reads back as 0).
func PutCost(m pcommon.Map, c Cost, source string) {
	putCost(m, ownCostKeys, c)
	m.PutStr(AttrCostSource, source)
}

// SubagentCostFromMap reads merged subagent cost (agentmeter.subagent.cost.*).
func SubagentCostFromMap(m pcommon.Map) (Cost, bool) { return readCost(m, subCostKeys) }

// PutSubagentCost writes merged subagent cost.
func PutSubagentCost(m pcommon.Map, c Cost) { putCost(m, subCostKeys, c) }

// CacheCreation1hFromMap reads the 1-hour part of a span's cache writes (0 when absent).
func CacheCreation1hFromMap(m pcommon.Map) int64 {
	v, _ := intAttr(m, AttrUsageCacheCreat1h)
	return v
}

func readCost(m pcommon.Map, k costKeys) (Cost, bool) {
	var vals [6]pcommon.Value
	var set [6]bool
	if vals[0], set[0] = m.Get(k.total); !set[0] {
		return Cost{}, false // unpriced: the parts are not looked for
	}
	for i, key := range [5]string{k.input, k.cacheRead, k.cacheCreation, k.output, k.reasoning} {
		vals[i+1], set[i+1] = m.Get(key)
	}
	return costOf(vals[:], set[:])
}

// costOf reads one cost block from the values found for its keys, in the order total,
// input, cache_read, cache_creation, output, reasoning (set: the key is present); ok is
// false without a total.
func costOf(vals []pcommon.Value, set []bool) (Cost, bool) {
	if !set[0] {
		return Cost{}, false
	}
	var f [6]float64
	var ok bool
	if f[0], ok = floatValue(vals[0]); !ok {
		return Cost{}, false
	}
	for i := 1; i < len(f); i++ {
		if set[i] {
			f[i], _ = floatValue(vals[i])
		}
	}
	return Cost{Total: f[0], Input: f[1], CacheRead: f[2], CacheCreation: f[3], Output: f[4], Reasoning: f[5]}, true
}

func putCost(m pcommon.Map, k costKeys, c Cost) {
	m.PutDouble(k.total, c.Total)
	putNonZeroF(m, k.input, c.Input)
	putNonZeroF(m, k.cacheRead, c.CacheRead)
	putNonZeroF(m, k.cacheCreation, c.CacheCreation)
	putNonZeroF(m, k.output, c.Output)
	putNonZeroF(m, k.reasoning, c.Reasoning)
}

func putNonZeroF(m pcommon.Map, key string, v float64) {
	if v != 0 {
		m.PutDouble(key, v)
	}
}

// floatAttr reads a number attribute, tolerating ints and numeric strings (emitters that
// forward a provider's JSON often send "0.0012").
func floatAttr(m pcommon.Map, key string) (float64, bool) {
	v, ok := m.Get(key)
	if !ok {
		return 0, false
	}
	return floatValue(v)
}

// floatValue is floatAttr's rule for a value already found.
func floatValue(v pcommon.Value) (float64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		f := v.Double()
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	case pcommon.ValueTypeStr:
		f, err := strconv.ParseFloat(v.Str(), 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

// Attributes returns c as OTel SDK attributes (same rules as PutCost), for emitters that
// know a provider-reported cost.
func (c Cost) Attributes(source string) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 7)
	kv = append(kv, attribute.Float64(AttrCostTotal, c.Total), attribute.String(AttrCostSource, source))
	for _, p := range [...]struct {
		key string
		v   float64
	}{{AttrCostInput, c.Input}, {AttrCostCacheRead, c.CacheRead}, {AttrCostCacheCreat, c.CacheCreation}, {AttrCostOutput, c.Output}, {AttrCostReasoning, c.Reasoning}} {
		if p.v != 0 {
			kv = append(kv, attribute.Float64(p.key, p.v))
		}
	}
	return kv
}

// ForeignCostFromMap reads a provider-reported total cost an emitter put under a foreign
// key (gen_ai.usage.cost, then llm.cost.total). Negative values are not a cost.
func ForeignCostFromMap(m pcommon.Map) (float64, bool) {
	for _, k := range [...]string{AttrForeignUsageCost, AttrOpenInferenceCostTotal} {
		if v, ok := floatAttr(m, k); ok && v >= 0 {
			return v, true
		}
	}
	return 0, false
}
