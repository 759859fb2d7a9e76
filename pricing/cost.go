package pricing

import (
	"math"

	"github.com/agentmeter/agentmeter/genai"
)

// Buckets are one call's tokens split into exclusive kinds, each priced once: uncached
// input, cache reads, 5-minute and 1-hour cache writes, non-reasoning output, reasoning.
type Buckets struct {
	Input, CacheRead, CacheWrite5m, CacheWrite1h, Output, Reasoning int64
}

// Prompt is the call's whole prompt (input with its cached parts), which picks the tier.
func (b Buckets) Prompt() int64 { return b.Input + b.CacheRead + b.CacheWrite5m + b.CacheWrite1h }

// Split turns contract usage (input includes cache reads and writes, output includes
// reasoning) into exclusive buckets. cacheWrite1h is the 1-hour part of the cache writes.
// Negative counts are 0. When the cache counts exceed the input, the emitter reported
// input without cache (Anthropic's raw shape): the input is then taken as the uncached
// part rather than clamped to 0, which would lose those tokens; the same for reasoning
// above output. The Langfuse exporter splits usage_details by the same rule, so its
// buckets and cost_details line up.
func Split(u genai.Usage, cacheWrite1h int64) Buckets {
	b := Buckets{CacheRead: max(u.CacheRead, 0), Reasoning: max(u.Reasoning, 0)}
	write := max(u.CacheCreation, 0)
	b.CacheWrite1h = min(max(cacheWrite1h, 0), write)
	b.CacheWrite5m = write - b.CacheWrite1h
	in, out := max(u.Input, 0), max(u.Output, 0)
	if b.Input = in - b.CacheRead - write; b.Input < 0 {
		b.Input = in
	}
	if b.Output = out - b.Reasoning; b.Output < 0 {
		b.Output = out
	}
	return b
}

// Compute prices one call's buckets at row's rates for its prompt size. Each part is
// tokens × rate / 1e6, rounded to 1e-12 USD (float noise, not money, is removed); the
// total is the sum of the rounded parts.
func Compute(b Buckets, row *ResolvedRow) genai.Cost {
	p := row.PriceFor(b.Prompt())
	c := genai.Cost{
		Input:         part(b.Input, p.Input),
		CacheRead:     part(b.CacheRead, p.CacheRead),
		CacheCreation: round12(part(b.CacheWrite5m, p.CacheWrite) + part(b.CacheWrite1h, p.CacheWrite1h)),
		Output:        part(b.Output, p.Output),
		Reasoning:     part(b.Reasoning, p.Reasoning),
	}
	c.Total = round12(c.PartsSum())
	return c
}

// CacheSavings is what b's cache reads saved at row's rates for its prompt size: the
// reads priced at the input rate minus priced at the cache-read rate (never negative).
func CacheSavings(b Buckets, row *ResolvedRow) float64 {
	p := row.PriceFor(b.Prompt())
	if b.CacheRead == 0 || p.CacheRead >= p.Input {
		return 0
	}
	return round12(part(b.CacheRead, p.Input) - part(b.CacheRead, p.CacheRead))
}

func part(tokens int64, perMillion float64) float64 {
	if tokens == 0 {
		return 0
	}
	return round12(float64(tokens) * perMillion / 1e6)
}

func round12(v float64) float64 { return math.Round(v*1e12) / 1e12 }
