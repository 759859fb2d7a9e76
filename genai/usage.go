package genai

import (
	"encoding/json"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
)

// Usage is one model call's token usage, normalised per docs/contract.md#usage: Input includes the
// cached part (CacheRead and CacheCreation are parts of Input), Output includes Reasoning.
type Usage struct {
	Input         int64 `json:"input_tokens"`
	Output        int64 `json:"output_tokens"`
	CacheRead     int64 `json:"cache_read_tokens,omitempty"`
	CacheCreation int64 `json:"cache_creation_tokens,omitempty"`
	Reasoning     int64 `json:"reasoning_tokens,omitempty"`
}

// Total is input + output; semconv has no total attribute.
func (u Usage) Total() int64 { return u.Input + u.Output }

// IsZero reports whether every kind is zero.
func (u Usage) IsZero() bool { return u == Usage{} }

// Add returns u + o, kind by kind.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		Input:         u.Input + o.Input,
		Output:        u.Output + o.Output,
		CacheRead:     u.CacheRead + o.CacheRead,
		CacheCreation: u.CacheCreation + o.CacheCreation,
		Reasoning:     u.Reasoning + o.Reasoning,
	}
}

// Sub returns u - o, kind by kind.
func (u Usage) Sub(o Usage) Usage {
	return Usage{
		Input:         u.Input - o.Input,
		Output:        u.Output - o.Output,
		CacheRead:     u.CacheRead - o.CacheRead,
		CacheCreation: u.CacheCreation - o.CacheCreation,
		Reasoning:     u.Reasoning - o.Reasoning,
	}
}

// Kinds lists the five kinds with their token_type label values, in label order.
func (u Usage) Kinds() [5]KindValue {
	return [5]KindValue{
		{TokenTypeInput, u.Input},
		{TokenTypeOutput, u.Output},
		{TokenTypeCacheRead, u.CacheRead},
		{TokenTypeCacheCreat, u.CacheCreation},
		{TokenTypeReasoning, u.Reasoning},
	}
}

// KindValue is one token kind (its token_type label value) and its count.
type KindValue struct {
	TokenType string
	Tokens    int64
}

// usageKeys names the five attributes of one usage block, own or merged.
type usageKeys struct {
	input, output, cacheRead, cacheCreation, reasoning string
}

var (
	ownKeys = usageKeys{AttrUsageInput, AttrUsageOutput, AttrUsageCacheRead, AttrUsageCacheCreat, AttrUsageReasoning}
	subKeys = usageKeys{AttrSubagentInput, AttrSubagentOutput, AttrSubagentCacheRead, AttrSubagentCacheCreat, AttrSubagentReasoning}
)

// UsageFromMap reads a span's own usage (gen_ai.usage.*). ok is false when the span
// carries no usage attribute at all, which is different from a call that used 0 tokens.
// The newer cache_write key is read when cache_creation is absent.
func UsageFromMap(m pcommon.Map) (u Usage, ok bool) {
	u, ok = readUsage(m, ownKeys)
	if _, has := m.Get(AttrUsageCacheCreat); !has {
		cw, hasCW := m.Get(AttrUsageCacheWrite)
		u, ok = withCacheWrite(u, ok, cw, hasCW)
	}
	return u, ok
}

// withCacheWrite counts the newer cache_write key as cache_creation, for a span that has
// no cache_creation.
func withCacheWrite(u Usage, ok bool, cw pcommon.Value, has bool) (Usage, bool) {
	if has {
		if v, good := IntValue(cw); good {
			u.CacheCreation, ok = v, true
		}
	}
	return u, ok
}

// PutUsage writes u as a span's own usage. Input and output are always written; the
// detail kinds only when non-zero, so spans stay small and "absent" reads back as 0.
func PutUsage(m pcommon.Map, u Usage) { putUsage(m, ownKeys, u) }

// SubagentUsageFromMap reads merged subagent usage (agentmeter.subagent.*).
func SubagentUsageFromMap(m pcommon.Map) (Usage, bool) { return readUsage(m, subKeys) }

// PutSubagentUsage writes merged subagent usage, including agentmeter.subagent.total_tokens.
func PutSubagentUsage(m pcommon.Map, u Usage) {
	putUsage(m, subKeys, u)
	m.PutInt(AttrSubagentTotal, u.Total())
}

func readUsage(m pcommon.Map, k usageKeys) (Usage, bool) {
	var vals [5]pcommon.Value
	var set [5]bool
	for i, key := range [5]string{k.input, k.output, k.cacheRead, k.cacheCreation, k.reasoning} {
		vals[i], set[i] = m.Get(key)
	}
	return usageOf(vals[:], set[:])
}

// usageOf reads the counts of one usage block from the values found for its keys, in the
// order input, output, cache_read, cache_creation, reasoning (set: the key is present);
// has is false when no key holds a count.
func usageOf(vals []pcommon.Value, set []bool) (u Usage, has bool) {
	var n [5]int64
	for i := range n {
		if set[i] {
			if c, ok := IntValue(vals[i]); ok {
				n[i], has = c, true
			}
		}
	}
	return Usage{Input: n[0], Output: n[1], CacheRead: n[2], CacheCreation: n[3], Reasoning: n[4]}, has
}

func putUsage(m pcommon.Map, k usageKeys, u Usage) {
	m.PutInt(k.input, u.Input)
	m.PutInt(k.output, u.Output)
	putNonZero(m, k.cacheRead, u.CacheRead)
	putNonZero(m, k.cacheCreation, u.CacheCreation)
	putNonZero(m, k.reasoning, u.Reasoning)
}

func putNonZero(m pcommon.Map, key string, v int64) {
	if v != 0 {
		m.PutInt(key, v)
	}
}

// intAttr reads an integer attribute, tolerating emitters that send numbers as doubles
// or numeric strings (some SDKs do).
func intAttr(m pcommon.Map, key string) (int64, bool) {
	v, ok := m.Get(key)
	if !ok {
		return 0, false
	}
	return IntValue(v)
}

// IntValue reads a token count from an attribute value: an int, a double, or a numeric
// string (OTLP JSON and some SDKs send counts that way). Anything else is not a count.
func IntValue(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		return int64(v.Double()), true
	case pcommon.ValueTypeStr:
		var n json.Number = json.Number(v.Str())
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		if f, err := n.Float64(); err == nil {
			return int64(f), true
		}
	}
	return 0, false
}

// Attributes returns u as OTel SDK attributes for a chat span (same rules as PutUsage).
func (u Usage) Attributes() []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 5)
	kv = append(kv, attribute.Int64(AttrUsageInput, u.Input), attribute.Int64(AttrUsageOutput, u.Output))
	if u.CacheRead != 0 {
		kv = append(kv, attribute.Int64(AttrUsageCacheRead, u.CacheRead))
	}
	if u.CacheCreation != 0 {
		kv = append(kv, attribute.Int64(AttrUsageCacheCreat, u.CacheCreation))
	}
	if u.Reasoning != 0 {
		kv = append(kv, attribute.Int64(AttrUsageReasoning, u.Reasoning))
	}
	return kv
}
