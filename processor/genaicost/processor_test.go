package genaicost

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/metrictest"
)

type testProc struct {
	p    processor.Traces
	sink *consumertest.TracesSink
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
}

// testSettings are processor settings whose metrics and logs the test reads.
func testSettings(t *testing.T) (processor.Settings, *componenttest.Telemetry, *observer.ObservedLogs) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	core, logs := observer.New(zap.InfoLevel)
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	return set, tel, logs
}

func newTestProc(t *testing.T, cfg *Config) *testProc {
	t.Helper()
	set, tel, logs := testSettings(t)
	sink := new(consumertest.TracesSink)
	p, err := NewFactory().CreateTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	return &testProc{p: p, sink: sink, tel: tel, logs: logs}
}

var callDay = time.Date(2025, 11, 3, 10, 0, 0, 0, time.UTC)

// chatSpan is a semconv chat span with the given attributes on top.
func chatSpan(ss ptrace.ScopeSpans, name string, set func(m pcommon.Map)) ptrace.Span {
	s := ss.Spans().AppendEmpty()
	s.SetName(name)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(callDay))
	s.Attributes().PutStr(genai.AttrOperationName, genai.OpChat)
	set(s.Attributes())
	return s
}

func TestPricesModelCalls(t *testing.T) {
	tests := []struct {
		name       string
		spanName   string
		attrs      func(m pcommon.Map)
		wantCost   *genai.Cost
		wantSource string
		wantPrice  string
	}{
		{
			name: "table price from the response model", spanName: "chat claude-sonnet-4-5",
			attrs: func(m pcommon.Map) {
				m.PutStr(genai.AttrProviderName, "anthropic")
				m.PutStr(genai.AttrRequestModel, "claude-sonnet-4-5")
				m.PutStr(genai.AttrResponseModel, "claude-sonnet-4-5-20250929")
				genai.PutUsage(m, genai.Usage{Input: 100_000, CacheRead: 60_000, CacheCreation: 20_000, Output: 2_000, Reasoning: 500})
				m.PutInt(genai.AttrUsageCacheCreat1h, 5_000)
			},
			// 20k fresh × 3 + 60k × 0.3 + 15k × 3.75 + 5k × 6 + 1.5k × 15 + 0.5k × 15, per million
			wantCost:   &genai.Cost{Input: 0.06, CacheRead: 0.018, CacheCreation: 0.08625, Output: 0.0225, Reasoning: 0.0075, Total: 0.19425},
			wantSource: genai.CostSourceTable, wantPrice: "anthropic/claude-sonnet-4-5",
		},
		{
			name: "provider-reported cost wins and keeps its figure", spanName: "chat anthropic/claude-sonnet-4.5",
			attrs: func(m pcommon.Map) {
				m.PutStr(genai.AttrProviderName, "openrouter")
				m.PutStr(genai.AttrRequestModel, "anthropic/claude-sonnet-4.5")
				genai.PutUsage(m, genai.Usage{Input: 1000, Output: 100})
				m.PutDouble(genai.AttrCostTotal, 0.0123)
			},
			wantCost: &genai.Cost{Total: 0.0123}, wantSource: genai.CostSourceProvider,
		},
		{
			name: "provider cost under a foreign key", spanName: "chat gpt-4o",
			attrs: func(m pcommon.Map) {
				m.PutStr(genai.AttrRequestModel, "gpt-4o")
				genai.PutUsage(m, genai.Usage{Input: 1000, Output: 100})
				m.PutDouble(genai.AttrForeignUsageCost, 0.5)
			},
			wantCost: &genai.Cost{Total: 0.5}, wantSource: genai.CostSourceProvider,
		},
		{
			name: "unknown model gets no cost", spanName: "chat llama-3-70b",
			attrs: func(m pcommon.Map) {
				m.PutStr(genai.AttrRequestModel, "llama-3-70b")
				genai.PutUsage(m, genai.Usage{Input: 1000, Output: 100})
			},
		},
		{
			name: "a span that is no model call is left alone", spanName: "invoke_agent lead_agent",
			attrs: func(m pcommon.Map) {
				m.PutStr(genai.AttrOperationName, genai.OpInvokeAgent)
				m.PutStr(genai.AttrRequestModel, "gpt-4o")
				genai.PutUsage(m, genai.Usage{Input: 1000, Output: 100})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTestProc(t, createDefaultConfig())
			td := ptrace.NewTraces()
			chatSpan(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty(), tt.spanName, tt.attrs)
			require.NoError(t, tp.p.ConsumeTraces(context.Background(), td))
			got := tp.sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
			c, src, ok := genai.CostFromMap(got)
			if tt.wantCost == nil {
				assert.False(t, ok, "no cost expected, got %+v", c)
				return
			}
			require.True(t, ok)
			assert.InDelta(t, tt.wantCost.Total, c.Total, 1e-12)
			assert.InDelta(t, tt.wantCost.Input, c.Input, 1e-12)
			assert.InDelta(t, tt.wantCost.CacheRead, c.CacheRead, 1e-12)
			assert.InDelta(t, tt.wantCost.CacheCreation, c.CacheCreation, 1e-12)
			assert.InDelta(t, tt.wantCost.Output, c.Output, 1e-12)
			assert.InDelta(t, tt.wantCost.Reasoning, c.Reasoning, 1e-12)
			assert.Equal(t, tt.wantSource, src)
			if tt.wantPrice != "" {
				p, _ := got.Get(genai.AttrCostPrice)
				assert.Equal(t, tt.wantPrice, p.Str())
			}
			if tt.wantSource == genai.CostSourceTable {
				sv, ok := got.Get(genai.AttrCostCacheSavings)
				require.True(t, ok)
				assert.InDelta(t, 0.162, sv.Double(), 1e-12, "60k cache reads at $3 instead of $0.3 per million")
			}
		})
	}
}

func TestUnknownModelCountedAndLoggedOnce(t *testing.T) {
	tp := newTestProc(t, createDefaultConfig())
	for range 3 {
		td := ptrace.NewTraces()
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
		for _, model := range []string{"llama-3-70b", "llama-3-70b", "gpt-4o", ""} {
			chatSpan(ss, "chat", func(m pcommon.Map) {
				if model != "" {
					m.PutStr(genai.AttrRequestModel, model)
				}
				genai.PutUsage(m, genai.Usage{Input: 10, Output: 1})
			})
		}
		require.NoError(t, tp.p.ConsumeTraces(context.Background(), td))
	}
	assert.Equal(t, 1, tp.logs.FilterMessageSnippet("no price for model").Len(), "logged once per model")
	assert.Equal(t, "llama-3-70b", tp.logs.FilterMessageSnippet("no price for model").All()[0].ContextMap()["model"])

	unpriced, err := tp.tel.GetMetric("otelcol_processor_genaicost_calls_unpriced")
	require.NoError(t, err)
	assert.Equal(t, int64(6), metrictest.SumInt64Where(t, unpriced, "model", "llama-3-70b"))
	assert.Equal(t, int64(3), metrictest.SumInt64Where(t, unpriced, "reason", "no_model"))
	priced, err := tp.tel.GetMetric("otelcol_processor_genaicost_calls_priced")
	require.NoError(t, err)
	assert.Equal(t, int64(3), metrictest.SumInt64Where(t, priced, "source", "table"))
}

func TestAlreadyPricedSpanIsKept(t *testing.T) {
	// a second collector tier sees spans the first one priced: nothing changes
	tp := newTestProc(t, createDefaultConfig())
	td := ptrace.NewTraces()
	s := chatSpan(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty(), "chat gpt-4o", func(m pcommon.Map) {
		m.PutStr(genai.AttrRequestModel, "gpt-4o")
		genai.PutUsage(m, genai.Usage{Input: 1000, Output: 100})
	})
	require.NoError(t, tp.p.ConsumeTraces(context.Background(), td))
	first := pcommon.NewMap()
	s.Attributes().CopyTo(first)
	require.NoError(t, tp.p.ConsumeTraces(context.Background(), td))
	assert.Equal(t, first.AsRaw(), s.Attributes().AsRaw())
}
