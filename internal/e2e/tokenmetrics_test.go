//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
)

// tokenMetricsCalls is one run's model calls for the tests below: every caller bucket,
// every usage kind, a cache_write-only call and a call without usage.
func tokenMetricsCalls() []chatSpan {
	u := func(in, out, cr, cc, rs int64) *genai.Usage {
		return &genai.Usage{Input: in, Output: out, CacheRead: cr, CacheCreation: cc, Reasoning: rs}
	}
	return []chatSpan{
		{caller: "lead_agent", model: "gpt-4o", provider: "openai", usage: u(1200, 80, 1000, 0, 0), dispatches: true},
		{caller: "subagent:researcher", model: "gpt-4o-mini", provider: "openai", usage: u(640, 210, 0, 0, 64)},
		{caller: "subagent:coder", model: "claude-sonnet", provider: "anthropic", usage: u(3000, 500, 0, 2048, 0), cacheWriteOnly: true},
		{caller: "middleware:title", model: "gpt-4o-mini", provider: "openai", usage: u(150, 12, 0, 0, 0)},
		{caller: "lead_agent", model: "gpt-4o", provider: "openai"},
	}
}

func tallyOf(calls []chatSpan) genai.Usage {
	var sum genai.Usage
	for _, c := range calls {
		if c.usage != nil {
			sum = sum.Add(*c.usage)
		}
	}
	return sum
}

// The three metric sets of the shipped config agree with each other and with the spans'
// sums, per usage kind, in a real Prometheus; and every query of the shipped Grafana
// dashboard returns data (not only parses) over these series.
func TestTokenMetricSetsAgreeInPrometheus(t *testing.T) {
	ports := setSidecarEnv(t)
	tracesFile := startShippedWithFile(t, ports)
	// the token metrics and the collector's own (the dashboard's cost-step panels), as deploy/servicemonitor.yaml scrapes both
	prom := scrapeShipped(t, ports.Prometheus, fmt.Sprintf("127.0.0.1:%d", ports.Telemetry))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	calls := tokenMetricsCalls()
	var sum genai.Usage
	spans := 0
	for i := 0; i < 3; i++ {
		td := buildTrace(byte(i+1), calls)
		spans += td.SpanCount()
		require.NoError(t, SendOTLPHTTP(ctx, ports.OTLPHTTP, td))
		sum = sum.Add(tallyOf(calls))
		prom.WaitForValue(t, `sum(agentmeter_tokens_total)`, float64(allKinds(sum)), 30*time.Second)
	}
	withUsage := float64(3 * 4)

	for _, q := range []struct {
		expr string
		want float64
	}{
		{`sum(agentmeter_tokens_total{token_type="input"})`, float64(sum.Input)},
		{`sum(gen_ai_client_inference_usage_input_tokens_total)`, float64(sum.Input)},
		{`sum(gen_ai_client_inference_operation_input_tokens_sum)`, float64(sum.Input)},
		{`sum(gen_ai_client_token_usage_sum{gen_ai_token_type="input"})`, float64(sum.Input)},
		{`sum(agentmeter_tokens_total{token_type="output"})`, float64(sum.Output)},
		{`sum(gen_ai_client_inference_usage_output_tokens_total)`, float64(sum.Output)},
		{`sum(gen_ai_client_inference_operation_output_tokens_sum)`, float64(sum.Output)},
		{`sum(gen_ai_client_token_usage_sum{gen_ai_token_type="output"})`, float64(sum.Output)},
		{`sum(agentmeter_tokens_total{token_type="cache_read"})`, float64(sum.CacheRead)},
		{`sum(gen_ai_client_inference_usage_cache_read_input_tokens_total)`, float64(sum.CacheRead)},
		{`sum(agentmeter_tokens_total{token_type="cache_creation"})`, float64(sum.CacheCreation)},
		{`sum(gen_ai_client_inference_usage_cache_write_input_tokens_total)`, float64(sum.CacheCreation)},
		{`sum(agentmeter_tokens_total{token_type="reasoning"})`, float64(sum.Reasoning)},
		{`sum(gen_ai_client_inference_usage_reasoning_output_tokens_total)`, float64(sum.Reasoning)},
		{`sum(gen_ai_client_inference_operation_input_tokens_count)`, withUsage},
		{`sum(gen_ai_client_token_usage_count{gen_ai_token_type="output"})`, withUsage},
	} {
		prom.WaitForValue(t, q.expr, q.want, 10*time.Second)
	}
	// semconv attributes, never an id; modality as semconv says when unknown
	samples, err := prom.Query(ctx, `gen_ai_client_inference_usage_input_tokens_total`)
	require.NoError(t, err)
	require.NotEmpty(t, samples)
	for _, s := range samples {
		for k := range s.Labels {
			assert.Contains(t, []string{"__name__", "job", "instance", "gen_ai_operation_name", "gen_ai_provider_name",
				"gen_ai_request_model", "gen_ai_response_model", "gen_ai_token_modality"}, k)
		}
		assert.Equal(t, "unknown", s.Labels["gen_ai_token_modality"])
		assert.Equal(t, "chat", s.Labels["gen_ai_operation_name"])
	}

	// the cost counter is the sum of the exported model calls' own cost (the cost step
	// priced them; the merged subagent cost on the dispatching call is not added again)
	var cost float64
	priced := 0
	for _, sp := range WaitForSpans(t, tracesFile, spans, 30*time.Second) {
		if !genai.IsModelCallSpan(sp.Name(), sp.Attributes()) {
			continue
		}
		if c, _, ok := genai.CostFromMap(sp.Attributes()); ok {
			cost += c.Total
			priced++
		}
	}
	require.Positive(t, priced, "the cost step priced none of the calls")
	var got float64
	require.Eventually(t, func() bool {
		s, err := prom.Query(ctx, `sum(agentmeter_cost_usd_total)`)
		if err != nil || len(s) != 1 {
			return false
		}
		got = s[0].Value
		return math.Abs(got-cost) <= 1e-9*math.Max(1, cost)
	}, 10*time.Second, 200*time.Millisecond, "sum(agentmeter_cost_usd_total) %v, spans' own cost %v", got, cost)

	// every dashboard query answers: rate() needs two samples in its window, so give
	// Prometheus a few scrapes of the final values
	for _, expr := range dashboardQueries(t) {
		assert.Eventually(t, func() bool {
			s, err := prom.Query(ctx, expr)
			return err == nil && len(s) > 0
		}, 20*time.Second, 500*time.Millisecond, "dashboard query returns nothing: %s", expr)
	}
}

// Counters across idle and restart, as Prometheus sees them: while the collector runs, a
// quiet spell changes nothing (no reset, the next call continues the total); a collector
// restart starts the series again from zero, which resets() counts and increase() spans.
func TestTokenCountersIdleAndRestartInPrometheus(t *testing.T) {
	ports := setSidecarEnv(t)
	dir := t.TempDir()
	t.Setenv("AGENTMETER_DEMO_TRACES_FILE", filepath.Join(dir, "traces.jsonl"))
	start := func() *Collector {
		return StartWithArgs(t, dir, ports.OTLPHTTP,
			"--config", filepath.Join(RepoRoot(), "otelcol-config.yaml"),
			"--config", filepath.Join(RepoRoot(), "cmd", "demoreport", "overlay.yaml"),
			"--feature-gates=confmap.enableMergeAppendOption")
	}
	col := start()
	prom := scrapeShipped(t, ports.Prometheus)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const lead = `agentmeter_tokens_total{caller="lead_agent",token_type="input"}`

	calls := tokenMetricsCalls()
	require.NoError(t, SendOTLPHTTP(ctx, ports.OTLPHTTP, buildTrace(1, calls)))
	prom.WaitForValue(t, `sum(`+lead+`)`, 1200, 30*time.Second)
	time.Sleep(5 * time.Second) // idle: several scrapes of an unchanged series
	require.NoError(t, SendOTLPHTTP(ctx, ports.OTLPHTTP, buildTrace(2, calls)))
	prom.WaitForValue(t, `sum(`+lead+`)`, 2400, 30*time.Second)
	prom.WaitForValue(t, `sum(resets(`+lead+`[10m]))`, 0, 5*time.Second)

	col.Stop()
	col = start()
	// after the restart one smaller call: the series restarts below its old value
	small := []chatSpan{{caller: "lead_agent", model: "gpt-4o", provider: "openai", usage: &genai.Usage{Input: 300, Output: 3}}}
	require.NoError(t, SendOTLPHTTP(ctx, ports.OTLPHTTP, buildTrace(3, small)))
	prom.WaitForValue(t, `sum(`+lead+`)`, 300, 30*time.Second)
	prom.WaitForValue(t, `sum(resets(`+lead+`[10m]))`, 1, 10*time.Second)
	// increase() adds the post-restart value to what came before instead of going negative
	s, err := prom.Query(ctx, `sum(increase(`+lead+`[10m]))`)
	require.NoError(t, err)
	require.Len(t, s, 1)
	assert.Greater(t, s[0].Value, float64(1200+300)*0.9, "increase across the restart: %v", s[0].Value)
	col.Stop()
}

// A label value that is not UTF-8 (a model or service name with stray bytes from an
// emitter that does not check its strings) still counts in Prometheus: the collector's
// Prometheus exporter drops a series whose label is not valid UTF-8 at every scrape, so
// the token metrics replace each run of invalid bytes with U+FFFD.
func TestTokenMetricLabelsNotUTF8CountInPrometheus(t *testing.T) {
	ports := setSidecarEnv(t)
	startShippedWithFile(t, ports)
	prom := scrapeShipped(t, ports.Prometheus)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	calls := []chatSpan{
		{caller: "lead_agent", model: "gpt-4o\xff\xfe-mini", provider: "open\xc3ai", usage: &genai.Usage{Input: 700, Output: 70}},
		{caller: "lead_agent", model: "gpt-4o", provider: "openai", usage: &genai.Usage{Input: 300, Output: 30}},
	}
	td := buildTrace(1, calls)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr(genai.AttrServiceName, "synthetic\xe4-agent")
	require.NoError(t, SendOTLPHTTP(ctx, ports.OTLPHTTP, td))
	prom.WaitForValue(t, `sum(agentmeter_tokens_total)`, 1100, 30*time.Second)
	prom.WaitForValue(t, `sum(agentmeter_tokens_total{model="gpt-4o\uFFFD-mini",provider="open\uFFFDai",job="synthetic\uFFFD-agent"})`, 770, 10*time.Second)
}
