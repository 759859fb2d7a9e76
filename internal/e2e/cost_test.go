//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// costDemoConfig writes an agentmeter config whose scripted model answers as real models
// (the lead as claude-sonnet-4-5, the subagents as claude-haiku-4-5), with a cache write
// added to one subagent turn, so every rate of the price table is exercised end to end.
func costDemoConfig(t *testing.T) string {
	t.Helper()
	return costDemoConfigAs(t, "claude-sonnet-4-5", "claude-haiku-4-5")
}

// costDemoConfigAs is costDemoConfig with the lead answering as lead and the subagents as sub.
func costDemoConfigAs(t *testing.T, lead, sub string) string {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(RepoRoot(), "runtime", "model", "scripted", "demo.yaml"))
	require.NoError(t, err)
	s := strings.ReplaceAll(string(script), "scripted-demo-mini", sub)
	s = strings.Replace(s, "usage: {input: 640, output: 52}", "usage: {input: 640, output: 52, cache_creation: 300}", 1)
	dir := t.TempDir()
	scriptPath := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(scriptPath, []byte(s), 0o600))
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("models:\n  - {name: main, provider: scripted, model: "+lead+", script: "+scriptPath+"}\n"), 0o600))
	return cfg
}

// spanCost is what the exported spans say about cost.
type spanCost struct {
	own      float64 // Σ own cost of every model call
	calls    int     // model calls with usage
	priced   int     // of them, with a cost
	byTrace  map[string]float64
	dispatch []string // mismatches between a dispatching call's merged cost and its tasks
	checked  int      // dispatching calls compared
}

// sumSpanCost reads the exported spans of the given traces: Σ own cost, and on every
// dispatching call, its merged subagent cost against the own cost of the model calls
// under the task tool spans it dispatched (walked down the tree).
func sumSpanCost(path string, traceIDs map[string]bool) spanCost {
	sc := spanCost{byTrace: map[string]float64{}}
	tds, _ := ReadTraces(path)
	byID := map[string]ptrace.Span{}
	children := map[string][]string{}
	for _, sp := range Spans(tds) {
		tid := sp.TraceID().String()
		if !traceIDs[tid] {
			continue
		}
		id := tid + sp.SpanID().String()
		if _, dup := byID[id]; dup {
			continue // a corrected re-emission: the first copy counts
		}
		byID[id] = sp
		children[tid+sp.ParentSpanID().String()] = append(children[tid+sp.ParentSpanID().String()], id)
	}
	var under func(id string) float64
	under = func(id string) float64 {
		var n float64
		for _, c := range children[id] {
			sp := byID[c]
			if genai.IsModelCallSpan(sp.Name(), sp.Attributes()) {
				if cost, _, ok := genai.CostFromMap(sp.Attributes()); ok {
					n += cost.Total
				}
			}
			n += under(c)
		}
		return n
	}
	toolByCallID := map[string]string{}
	for id, sp := range byID {
		if v, ok := sp.Attributes().Get(genai.AttrToolCallID); ok && genai.IsToolCallSpan(sp.Name(), sp.Attributes()) {
			toolByCallID[sp.TraceID().String()+v.Str()] = id
		}
	}
	for _, sp := range byID {
		attrs := sp.Attributes()
		if !genai.IsModelCallSpan(sp.Name(), attrs) {
			continue
		}
		if _, ok := genai.UsageFromMap(attrs); ok {
			sc.calls++
		}
		if c, _, ok := genai.CostFromMap(attrs); ok {
			sc.priced++
			sc.own += c.Total
			sc.byTrace[sp.TraceID().String()] += c.Total
		}
		merged, ok := genai.SubagentCostFromMap(attrs)
		if !ok {
			continue
		}
		var want float64
		for _, callID := range genai.StringsFromMap(attrs, genai.AttrSubagentToolCallIDs) {
			want += under(toolByCallID[sp.TraceID().String()+callID])
		}
		sc.checked++
		if want == 0 || math.Abs(merged.Total-want) > 1e-12 {
			sc.dispatch = append(sc.dispatch, sp.Name())
		}
	}
	return sc
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// The demo with real model names plus agentusage records naming OpenAI models, through
// the shipped otelcol-config.yaml with both vendor exporters on against the fakes:
// Prometheus' agentmeter_cost_usd_total == Σ per-call cost on the exported spans == what
// Langfuse and LangSmith received, and each dispatching call's merged cost == the cost of
// the model calls under its tasks.
func TestCostEverywhereEndToEnd(t *testing.T) {
	ports := setSidecarEnv(t)
	lf, ls := costVendors(t)
	tracesFile := startShippedWithFile(t, ports)
	prom := scrapeShipped(t, ports.Prometheus)

	cfg := costDemoConfig(t)
	traceIDs := map[string]bool{}
	journalCost := map[string]float64{} // trace id → the run journal's total_cost_usd
	const runs = 2
	for range runs {
		var res struct {
			TraceID    string `json:"trace_id"`
			Completion struct {
				TotalCostUSD    float64            `json:"total_cost_usd"`
				CostUSDByCaller map[string]float64 `json:"cost_usd_by_caller"`
				Unpriced        int64              `json:"unpriced_llm_call_count"`
			} `json:"completion"`
		}
		RunAgentJSON(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + ports.OTLPHTTP, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}, &res,
			"--config", cfg, "Research metering approaches and compare them.")
		tid := strings.ToLower(res.TraceID)
		traceIDs[tid] = true
		journalCost[tid] = res.Completion.TotalCostUSD
		require.Zero(t, res.Completion.Unpriced)
		var byCaller float64
		for _, v := range res.Completion.CostUSDByCaller {
			byCaller += v
		}
		assert.InDelta(t, res.Completion.TotalCostUSD, byCaller, 1e-12, "the caller buckets add up to the journal's total")
		assert.Positive(t, res.Completion.CostUSDByCaller["subagent"])
		assert.Positive(t, res.Completion.CostUSDByCaller["middleware"])
	}

	// agentusage: native records of another app (OpenAI models, one call cached)
	body := []byte(`{"records":[
 {"thread_id":"t-cost","run_id":"run-cost","source_run_id":"lead-1","caller":"lead_agent","model_name":"gpt-4.1","provider":"openai",
  "input_tokens":5000,"output_tokens":400,"cache_read_tokens":3000,"response_tool_call_ids":["c1"],"start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:01Z"},
 {"thread_id":"t-cost","run_id":"run-cost","source_run_id":"sub-1","caller":"subagent:researcher","model_name":"gpt-4.1-mini","provider":"openai",
  "input_tokens":2000,"output_tokens":300,"reasoning_tokens":100,"tool_call_id":"c1","start_time":"2026-01-01T00:00:02Z","end_time":"2026-01-01T00:00:03Z"}
]}`)
	req, err := http.NewRequest(http.MethodPost, "http://"+ports.AgentUsage+"/v1/usage", bytes.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var agentusageTrace string
	require.Eventually(t, func() bool {
		tds, _ := ReadTraces(tracesFile)
		for _, sp := range Spans(tds) {
			if v, ok := sp.Attributes().Get(genai.AttrConversationID); ok && v.Str() == "t-cost" {
				agentusageTrace = sp.TraceID().String()
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "the agentusage records never came out")
	traceIDs[agentusageTrace] = true

	// spans: every model call priced, merged cost == calls under the tasks
	const wantCalls = runs*11 + 2
	var sc spanCost
	require.Eventually(t, func() bool {
		sc = sumSpanCost(tracesFile, traceIDs)
		return sc.calls == wantCalls && sc.priced == wantCalls
	}, 30*time.Second, 200*time.Millisecond, "want %d priced model calls", wantCalls)
	assert.Empty(t, sc.dispatch, "dispatching calls whose merged cost differs from their tasks' calls")
	for tid, jc := range journalCost {
		assert.True(t, near(jc, sc.byTrace[tid]), "run %s: journal total_cost_usd %.9f, spans %.9f", tid, jc, sc.byTrace[tid])
	}
	assert.Equal(t, runs+1, sc.checked, "one dispatching call per demo run and one in the agentusage records")
	require.Positive(t, sc.own)
	t.Logf("Σ per-call cost over %d calls: $%.9f", sc.calls, sc.own)

	// Prometheus
	var promTotal float64
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := prom.Query(ctx, `sum(agentmeter_cost_usd_total)`)
		if err != nil || len(s) != 1 {
			return false
		}
		promTotal = s[0].Value
		return near(promTotal, sc.own)
	}, 30*time.Second, 250*time.Millisecond, "prometheus cost never reached the spans' $%.9f", sc.own)
	// cache savings: Prometheus' counter == Σ agentmeter.cost.cache_savings_usd on the spans
	var savings float64
	tds, _ := ReadTraces(tracesFile)
	seenSpan := map[string]bool{}
	for _, sp := range Spans(tds) {
		id := sp.TraceID().String() + sp.SpanID().String()
		if !traceIDs[sp.TraceID().String()] || seenSpan[id] {
			continue
		}
		seenSpan[id] = true
		if v, ok := sp.Attributes().Get(genai.AttrCostCacheSavings); ok {
			savings += v.Double()
		}
	}
	require.Positive(t, savings, "the demo reads from the cache")
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := prom.Query(ctx, `sum(agentmeter_cache_savings_usd_total)`)
		return err == nil && len(s) == 1 && near(s[0].Value, savings)
	}, 30*time.Second, 250*time.Millisecond, "prometheus cache savings never reached the spans' $%.9f", savings)
	t.Logf("cache savings: $%.9f", savings)
	// every dashboard query is valid PromQL over these series, and the spend panels show
	// data: rate() and increase() need two samples of a series (spans that stream out
	// at once can all be in Prometheus' first scrape)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := prom.Query(ctx, `min(count_over_time(agentmeter_cost_usd_total[1h])) >= 2 and min(count_over_time(agentmeter_cache_savings_usd_total[1h])) >= 2`)
		return err == nil && len(s) == 1
	}, 30*time.Second, 250*time.Millisecond, "two scrapes of the cost series")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, expr := range dashboardQueries(t) {
		s, err := prom.Query(ctx, expr)
		require.NoError(t, err, expr)
		if strings.Contains(expr, "agentmeter_cost_usd_total") || strings.Contains(expr, "agentmeter_cache_savings_usd_total") {
			assert.NotEmpty(t, s, "no data for dashboard query %s", expr)
		}
	}

	// Langfuse: Σ observation cost of our traces
	var lfTotal float64
	require.Eventually(t, func() bool {
		lfTotal = langfuseCost(lf, traceIDs)
		return near(lfTotal, sc.own)
	}, 30*time.Second, 200*time.Millisecond, "langfuse-side cost never reached $%.9f", sc.own)
	assert.Empty(t, lf.Problems())

	// LangSmith: Σ usage_metadata.total_cost of our runs
	var lsTotal float64
	require.Eventually(t, func() bool {
		lsTotal = langsmithCost(ls, traceIDs)
		return near(lsTotal, sc.own)
	}, 30*time.Second, 200*time.Millisecond, "langsmith-side cost never reached $%.9f", sc.own)
	assert.Empty(t, ls.Violations())
	t.Logf("prometheus $%.9f, langfuse $%.9f, langsmith $%.9f", promTotal, lfTotal, lsTotal)
}
