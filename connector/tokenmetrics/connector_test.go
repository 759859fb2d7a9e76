package tokenmetrics

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/metrictest"
)

const (
	mTokens   = genai.MetricTokens
	mInput    = "gen_ai.client.inference.usage.input_tokens"
	mOutput   = "gen_ai.client.inference.usage.output_tokens"
	mCacheR   = "gen_ai.client.inference.usage.cache_read.input_tokens"
	mCacheW   = "gen_ai.client.inference.usage.cache_write.input_tokens"
	mReason   = "gen_ai.client.inference.usage.reasoning.output_tokens"
	mOpInput  = "gen_ai.client.inference.operation.input_tokens"
	mOpOutput = "gen_ai.client.inference.operation.output_tokens"
	mLegacy   = genai.MetricTokenUsage
)

// Only model-call spans' own usage counts: agent, tool, workflow and framework parent
// spans that repeat their children's sums, and the merged agentmeter.subagent.* block,
// never do.
func TestCountsModelCallsOnly(t *testing.T) {
	h := newHarness(t, nil)
	usage := func(in, out int64) map[string]any {
		return map[string]any{genai.AttrUsageInput: in, genai.AttrUsageOutput: out}
	}
	with := func(m map[string]any, kv ...any) map[string]any {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	b := newTrace("agent")
	// counted: semconv chat, generate_content by span name only, OpenInference LLM,
	// the AI SDK's provider call, OpenLLMetry's request type
	b.span("chat gpt-4o", with(usage(100, 10), genai.AttrOperationName, "chat"))
	b.span("generate_content gemini-2.5", usage(200, 20))
	b.span("ChatOpenAI", with(usage(300, 30), genai.AttrOpenInferenceSpanKind, "LLM"))
	b.span("ai.generateText.doGenerate", usage(400, 40))
	b.span("openai.chat", with(usage(500, 50), genai.AttrLLMRequestType, "chat"))
	// not counted: sums on agent/tool/chain/outer spans
	b.span("invoke_agent lead_agent", with(usage(9000, 900), genai.AttrOperationName, "invoke_agent"))
	b.span("execute_tool task", with(usage(9000, 900), genai.AttrOperationName, "execute_tool"))
	b.span("AgentExecutor", with(usage(9000, 900), genai.AttrOpenInferenceSpanKind, "CHAIN"))
	b.span("ai.generateText", usage(9000, 900))
	b.span("LangGraph", usage(9000, 900))
	// a dispatching call: its own usage counts, the merged block does not
	b.span("chat gpt-4o", with(usage(1, 2), genai.AttrOperationName, "chat",
		genai.AttrSubagentInput, int64(7000), genai.AttrSubagentOutput, int64(700), genai.AttrSubagentTotal, int64(7700)))
	h.send(b.traces())

	pts := latest(t, h.sink)
	assert.Equal(t, float64(1501), total(t, pts, mTokens, map[string]any{"token_type": "input"}))
	assert.Equal(t, float64(152), total(t, pts, mTokens, map[string]any{"token_type": "output"}))
	assert.Equal(t, float64(1501), total(t, pts, mInput, nil))
	assert.Equal(t, float64(152), total(t, pts, mOutput, nil))
	assert.Equal(t, uint64(6), countWhere(t, pts, mOpInput, nil), "one observation per model call")
	assert.Equal(t, uint64(6), countWhere(t, pts, mLegacy, map[string]any{"gen_ai.token.type": "input"}))
	assert.Equal(t, int64(6), h.modelCalls("counted"))
}

// Each usage kind reaches its series: token_type in ours, its own counter in semconv;
// cache_write counts as cache_creation when cache_creation is absent, and never twice.
func TestEachUsageKind(t *testing.T) {
	h := newHarness(t, nil)
	b := newTrace("agent")
	b.chat("claude", genai.Usage{Input: 3000, Output: 500, CacheRead: 1000, CacheCreation: 2048, Reasoning: 64}, nil)
	b.span("chat claude", map[string]any{genai.AttrOperationName: "chat", genai.AttrRequestModel: "claude", genai.AttrProviderName: "openai",
		genai.AttrUsageInput: int64(10), genai.AttrUsageOutput: int64(5), genai.AttrUsageCacheWrite: int64(7)})
	// both keys: cache_creation wins, cache_write is not added on top
	b.span("chat claude", map[string]any{genai.AttrOperationName: "chat", genai.AttrRequestModel: "claude", genai.AttrProviderName: "openai",
		genai.AttrUsageInput: int64(10), genai.AttrUsageOutput: int64(5), genai.AttrUsageCacheCreat: int64(3), genai.AttrUsageCacheWrite: int64(3)})
	h.send(b.traces())

	pts := latest(t, h.sink)
	want := map[string]float64{"input": 3020, "output": 510, "cache_read": 1000, "cache_creation": 2058, "reasoning": 64}
	assert.Equal(t, want, by(pts, mTokens, "token_type"))
	for m, v := range map[string]float64{mInput: 3020, mOutput: 510, mCacheR: 1000, mCacheW: 2058, mReason: 64} {
		assert.Equal(t, v, total(t, pts, m, nil), m)
	}
	assert.Equal(t, float64(3020), total(t, pts, mOpInput, nil))
	assert.Equal(t, float64(510), total(t, pts, mOpOutput, nil))
	assert.Equal(t, map[string]float64{"input": 3020, "output": 510}, by(pts, mLegacy, "gen_ai.token.type"))
	for _, p := range seriesOf(pts, mInput) {
		assert.Equal(t, "unknown", p.attrs["gen_ai.token.modality"], "no span breaks usage down by modality")
	}
}

// A label set only gets the detail series its calls reported: no cache_read series of
// zeros for a model that never read the cache.
func TestDetailSeriesOnlyWhenReported(t *testing.T) {
	h := newHarness(t, nil)
	h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 10, Output: 0}, nil).traces())
	pts := latest(t, h.sink)
	assert.Equal(t, map[string]float64{"input": 10, "output": 0}, by(pts, mTokens, "token_type"))
	assert.Empty(t, seriesOf(pts, mCacheR))
	assert.Empty(t, seriesOf(pts, mReason))
	assert.Len(t, seriesOf(pts, mOutput), 1, "a call that reported 0 output tokens has an output series")
}

// caller is the bucket of agentmeter.caller; agent is gen_ai.agent.name, else the
// subagent's name from its caller tag, else lead_agent; model is the model that
// answered, else the requested one; provider as sent. Absent model/provider are absent
// labels.
func TestLabelDerivation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]any
		want  map[string]any
	}{
		{"lead", map[string]any{genai.AttrCaller: "lead_agent"},
			map[string]any{"caller": "lead_agent", "agent": "lead_agent", "model": "gpt-4o", "provider": "openai"}},
		{"untagged counts as lead", map[string]any{},
			map[string]any{"caller": "lead_agent", "agent": "lead_agent", "model": "gpt-4o", "provider": "openai"}},
		{"unknown tag counts as lead", map[string]any{genai.AttrCaller: "planner:x"},
			map[string]any{"caller": "lead_agent", "agent": "lead_agent", "model": "gpt-4o", "provider": "openai"}},
		{"subagent named by its tag", map[string]any{genai.AttrCaller: "subagent:researcher"},
			map[string]any{"caller": "subagent", "agent": "researcher", "model": "gpt-4o", "provider": "openai"}},
		{"subagent tag without a name", map[string]any{genai.AttrCaller: "subagent"},
			map[string]any{"caller": "subagent", "agent": "lead_agent", "model": "gpt-4o", "provider": "openai"}},
		{"gen_ai.agent.name wins", map[string]any{genai.AttrCaller: "subagent:researcher", genai.AttrAgentName: "researcher-v2"},
			map[string]any{"caller": "subagent", "agent": "researcher-v2", "model": "gpt-4o", "provider": "openai"}},
		{"middleware runs under the lead", map[string]any{genai.AttrCaller: "middleware:title"},
			map[string]any{"caller": "middleware", "agent": "lead_agent", "model": "gpt-4o", "provider": "openai"}},
		{"response model wins", map[string]any{genai.AttrResponseModel: "gpt-4o-2024-08-06"},
			map[string]any{"caller": "lead_agent", "agent": "lead_agent", "model": "gpt-4o-2024-08-06", "provider": "openai"}},
		{"no model, no provider", map[string]any{genai.AttrRequestModel: "", genai.AttrProviderName: ""},
			map[string]any{"caller": "lead_agent", "agent": "lead_agent"}},
		{"a non-string name is no label", map[string]any{genai.AttrAgentName: int64(7), genai.AttrRequestModel: true},
			map[string]any{"caller": "lead_agent", "agent": "lead_agent", "provider": "openai"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 1, Output: 1}, tc.attrs).traces())
			pts := latest(t, h.sink)
			series := seriesOf(pts, mTokens)
			require.Len(t, series, 2)
			for _, p := range series {
				got := map[string]any{}
				for k, v := range p.attrs {
					if k != "token_type" {
						got[k] = v
					}
				}
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

// No id ever becomes a label, and only the configured resource attributes reach the
// metrics' resource: run ids, response ids, tool call ids, trace ids, instance ids stay out.
func TestNoIDsInLabels(t *testing.T) {
	h := newHarness(t, nil)
	h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 5, Output: 1, CacheRead: 2, Reasoning: 1}, map[string]any{
		genai.AttrCaller: "subagent:researcher", genai.AttrToolCallID: "call_1", genai.AttrConversationID: "thread-9",
		genai.AttrEndUserID: "user-1", "server.address": "api.openai.com", "server.port": int64(443),
	}).traces())
	pts := latest(t, h.sink)
	allowed := map[string][]string{
		mTokens:   {"token_type", "caller", "agent", "model", "provider"},
		mLegacy:   {"gen_ai.token.type", "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model"},
		mInput:    {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model", "server.address", "server.port", "gen_ai.token.modality"},
		mOpInput:  {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model", "server.address", "server.port"},
		mOpOutput: {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model", "server.address", "server.port"},
	}
	for _, m := range []string{mOutput, mCacheR, mReason} {
		allowed[m] = allowed[mInput]
	}
	require.NotEmpty(t, pts)
	for key, p := range pts {
		metric := key[:len(key)-len(key[indexBrace(key):])]
		require.Contains(t, allowed, metric, key)
		for k := range p.attrs {
			assert.Contains(t, allowed[metric], k, key)
		}
		assert.Equal(t, map[string]any{"service.name": "agent"}, p.resource)
	}
	p := seriesOf(pts, mInput)[0]
	assert.Equal(t, "api.openai.com", p.attrs["server.address"])
	assert.Equal(t, int64(443), p.attrs["server.port"])
}

func indexBrace(s string) int {
	for i := range s {
		if s[i] == '{' {
			return i
		}
	}
	return len(s)
}

// Missing usage adds nothing and emits nothing; malformed values (text, booleans) read
// as absent; a negative count makes the whole call invalid instead of lowering a counter.
func TestMissingAndMalformedUsage(t *testing.T) {
	h := newHarness(t, nil)
	chat := map[string]any{genai.AttrOperationName: "chat", genai.AttrRequestModel: "gpt-4o"}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range chat {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	b := newTrace("agent")
	b.span("chat gpt-4o", with())                                                                    // no usage at all
	b.span("chat gpt-4o", with(genai.AttrUsageInput, "lots", genai.AttrUsageOutput, true))           // no usable value
	b.span("chat gpt-4o", with(genai.AttrUsageInput, int64(-5), genai.AttrUsageOutput, int64(3)))    // broken emitter
	b.span("chat gpt-4o", with(genai.AttrUsageInput, int64(1)<<62, genai.AttrUsageOutput, int64(3))) // would overflow
	h.send(b.traces())
	assert.Empty(t, h.sink.AllMetrics(), "nothing counted, nothing emitted")
	assert.Equal(t, int64(2), h.modelCalls("no_usage"))
	assert.Equal(t, int64(2), h.modelCalls("invalid"))

	b = newTrace("agent")
	// numbers sent as text or doubles are read (some SDKs do); the bad key alone is dropped
	b.span("chat gpt-4o", with(genai.AttrUsageInput, "120", genai.AttrUsageOutput, 30.0, genai.AttrUsageCacheRead, "n/a"))
	h.send(b.traces())
	pts := latest(t, h.sink)
	assert.Equal(t, map[string]float64{"input": 120, "output": 30}, by(pts, mTokens, "token_type"))
	assert.Equal(t, int64(1), h.modelCalls("counted"))
}

// A dispatching call re-emitted with corrected merged usage (agentmeter.merge.status =
// corrected) was counted when it first passed: counting it again would double its tokens.
func TestCorrectedSpansSkipped(t *testing.T) {
	h := newHarness(t, nil)
	first := newTrace("agent").chat("gpt-4o", genai.Usage{Input: 100, Output: 10}, map[string]any{genai.AttrMergeStatus: genai.MergeMerged})
	h.send(first.traces())
	again := newTrace("agent").chat("gpt-4o", genai.Usage{Input: 100, Output: 10}, map[string]any{
		genai.AttrMergeStatus: genai.MergeCorrected, genai.AttrSubagentInput: int64(50)})
	h.send(again.traces())
	pts := latest(t, h.sink)
	assert.Equal(t, float64(110), total(t, pts, mTokens, nil))
	assert.Equal(t, float64(100), total(t, pts, mInput, nil))
	assert.Equal(t, uint64(1), countWhere(t, pts, mOpInput, nil))
	assert.Equal(t, int64(1), h.modelCalls("corrected"))
	// a late span (counted: it was never counted before) is not a correction
	h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 1, Output: 1}, map[string]any{genai.AttrMergeStatus: genai.MergeLate}).traces())
	assert.Equal(t, float64(112), total(t, latest(t, h.sink), mTokens, nil))
}

// A call whose caller the merge has not settled goes out first marked pending (not
// counted), then once more settled, with its caller: that version is the one counted,
// under the caller it settled on; a later correction of it is not counted again.
func TestPendingCallerCountedOnceWhenSettled(t *testing.T) {
	h := newHarness(t, nil)
	u := genai.Usage{Input: 40, Output: 4}
	h.send(newTrace("agent").chat("gpt-4o", u, map[string]any{genai.AttrCallerPending: true}).traces())
	assert.Equal(t, int64(1), h.modelCalls("pending"))
	h.send(newTrace("agent").chat("gpt-4o", u, map[string]any{
		genai.AttrCallerSettled: true, genai.AttrMergeRevision: int64(1764633600000),
		genai.AttrCaller: genai.SubagentCaller("researcher")}).traces())
	h.send(newTrace("agent").chat("gpt-4o", u, map[string]any{
		genai.AttrMergeRevision: int64(1764633600001), genai.AttrMergeStatus: genai.MergeCorrected,
		genai.AttrCaller: genai.SubagentCaller("researcher")}).traces())
	pts := latest(t, h.sink)
	assert.Equal(t, float64(44), total(t, pts, mTokens, nil), "counted once")
	assert.Equal(t, float64(44), total(t, pts, mTokens, map[string]any{"caller": genai.BucketSubagent}), "under the settled caller")
	assert.Equal(t, int64(1), h.modelCalls("counted"))
	assert.Equal(t, int64(1), h.modelCalls("corrected"))
}

// Past max_series label sets, new ones go to one overflow series per metric set: totals
// stay exact, the series count stays bounded, the overflow is counted in the connector's
// telemetry and logged once.
func TestCardinalityOverflow(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSeries = 3 })
	var want int64
	for batch := 0; batch < 3; batch++ {
		b := newTrace("agent")
		for i := 0; i < 5; i++ {
			model := string(rune('a'+batch)) + string(rune('0'+i))
			b.chat(model, genai.Usage{Input: int64(100 + i), Output: int64(i), CacheRead: 1}, nil)
			want += int64(100+i) + int64(i) + 1
		}
		h.send(b.traces())
	}
	pts := latest(t, h.sink)
	assert.Equal(t, float64(want), total(t, pts, mTokens, nil), "overflow keeps the total")
	byOverflow := map[bool]int{}
	for _, p := range seriesOf(pts, mTokens) {
		byOverflow[p.attrs["otel.metric.overflow"] == true]++
		if p.attrs["otel.metric.overflow"] == true {
			assert.Contains(t, []any{"input", "output", "cache_read"}, p.attrs["token_type"])
			assert.NotContains(t, p.attrs, "model")
		}
	}
	assert.Equal(t, map[bool]int{false: 3 * 3, true: 3}, byOverflow, "3 label sets x 3 token types, and the overflow's 3")
	assert.Equal(t, float64(15*100+3*10), total(t, pts, mInput, nil))
	assert.Equal(t, uint64(15), countWhere(t, pts, mOpInput, nil))
	assert.Equal(t, uint64(15), countWhere(t, pts, mLegacy, map[string]any{"gen_ai.token.type": "input"}))

	m, err := h.tel.GetMetric("otelcol_connector_tokenmetrics_overflow_calls")
	require.NoError(t, err)
	assert.Equal(t, int64(12), metrictest.SumInt64Where(t, m, "metric_set", "agentmeter"))
	assert.Equal(t, int64(12), metrictest.SumInt64Where(t, m, "metric_set", "gen_ai_inference"))
	assert.Equal(t, int64(12), metrictest.SumInt64Where(t, m, "metric_set", "gen_ai_token_usage"))
	g, err := h.tel.GetMetric("otelcol_connector_tokenmetrics_series")
	require.NoError(t, err)
	assert.Equal(t, int64(4), metrictest.GaugeInt64Where(t, g, "metric_set", "agentmeter"), "3 label sets and the overflow")
	assert.Equal(t, 3, h.logs.FilterMessageSnippet("max_series reached").Len(), "logged once per metric set")
}

// Series are cumulative from their start time: the start never moves, values only grow,
// and a day of idle changes nothing (no staleness reset).
func TestCumulativeAcrossBatchesAndIdle(t *testing.T) {
	h := newHarness(t, nil)
	start := h.clock.timestamp()
	h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 100, Output: 10}, nil).traces())
	h.clock.advance(time.Second)
	h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 50, Output: 5}, nil).traces())
	h.clock.advance(25 * time.Hour) // a day and more of idle
	h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 1, Output: 1}, nil).traces())

	require.Len(t, h.sink.AllMetrics(), 3, "one output per batch")
	pts := latest(t, h.sink) // checks start unchanged and values monotonic along the way
	for _, p := range seriesOf(pts, mTokens) {
		assert.Equal(t, start, p.start)
		assert.Equal(t, h.clock.timestamp(), p.time)
	}
	assert.Equal(t, map[string]float64{"input": 151, "output": 16}, by(pts, mTokens, "token_type"))
	assert.Equal(t, uint64(3), countWhere(t, pts, mOpInput, nil))
	// an idle series is not re-sent: the last batch carried only what it touched
	h.send(newTrace("other").chat("o3", genai.Usage{Input: 1, Output: 1}, nil).traces())
	last := h.sink.AllMetrics()[3]
	assert.Equal(t, 1, last.ResourceMetrics().Len())
	svc, _ := last.ResourceMetrics().At(0).Resource().Attributes().Get("service.name")
	assert.Equal(t, "other", svc.Str())
}

// A restarted connector (a new collector process) starts every series again from zero
// with a new start time: what Prometheus' rate/increase read as a counter reset.
func TestRestartResetsWithNewStartTime(t *testing.T) {
	clock := newFakeClock()
	run := func() map[string]point {
		h := newHarness(t, nil)
		h.clock = clock
		h.c.now = clock.now
		h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 100, Output: 10}, nil).traces())
		return latest(t, h.sink)
	}
	before := run()
	clock.advance(time.Minute)
	after := run()
	// The same series come back, and the ones this test is about are among them.
	require.ElementsMatch(t, slices.Collect(maps.Keys(before)), slices.Collect(maps.Keys(after)))
	for _, m := range []string{mTokens, mInput, mOpInput} {
		require.NotEmpty(t, seriesOf(after, m), m)
	}
	require.Equal(t, float64(100), total(t, after, mTokens, map[string]any{"token_type": "input"}))
	for key, p := range after {
		prev := before[key]
		assert.Greater(t, p.start, prev.start, "new start time after restart: %s", key)
		assert.Equal(t, prev.value, p.value, "counted from zero again: %s", key)
		assert.Equal(t, prev.count, p.count, "counted from zero again: %s", key)
	}
}

// The three metric sets agree with each other and with the spans: ours, the semconv
// counters and histograms, and the deprecated histogram.
func TestMetricSetsAgree(t *testing.T) {
	h := newHarness(t, nil)
	var sum genai.Usage
	for batch := 0; batch < 4; batch++ {
		b := newTrace([]string{"a", "b"}[batch%2])
		for i := 0; i < 7; i++ {
			u := genai.Usage{Input: int64(1 + i*batch*97), Output: int64(i * 13), CacheRead: int64(i * batch), CacheCreation: int64(batch), Reasoning: int64(i % 3)}
			b.chat([]string{"gpt-4o", "claude", "o3"}[i%3], u, map[string]any{genai.AttrCaller: []string{"lead_agent", "subagent:r", "middleware:t"}[i%3]})
			sum = sum.Add(u)
		}
		h.send(b.traces())
	}
	pts := latest(t, h.sink)
	kinds := map[string]int64{"input": sum.Input, "output": sum.Output, "cache_read": sum.CacheRead, "cache_creation": sum.CacheCreation, "reasoning": sum.Reasoning}
	for typ, v := range kinds {
		assert.Equal(t, float64(v), total(t, pts, mTokens, map[string]any{"token_type": typ}), typ)
	}
	for m, v := range map[string]int64{mInput: sum.Input, mOutput: sum.Output, mCacheR: sum.CacheRead, mCacheW: sum.CacheCreation, mReason: sum.Reasoning,
		mOpInput: sum.Input, mOpOutput: sum.Output} {
		assert.Equal(t, float64(v), total(t, pts, m, nil), m)
	}
	assert.Equal(t, float64(sum.Input), total(t, pts, mLegacy, map[string]any{"gen_ai.token.type": "input"}))
	assert.Equal(t, float64(sum.Output), total(t, pts, mLegacy, map[string]any{"gen_ai.token.type": "output"}))
	assert.Equal(t, uint64(28), countWhere(t, pts, mOpOutput, nil))
	assert.Equal(t, uint64(28), countWhere(t, pts, mLegacy, map[string]any{"gen_ai.token.type": "output"}))
}

// Histogram buckets are semconv's, upper bound inclusive.
func TestHistogramBuckets(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Metrics = MetricSets{GenAITokenUsage: true} })
	b := newTrace("agent")
	for _, in := range []int64{0, 1, 2, 4, 1024, 1025, 100_000_000} {
		b.chat("m", genai.Usage{Input: in, Output: 1}, nil)
	}
	h.send(b.traces())
	pts := latest(t, h.sink)
	require.Empty(t, seriesOf(pts, mTokens), "agentmeter set off")
	require.Empty(t, seriesOf(pts, mInput), "gen_ai_inference set off")
	var in point
	for _, p := range seriesOf(pts, mLegacy) {
		if p.attrs["gen_ai.token.type"] == "input" {
			in = p
		}
	}
	want := make([]uint64, 15)
	// ≤1: 0 and 1; ≤4: 2 and 4; ≤1024: 1024; ≤4096: 1025; above 67108864: 1e8
	want[0], want[1], want[5], want[6], want[14] = 2, 2, 1, 1, 1
	assert.Equal(t, want, in.bucketCounts)
	assert.Equal(t, uint64(7), in.count)
}

// Resources: each service.name gets its own metrics resource; spans without one share
// the empty resource.
func TestResourcesBySetting(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ResourceAttributes = []string{"service.name", "service.instance.id"} })
	td := newTrace("a").chat("m", genai.Usage{Input: 1, Output: 1}, nil).traces()
	newTrace("b").chat("m", genai.Usage{Input: 2, Output: 2}, nil).traces().ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	newTrace("").chat("m", genai.Usage{Input: 4, Output: 4}, nil).traces().ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	h.send(td)
	md := h.sink.AllMetrics()[0]
	require.Equal(t, 3, md.ResourceMetrics().Len())
	var got []map[string]any
	for i := 0; i < 3; i++ {
		got = append(got, md.ResourceMetrics().At(i).Resource().Attributes().AsRaw())
	}
	assert.Equal(t, []map[string]any{
		{"service.name": "a", "service.instance.id": "pod-7f9c"},
		{"service.name": "b", "service.instance.id": "pod-7f9c"},
		{"service.instance.id": "pod-7f9c"},
	}, got)
}

func (h *harness) modelCalls(outcome string) int64 {
	h.t.Helper()
	m, err := h.tel.GetMetric("otelcol_connector_tokenmetrics_model_calls")
	if err != nil {
		return 0
	}
	return metrictest.SumInt64Where(h.t, m, "outcome", outcome)
}

// A refusal downstream is not handed back to the traces pipeline (whose retry would count
// the same calls twice); the totals stay counted and the next batch carries them.
func TestDownstreamErrorNotReturned(t *testing.T) {
	h := newHarness(t, nil)
	refusing := &failOnce{next: h.sink}
	h.c.next = refusing
	h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 100, Output: 10}, nil).traces())
	assert.Empty(t, h.sink.AllMetrics(), "the first batch was refused")
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("refused a batch").Len())
	h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 1, Output: 1}, nil).traces())
	assert.Equal(t, map[string]float64{"input": 101, "output": 11}, by(latest(t, h.sink), mTokens, "token_type"))
}

type failOnce struct {
	next   consumer.Metrics
	failed bool
}

func (f *failOnce) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f *failOnce) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if !f.failed {
		f.failed = true
		return errors.New("queue full")
	}
	return f.next.ConsumeMetrics(ctx, md)
}
