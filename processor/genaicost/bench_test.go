package genaicost

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
)

// BenchmarkCostStep is the cost step's overhead per model-call span (a typical chat span
// with usage, a known model; the lookup is memoised after the first span), on the default
// table (the genai-prices dataset with the overrides) and on the 55-row hand-typed table
// it replaced (testdata/handtyped_prices.yaml): the dataset must cost at most 10% more.
func BenchmarkCostStep(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  func() *Config
	}{
		{"table=dataset", createDefaultConfig},
		{"table=handtyped", func() *Config {
			c := createDefaultConfig()
			c.DefaultPrices = false
			c.PriceFiles = []PriceFile{{Path: "testdata/handtyped_prices.yaml"}}
			return c
		}},
	} {
		b.Run(tc.name, func(b *testing.B) { benchCostStep(b, tc.cfg()) })
	}
}

func benchCostStep(b *testing.B, cfg *Config) {
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	c, err := newCoster(set, cfg)
	require.NoError(b, err)
	defer func() { _ = c.shutdown(context.Background()) }()
	const n = 100
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	models := []string{"claude-sonnet-4-5-20250929", "gpt-4.1-mini", "gemini-2.5-pro", "deepseek-chat"}
	for i := range n {
		chatSpan(ss, "chat", func(m pcommon.Map) {
			m.PutStr(genai.AttrRequestModel, models[i%len(models)])
			m.PutStr(genai.AttrAgentName, "lead_agent")
			m.PutStr(genai.AttrCaller, "lead_agent")
			genai.PutUsage(m, genai.Usage{Input: 12_000, CacheRead: 8_000, Output: 700, Reasoning: 200})
		})
	}
	clean := ptrace.NewTraces()
	td.CopyTo(clean)
	// every span is priced on both tables, so both runs do the same work
	c.processTraces(context.Background(), td)
	for i := range n {
		_, _, ok := genai.CostFromMap(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(i).Attributes())
		require.True(b, ok, models[i%len(models)])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		clean.CopyTo(td)
		b.StartTimer()
		c.processTraces(context.Background(), td)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
}
