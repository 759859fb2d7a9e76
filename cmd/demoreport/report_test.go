package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

const exposition = `# HELP agentmeter_tokens_total Tokens used by model calls
# TYPE agentmeter_tokens_total counter
agentmeter_tokens_total{agent="lead_agent",caller="lead_agent",model="demo-large",provider="scripted",token_type="input"} 1200
agentmeter_tokens_total{agent="lead_agent",caller="lead_agent",model="demo-large",provider="scripted",token_type="output"} 80
agentmeter_tokens_total{agent="lead_agent",caller="lead_agent",model="demo-large",provider="scripted",token_type="cache_read"} 1000
agentmeter_tokens_total{agent="researcher",caller="subagent",model="demo-small-2025",provider="scripted",token_type="input"} 300
agentmeter_tokens_total{agent="x",caller="subagent",model="m \"q\" \\ x",provider="scripted",token_type="cache_read"} 0
agentmeter_tokens_total{agent="researcher",caller="subagent",model="demo-small-2025",provider="scripted",token_type="output"} 45
agentmeter_tokens_total{agent="lead_agent",caller="middleware",model="demo-small",provider="scripted",token_type="input"} 50
agentmeter_tokens_total{agent="lead_agent",caller="middleware",model="demo-small",provider="scripted",token_type="output"} 5 1700000000000
agentmeter_tokens_total_other 99
gen_ai_client_token_usage_sum{gen_ai_token_type="input"} 1550
agentmeter_cost_usd_total{agent="lead_agent",caller="lead_agent",cost_type="input",model="demo-large",provider="scripted"} 0.006
agentmeter_cost_usd_total{agent="lead_agent",caller="lead_agent",cost_type="output",model="demo-large",provider="scripted"} 0.004
agentmeter_cost_usd_total{agent="researcher",caller="subagent",cost_type="input",model="demo-small-2025",provider="scripted"} 0.002
agentmeter_cost_usd_total{agent="lead_agent",caller="middleware",cost_type="output",model="demo-small",provider="scripted"} 0.0005
`

func TestParsePromTextAndSum(t *testing.T) {
	samples, err := ParsePromText(strings.NewReader(exposition), "agentmeter_tokens_total")
	require.NoError(t, err)
	require.Len(t, samples, 8, "other metrics and comments are skipped")
	assert.Equal(t, `m "q" \ x`, samples[4].Labels["model"], "escapes decoded")
	assert.Equal(t, float64(5), samples[7].Value, "timestamp ignored")

	got := SumTokens(samples)
	assert.Equal(t, float64(2680), got.All)
	assert.Equal(t, float64(1680), got.InputOutput)
	assert.Equal(t, map[string]float64{"lead_agent": 1280, "subagent": 345, "middleware": 55}, got.ByCaller)

	_, err = ParsePromText(strings.NewReader(`agentmeter_tokens_total{caller="x} 1`), "agentmeter_tokens_total")
	assert.ErrorContains(t, err, "unterminated label value")
	_, err = ParsePromText(strings.NewReader(`agentmeter_tokens_total{caller="x"} abc`), "agentmeter_tokens_total")
	assert.ErrorContains(t, err, "value")
}

func demoTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	add := func(id byte, start int64, caller, model string, own *genai.Usage, merged *genai.Usage, usd float64) ptrace.Span {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{7})
		sp.SetSpanID(pcommon.SpanID{id})
		sp.SetStartTimestamp(pcommon.Timestamp(start))
		a := sp.Attributes()
		a.PutStr(genai.AttrCaller, caller)
		a.PutStr(genai.AttrRequestModel, model)
		if own != nil {
			genai.PutUsage(a, *own)
		}
		if merged != nil {
			genai.PutSubagentUsage(a, *merged)
			a.PutInt(genai.AttrSubagentDispatches, 2)
		}
		if usd > 0 {
			genai.PutCost(a, genai.Cost{Input: usd, Total: usd}, genai.CostSourceTable)
		}
		return sp
	}
	// the provider answered with a dated model name: that is the call's model
	add(3, 30, "subagent:researcher", "demo-small", &genai.Usage{Input: 300, Output: 45}, nil, 0.002).
		Attributes().PutStr(genai.AttrResponseModel, "demo-small-2025")
	add(1, 10, "lead_agent", "demo-large", &genai.Usage{Input: 1200, Output: 80, CacheRead: 1000}, &genai.Usage{Input: 300, Output: 45}, 0.01)
	add(2, 20, "", "", nil, nil, 0) // invoke_agent / execute_tool: no usage, not a call
	add(4, 40, "middleware:title", "demo-small", &genai.Usage{Input: 50, Output: 5}, nil, 0.0005)
	return td
}

func TestCallsFromTracesAndTotals(t *testing.T) {
	td := demoTraces()
	// the same batch exported twice (a retry) counts once
	calls := CallsFromTraces([]ptrace.Traces{td, td}, nil)
	require.Len(t, calls, 3)
	assert.Equal(t, "lead_agent", calls[0].Caller, "start order")
	assert.True(t, calls[0].HasMerged)
	assert.Equal(t, genai.Usage{Input: 300, Output: 45}, calls[0].Merged)
	assert.Equal(t, int64(2), calls[0].Dispatches)
	assert.False(t, calls[1].HasMerged)
	assert.Equal(t, "demo-small-2025", calls[1].Model, "response model preferred")
	assert.Equal(t, "demo-small", calls[2].Model, "request model when no response model")

	tot := Totals(calls)
	assert.Equal(t, genai.Usage{Input: 1550, Output: 130, CacheRead: 1000}, tot.Usage, "merged usage never counted")
	assert.Equal(t, map[string]int64{"lead_agent": 1280, "subagent": 345, "middleware": 55}, tot.ByCaller)
	assert.Equal(t, map[string]int64{"demo-large": 1280, "demo-small-2025": 345, "demo-small": 55}, tot.ByModel)
	assert.Equal(t, int64(2680), AllKinds(tot.Usage))
	assert.InDelta(t, 0.0125, tot.Cost.Total, 1e-15)
	assert.InDelta(t, 0.002, tot.Cost.ByCaller["subagent"], 1e-15)
	assert.InDelta(t, 0.0005, tot.Cost.ByModel["demo-small"], 1e-15)
	assert.Zero(t, tot.Unpriced)

	assert.Empty(t, CallsFromTraces([]ptrace.Traces{td}, map[string]bool{"ffff": true}), "trace filter")
	assert.Len(t, CallsFromTraces([]ptrace.Traces{td}, map[string]bool{pcommon.TraceID{7}.String(): true}), 3)
}

func TestCheck(t *testing.T) {
	calls := CallsFromTraces([]ptrace.Traces{demoTraces()}, nil)
	spans := Totals(calls)
	samples, err := ParsePromText(strings.NewReader(exposition), "agentmeter_tokens_total")
	require.NoError(t, err)
	prom := SumTokens(samples)
	costSamples, err := ParsePromText(strings.NewReader(exposition), costMetric)
	require.NoError(t, err)
	prom.Cost = SumCost(costSamples)
	half := Completion{TotalInputTokens: 775, TotalOutputTokens: 65, TotalTokens: 840, LLMCallCount: 1,
		LeadAgentTokens: 640, SubagentTokens: 172, MiddlewareTokens: 28,
		TokenUsageByModel: map[string]ModelTotals{"demo-large": {TotalTokens: 640}, "demo-small-2025": {TotalTokens: 172}, "demo-small": {TotalTokens: 28}},
		TotalCostUSD:      0.00625, CostUSDByCaller: map[string]float64{"lead_agent": 0.005, "subagent": 0.001, "middleware": 0.00025},
		CostUSDByModel: map[string]float64{"demo-large": 0.005, "demo-small-2025": 0.001, "demo-small": 0.00025}}
	rest := Completion{TotalInputTokens: 775, TotalOutputTokens: 65, TotalTokens: 840, LLMCallCount: 1,
		LeadAgentTokens: 640, SubagentTokens: 173, MiddlewareTokens: 27,
		TokenUsageByModel: map[string]ModelTotals{"demo-large": {TotalTokens: 640}, "demo-small-2025": {TotalTokens: 173}, "demo-small": {TotalTokens: 27}},
		TotalCostUSD:      0.00625, CostUSDByCaller: map[string]float64{"lead_agent": 0.005, "subagent": 0.001, "middleware": 0.00025},
		CostUSDByModel: map[string]float64{"demo-large": 0.005, "demo-small-2025": 0.001, "demo-small": 0.00025}}
	journal := Completion{}.Add(half).Add(rest) // two runs' journals
	assert.Equal(t, int64(640), half.TokenUsageByModel["demo-large"].TotalTokens, "Add does not write into its operands")
	require.NoError(t, Check(journal, spans, prom))

	bad := journal
	bad.TotalTokens, bad.SubagentTokens = 1700, 365
	err = Check(bad, spans, prom)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "journal total_tokens 1700 != span own usage input+output 1680")
	assert.Contains(t, err.Error(), "caller subagent: journal 365 != spans 345")
	assert.Contains(t, err.Error(), "caller subagent: journal 365 != prometheus 345")

	wrongModel := journal
	wrongModel.TokenUsageByModel = map[string]ModelTotals{"demo-small": {TotalTokens: 400}}
	err = Check(wrongModel, spans, prom)
	assert.ErrorContains(t, err, "model demo-small: journal 400 != spans 55")
	assert.ErrorContains(t, err, "model demo-small: journal 400 != prometheus 55")

	lowProm := prom
	lowProm.All -= 1000
	err = Check(journal, spans, lowProm)
	assert.ErrorContains(t, err, "sum(agentmeter_tokens_total) 1680 != span sum over the five token kinds 2680")

	// cost: the journal against the spans and Prometheus, in total, per caller and per model
	cheap := journal
	cheap.TotalCostUSD = 0.012
	cheap.CostUSDByCaller = map[string]float64{"lead_agent": 0.01, "subagent": 0.0015, "middleware": 0.0005}
	err = Check(cheap, spans, prom)
	assert.ErrorContains(t, err, "journal total_cost_usd 0.012000000 != span own cost 0.012500000")
	assert.ErrorContains(t, err, "caller subagent cost: journal 0.001500000 != spans 0.002000000")
	assert.ErrorContains(t, err, "caller subagent cost: journal 0.001500000 != prometheus 0.002000000")
	noProm := prom
	noProm.Cost = SumCost(nil)
	assert.ErrorContains(t, Check(journal, spans, noProm), "prometheus sum(agentmeter_cost_usd_total) 0.000000000 != span own cost 0.012500000")
	unpriced := journal
	unpriced.Unpriced = 1
	assert.ErrorContains(t, Check(unpriced, spans, prom), "unpriced calls: journal 1, spans 0")
}

func TestWriteCallTable(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteCallTable(&buf, CallsFromTraces([]ptrace.Traces{demoTraces()}, nil)))
	out := buf.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 5, out) // header, 3 calls, total
	assert.Regexp(t, `lead_agent\s+demo-large\s+-\s+1200\s+80\s+1000\s+0\s+1280\s+0\.010000\s+300\s+45\s+345\s+2$`, lines[1])
	assert.Regexp(t, `subagent:researcher\s+demo-small-2025\s+-\s+300\s+45\s+0\s+0\s+345\s+0\.002000\s+-\s+-\s+-\s+-$`, lines[2])
	assert.Regexp(t, `all calls\s+1550\s+130\s+1000\s+0\s+1680\s+0\.012500`, lines[4])
}
