package tokenmetrics

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/bench/agentrun"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// benchBatch is what the batch processor hands the connector: runs DeerFlow-shaped runs
// (8 spans each: the lead's invoke_agent, a task tool with the subagent's invoke_agent,
// five chat spans of the lead, the title middleware and the subagent), each span with
// the attributes the runtime writes.
func benchBatch(runs int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(genai.AttrServiceName, "deer-flow")
	rs.Resource().Attributes().PutStr("service.instance.id", "pod-1")
	ss := rs.ScopeSpans().AppendEmpty()
	n := 0
	span := func(run int, name, op string) pcommon.Map {
		sp := ss.Spans().AppendEmpty()
		n++
		sp.SetTraceID(pcommon.TraceID{byte(run), byte(run >> 8), 1})
		sp.SetSpanID(pcommon.SpanID{byte(n), byte(n >> 8), byte(n >> 16), 2})
		sp.SetName(name)
		a := sp.Attributes()
		a.PutStr(genai.AttrOperationName, op)
		a.PutStr(genai.AttrRunID, fmt.Sprintf("run-%d", run))
		a.PutStr(genai.AttrConversationID, fmt.Sprintf("thread-%d", run))
		return a
	}
	chat := func(run int, model, caller string, u genai.Usage) {
		a := span(run, genai.SpanName(genai.OpChat, model), genai.OpChat)
		a.PutStr(genai.AttrRequestModel, model)
		a.PutStr(genai.AttrResponseModel, model+"-2024-08-06")
		a.PutStr(genai.AttrProviderName, "openai")
		a.PutStr(genai.AttrResponseID, fmt.Sprintf("chatcmpl-%d", n))
		a.PutStr(genai.AttrCaller, caller)
		genai.PutStrings(a, genai.AttrFinishReasons, []string{"stop"})
		genai.PutUsage(a, u)
	}
	for r := 0; r < runs; r++ {
		span(r, "invoke_agent lead_agent", genai.OpInvokeAgent).PutStr(genai.AttrAgentName, genai.LeadAgentName)
		chat(r, "gpt-4o", "lead_agent", genai.Usage{Input: 1200, Output: 96, CacheRead: 1024})
		chat(r, "gpt-4o-mini", "middleware:title", genai.Usage{Input: 180, Output: 6})
		span(r, "execute_tool task", genai.OpExecuteTool).PutStr(genai.AttrToolCallID, "call_1")
		span(r, "invoke_agent researcher", genai.OpInvokeAgent).PutStr(genai.AttrAgentName, "researcher")
		chat(r, "gpt-4o-mini", "subagent:researcher", genai.Usage{Input: 640, Output: 52})
		chat(r, "gpt-4o-mini", "subagent:researcher", genai.Usage{Input: 655, Output: 61, CacheRead: 512, Reasoning: 12})
		chat(r, "gpt-4o", "lead_agent", genai.Usage{Input: 2110, Output: 48, CacheRead: 1920})
	}
	return td
}

// BenchmarkConsumeTraces is the connector's cost per span on the metrics path: one
// batch of 100 runs (900 spans, 500 model calls) per op, the label sets already known
// (the steady state), with each set of metrics on its own and all three; and one run
// (9 spans) per op, as the merge releases traces one at a time.
//
//	go test ./connector/tokenmetrics -run '^$' -bench ConsumeTraces -benchmem
func BenchmarkConsumeTraces(b *testing.B) {
	for _, v := range []struct {
		name string
		sets MetricSets
		runs int
		// flushEvery > 0: flush_interval on, one flush per flushEvery ops (the loop's
		// tick); 0: emit after every op
		flushEvery int
	}{
		{"agentmeter", MetricSets{Agentmeter: true}, 100, 0},
		{"gen_ai_inference", MetricSets{GenAIInference: true}, 100, 0},
		{"gen_ai_token_usage", MetricSets{GenAITokenUsage: true}, 100, 0},
		{"all", MetricSets{Agentmeter: true, GenAIInference: true, GenAITokenUsage: true}, 100, 0},
		// what the shipped pipeline (no batch processor) hands over: one released trace
		{"all/one_run", MetricSets{Agentmeter: true, GenAIInference: true, GenAITokenUsage: true}, 1, 0},
		// the shipped default: flush_interval 1s, here one flush per 100 released traces
		{"all/one_run_flushed", MetricSets{Agentmeter: true, GenAIInference: true, GenAITokenUsage: true}, 1, 100},
	} {
		v := v
		td := benchBatch(v.runs)
		td.MarkReadOnly() // as the fan-out hands it over: the connector must not write
		b.Run(v.name, func(b *testing.B) {
			cfg := createDefaultConfig()
			cfg.Metrics = v.sets
			cfg.FlushInterval = 0
			if v.flushEvery > 0 {
				cfg.FlushInterval = time.Hour // the loop never ticks; the benchmark flushes
			}
			benchConsume(b, cfg, td, v.flushEvery)
		})
	}
}

// BenchmarkReadCall is the counting rules alone on one model-call span: the part that
// runs per span; it must not allocate.
func BenchmarkReadCall(b *testing.B) {
	td := benchBatch(1)
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1)
	var c call
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if readCall(sp, &c) != outCounted {
			b.Fatal("not counted")
		}
	}
}

// BenchmarkConsumeBenchCompareLoad is the connector on the load of `make bench-compare`
// (bench/agentrun: DeerFlow-shaped runs, about 34 spans a run, a third of them model
// calls), priced as genaicost leaves them, 20 runs per op, every metric set on.
func BenchmarkConsumeBenchCompareLoad(b *testing.B) {
	td := ptrace.NewTraces()
	r := rand.New(rand.NewPCG(1, 1))
	for i := range 20 {
		run := agentrun.New(r, uint64(i+1))
		for _, sp := range run.Spans {
			if u, ok := genai.UsageFromMap(sp.Attributes()); ok {
				in, out := float64(u.Input)*2.5e-6, float64(u.Output)*1e-5
				genai.PutCost(sp.Attributes(), genai.Cost{Input: in, Output: out, Total: in + out}, genai.CostSourceTable)
			}
		}
		run.Traces.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	td.MarkReadOnly()
	cfg := createDefaultConfig()
	cfg.Metrics = MetricSets{Agentmeter: true, GenAIInference: true, GenAITokenUsage: true}
	cfg.FlushInterval = time.Hour // the loop never ticks: the benchmark is the counting
	benchConsume(b, cfg, td, 0)
}

// benchConsume times ConsumeTraces of td on a connector with cfg that has counted td
// once (startedWith), flushing after every flushEvery ops when flushEvery > 0 (the
// loop's tick), and reports ns/span. The ops cycle through copies of td under other
// trace ids, with remembered_calls a copy's calls: each op's calls are new to the
// connector's memory of repeats, so each is counted and remembered, and a generation is
// forgotten every op, as in a long run (the memory is small here, so it stays in a
// cache: BenchmarkRepeatsMemory has a full one).
func benchConsume(b *testing.B, cfg *Config, td ptrace.Traces, flushEvery int) {
	const copies = 4
	tds := make([]ptrace.Traces, copies)
	calls := 0
	for i := range tds {
		tds[i] = ptrace.NewTraces()
		td.CopyTo(tds[i])
		for sp := range spaniter.All(tds[i]) {
			id := sp.TraceID()
			id[15] ^= byte(i + 1)
			sp.SetTraceID(id)
			if i == 0 && genai.Classify(sp.Name(), sp.Attributes()).Kind == genai.SpanModelCall {
				calls++
			}
		}
		tds[i].MarkReadOnly()
	}
	cfg.RememberedCalls = calls
	c := startedWith(b, cfg, td)
	for _, t := range tds {
		if err := c.ConsumeTraces(context.Background(), t); err != nil { // memory full
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.ConsumeTraces(ctx, tds[i%copies]); err != nil {
			b.Fatal(err)
		}
		if flushEvery > 0 && i%flushEvery == 0 {
			c.mu.Lock()
			c.flush(ctx)
			c.mu.Unlock()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*td.SpanCount()), "ns/span")
}

// startedWith is a started connector (shut down at the benchmark's end) that has counted
// td once, so its label sets exist: the steady state.
func startedWith(b *testing.B, cfg *Config, td ptrace.Traces) *tokenMetrics {
	b.Helper()
	c, err := newConnector(connectortest.NewNopSettings(Type), cfg, consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Shutdown(ctx) })
	if err := c.ConsumeTraces(ctx, td); err != nil {
		b.Fatal(err)
	}
	return c
}
