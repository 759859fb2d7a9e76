package shape

import (
	"strconv"

	"github.com/agentmeter/agentmeter/genai"
)

// Buckets are Langfuse's mutually exclusive usage buckets for one model call.
type Buckets struct {
	Input, CacheRead, CacheCreation, Output, Reasoning, Total int64
}

// UsageBuckets splits contract usage (input includes cache, output includes reasoning,
// docs/contract.md#usage) into Langfuse's exclusive buckets (docs/langfuse.md): input without
// cache, output without reasoning. Negative counts are treated as 0.
//
// A span whose cache counts exceed its input cannot be contract-normalised; it is what
// Anthropic reports raw (input_tokens without cache), so its input is taken as the
// uncached part rather than clamped to 0, which would lose those tokens.
func UsageBuckets(u genai.Usage) Buckets {
	b := Buckets{
		CacheRead:     max(u.CacheRead, 0),
		CacheCreation: max(u.CacheCreation, 0),
		Reasoning:     max(u.Reasoning, 0),
	}
	in, out := max(u.Input, 0), max(u.Output, 0)
	if b.Input = in - b.CacheRead - b.CacheCreation; b.Input < 0 {
		b.Input = in
	}
	if b.Output = out - b.Reasoning; b.Output < 0 {
		b.Output = out
	}
	b.Total = b.Input + b.CacheRead + b.CacheCreation + b.Output + b.Reasoning
	return b
}

// UsageDetails renders the buckets as the JSON object string Langfuse reads from
// langfuse.observation.usage_details (a flat map of non-negative integers). input,
// output and total are always present; detail buckets only when non-zero. Built by hand
// in a fixed key order: it runs for every chat span of every batch.
func UsageDetails(u genai.Usage) string {
	b := UsageBuckets(u)
	buf := make([]byte, 0, 128)
	buf = append(buf, '{')
	buf = appendJSONInt(buf, UsageInput, b.Input, false)
	if b.CacheRead != 0 {
		buf = appendJSONInt(buf, UsageCacheRead, b.CacheRead, true)
	}
	if b.CacheCreation != 0 {
		buf = appendJSONInt(buf, UsageCacheCreation, b.CacheCreation, true)
	}
	buf = appendJSONInt(buf, UsageOutput, b.Output, true)
	if b.Reasoning != 0 {
		buf = appendJSONInt(buf, UsageReasoning, b.Reasoning, true)
	}
	buf = appendJSONInt(buf, UsageTotal, b.Total, true)
	buf = append(buf, '}')
	return string(buf)
}

// CostDetails renders a call's cost as the JSON object string Langfuse reads from
// langfuse.observation.cost_details (USD per usage key): the same exclusive buckets and
// key names as UsageDetails, so each bucket's cost sits next to its tokens, and total.
// Parts are written when non-zero; a provider total without a breakdown is {"total": x}.
func CostDetails(c genai.Cost) string {
	buf := make([]byte, 0, 160)
	buf = append(buf, '{')
	comma := false
	for _, kv := range [...]struct {
		key string
		v   float64
	}{{UsageInput, c.Input}, {UsageCacheRead, c.CacheRead}, {UsageCacheCreation, c.CacheCreation}, {UsageOutput, c.Output}, {UsageReasoning, c.Reasoning}} {
		if kv.v > 0 {
			buf = appendJSONFloat(buf, kv.key, kv.v, comma)
			comma = true
		}
	}
	buf = appendJSONFloat(buf, UsageTotal, max(c.Total, 0), comma)
	buf = append(buf, '}')
	return string(buf)
}

func appendJSONFloat(buf []byte, key string, v float64, comma bool) []byte {
	if comma {
		buf = append(buf, ',')
	}
	buf = append(buf, '"')
	buf = append(buf, key...)
	buf = append(buf, '"', ':')
	return strconv.AppendFloat(buf, v, 'f', -1, 64) // plain decimals: 0.00006, not 6e-05
}

func appendJSONInt(buf []byte, key string, v int64, comma bool) []byte {
	if comma {
		buf = append(buf, ',')
	}
	buf = append(buf, '"')
	buf = append(buf, key...)
	buf = append(buf, '"', ':')
	return strconv.AppendInt(buf, v, 10)
}
