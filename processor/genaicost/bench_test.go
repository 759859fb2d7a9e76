package genaicost

import (
	"context"
	"slices"
	"testing"
	"time"

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
//
// Each op prices one batch on each table, in alternating order, and the metrics are the
// medians of the calls' own times: a batch takes 100–200 µs, so one garbage collection
// or preemption in a call would move a mean by more than the tables differ.
func BenchmarkCostStep(b *testing.B) {
	handtyped := createDefaultConfig()
	handtyped.DefaultPrices = false
	handtyped.PriceFiles = []PriceFile{{Path: "testdata/handtyped_prices.yaml"}}
	steps := [2]*costStep{newCostStep(b, createDefaultConfig()), newCostStep(b, handtyped)}
	var took [2][]time.Duration
	for i := 0; b.Loop(); i++ {
		for j := range steps {
			k := (i + j) % 2 // dataset first on even ops, hand-typed first on odd ones
			took[k] = append(took[k], steps[k].run())
		}
	}
	perSpan := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / costStepSpans
	}
	dataset, hand := perSpan(took[0]), perSpan(took[1])
	b.ReportMetric(dataset, "dataset-ns/span")
	b.ReportMetric(hand, "handtyped-ns/span")
	b.ReportMetric(dataset/hand, "dataset/handtyped")
}

// costStepSpans is the number of model-call spans in a cost step benchmark batch.
const costStepSpans = 100

// costStep is one table's coster with its batch, reset from clean before each call.
type costStep struct {
	c         *coster
	td, clean ptrace.Traces
}

func newCostStep(b *testing.B, cfg *Config) *costStep {
	tel := componenttest.NewTelemetry()
	b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	c, err := newCoster(set, cfg)
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.shutdown(context.Background()) })
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	models := []string{"claude-sonnet-4-5-20250929", "gpt-4.1-mini", "gemini-2.5-pro", "deepseek-chat"}
	for i := range costStepSpans {
		chatSpan(ss, "chat", func(m pcommon.Map) {
			m.PutStr(genai.AttrRequestModel, models[i%len(models)])
			m.PutStr(genai.AttrAgentName, "lead_agent")
			m.PutStr(genai.AttrCaller, "lead_agent")
			genai.PutUsage(m, genai.Usage{Input: 12_000, CacheRead: 8_000, Output: 700, Reasoning: 200})
		})
	}
	s := &costStep{c: c, td: td, clean: ptrace.NewTraces()}
	td.CopyTo(s.clean)
	// every span is priced on both tables, so both runs do the same work
	c.processTraces(context.Background(), td)
	for i := range costStepSpans {
		_, _, ok := genai.CostFromMap(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(i).Attributes())
		require.True(b, ok, models[i%len(models)])
	}
	return s
}

// run prices a fresh copy of the batch and returns how long the pricing took.
func (s *costStep) run() time.Duration {
	s.clean.CopyTo(s.td)
	start := time.Now()
	s.c.processTraces(context.Background(), s.td)
	return time.Since(start)
}
