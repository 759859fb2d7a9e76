//go:build e2e

package e2e

import (
	"context"
	"flag"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// -interop.update rewrites test/interop/testdata/<library>.otlp.json from the spans the
// receivers produced in this run (the library's own OTLP, or the agentusage face's
// output for the LangSmith and Langfuse SDKs): the golden inputs of the normalisation
// tests. Usage: go test -tags e2e ./internal/e2e -run TestInterop -args -interop.update
var updateInterop = flag.Bool("interop.update", false, "rewrite test/interop/testdata fixtures from this run")

// interopCase is one library driving the two-agent app of test/interop/common.mjs.
type interopCase struct {
	script  string   // in test/interop
	env     []string // extra environment for the script
	fixture string   // test/interop/testdata/<fixture>.otlp.json
	// rawSpans is how many spans the library sends for one run (received before any
	// processor): the test waits for them before it looks at the results
	rawSpans int
	// passesOn is the part of call c's served usage the library hands on, when it drops
	// or replaces some (its own gap, listed in docs/compatibility.md); nil: all of it.
	// raw is what the receivers produced, for a library that sends an estimate instead.
	passesOn func(t *testing.T, c ServedCall, raw []ptrace.Span) genai.Usage
}

// runInterop runs c's script against the fake model and the shipped collector, and
// returns the fake (what was served), the raw and exported spans, and Prometheus.
func runInterop(t *testing.T, c interopCase) (*FakeModel, []ptrace.Span, []ptrace.Span, *Prometheus) {
	t.Helper()
	model := StartFakeModel(t)
	col := StartInteropCollector(t)
	prom := scrapeShipped(t, col.Ports.Prometheus)
	out := RunInterop(t, c.script, append(col.Env(model), c.env...)...)
	t.Logf("node %s: %s", c.script, out)

	WaitForSpans(t, col.Raw, c.rawSpans, 30*time.Second)
	time.Sleep(300 * time.Millisecond) // a late batch of the same run
	tds, err := ReadTraces(col.Raw)
	require.NoError(t, err)
	raw := Spans(tds)
	if *updateInterop {
		WriteFixture(t, filepath.Join(InteropDir(), "testdata", c.fixture+".otlp.json"), tds)
	}
	require.Len(t, model.Calls(), 3, "the two-agent app makes three model calls (lead dispatch, subagent, lead answer)")
	exported := WaitForSettledSpans(t, col.Out, len(raw), 30*time.Second)
	return model, raw, exported, prom
}

// assertCounted checks the Prometheus totals against what the fake served: per token
// type (want: the served usage minus what the library itself drops, see
// docs/compatibility.md), per caller bucket (lead vs subagent) and the subagent's agent
// label, and the semconv histogram's input/output sums (nothing counted twice).
func assertCounted(t *testing.T, prom *Prometheus, lead, sub genai.Usage) {
	t.Helper()
	total := lead.Add(sub)
	all := total.Input + total.Output + total.CacheRead + total.CacheCreation + total.Reasoning
	prom.WaitForValue(t, `sum(agentmeter_tokens_total)`, float64(all), 45*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	byType, err := prom.QueryByLabel(ctx, `sum by (token_type) (agentmeter_tokens_total)`, "token_type")
	require.NoError(t, err)
	assert.Equal(t, usageByType(total), dropZeros(byType), "agentmeter_tokens_total per token type = served")

	byCaller, err := prom.QueryByLabel(ctx, `sum by (caller) (agentmeter_tokens_total)`, "caller")
	require.NoError(t, err)
	want := map[string]float64{}
	if s := usageSum(lead); s > 0 {
		want[genai.BucketLeadAgent] = s
	}
	if s := usageSum(sub); s > 0 {
		want[genai.BucketSubagent] = s
	}
	assert.Equal(t, want, dropZeros(byCaller), "lead/subagent split")

	subAgent, err := prom.QueryByLabel(ctx, `sum by (agent) (agentmeter_tokens_total{caller="subagent"})`, "agent")
	require.NoError(t, err)
	if s := usageSum(sub); s > 0 {
		assert.Equal(t, map[string]float64{"researcher": s}, dropZeros(subAgent), "the subagent's bucket is named after it")
	}

	// provider and model labels: not asserted (normalisation's own tests do), logged for
	// docs/compatibility.md
	if samples, err := prom.Query(ctx, `sum by (provider, model) (agentmeter_tokens_total)`); err == nil {
		for _, s := range samples {
			t.Logf("interop labels: provider=%q model=%q tokens=%v", s.Labels["provider"], s.Labels["model"], s.Value)
		}
	}

	hist, err := prom.QueryByLabel(ctx, `sum by (gen_ai_token_type) (gen_ai_client_token_usage_sum)`, "gen_ai_token_type")
	require.NoError(t, err)
	assert.Equal(t, dropZeros(map[string]float64{"input": float64(total.Input), "output": float64(total.Output)}), dropZeros(hist),
		"gen_ai.client.token.usage counts each model call once")
}

// assertMerged checks that the lead's dispatching model call (the model-call span whose
// response asked for the fake's task call id) carries the subagent's usage as
// agentmeter.subagent.*, merged through the task tool span.
func assertMerged(t *testing.T, exported []ptrace.Span, callID string, sub genai.Usage) {
	t.Helper()
	tr := NewSpanTree(exported)
	var dispatch []ptrace.Span
	for _, s := range tr.ByID {
		if !genai.IsModelCallSpan(s.Name(), s.Attributes()) {
			continue // an agent span may repeat its steps' output messages
		}
		// the ids a model call asked for: the contract's list, else its output messages
		// (what subagentmerge reads too)
		ids := genai.StringsFromMap(s.Attributes(), genai.AttrResponseToolCallIDs)
		if len(ids) == 0 {
			ids = genai.ToolCallIDsFromOutputMessages(Str(s, genai.AttrOutputMessages))
		}
		if slices.Contains(ids, callID) {
			dispatch = append(dispatch, s)
		}
	}
	require.Len(t, dispatch, 1, "one dispatching model call names %s (spans: %v)", callID, spanNames(exported))
	merged, ok := genai.SubagentUsageFromMap(dispatch[0].Attributes())
	if !sub.IsZero() {
		require.True(t, ok, "subagentmerge merged the subagent onto %q: %s", dispatch[0].Name(), attrsString(dispatch[0].Attributes()))
	}
	assert.Equal(t, sub, merged, "merged usage = what the subagent's calls reported")
	var tools []ptrace.Span
	for _, s := range tr.ByID {
		if Str(s, genai.AttrToolCallID) == callID && Str(s, genai.AttrOperationName) == genai.OpExecuteTool {
			tools = append(tools, s)
		}
	}
	require.Len(t, tools, 1, "one execute_tool span for %s", callID)
	assert.Equal(t, genai.MergeMerged, Str(tools[0], genai.AttrMergeStatus))
}

func usageByType(u genai.Usage) map[string]float64 {
	return dropZeros(map[string]float64{
		"input": float64(u.Input), "output": float64(u.Output), "cache_read": float64(u.CacheRead),
		"cache_creation": float64(u.CacheCreation), "reasoning": float64(u.Reasoning),
	})
}

func usageSum(u genai.Usage) float64 {
	return float64(u.Input + u.Output + u.CacheRead + u.CacheCreation + u.Reasoning)
}

// runAndAssert runs c and checks what the collector made of it against what the fake
// served (through c.passesOn): the Prometheus totals, the merge and the split.
func runAndAssert(t *testing.T, c interopCase) {
	model, raw, exported, prom := runInterop(t, c)
	var lead, sub genai.Usage
	var callID string
	for _, call := range model.Calls() {
		if call.ToolCallID != "" {
			callID = call.ToolCallID
		}
		u := call.Usage
		if !call.UsageSent {
			u = genai.Usage{}
		}
		if c.passesOn != nil {
			u = c.passesOn(t, call, raw)
		}
		if call.Subagent {
			sub = sub.Add(u)
		} else {
			lead = lead.Add(u)
		}
	}
	require.NotEmpty(t, callID, "the fake answered the lead with a task call")
	// the row docs/compatibility.md is written from (go test -v)
	t.Logf("interop %s: served %+v; passed on: lead %+v, subagent %+v", c.script, model.Served(nil), lead, sub)
	assertCounted(t, prom, lead, sub)
	assertMerged(t, exported, callID, sub)
	// one agent-run span per agent, whatever the library names its spans (the AI SDK's
	// legacy ai.generateText, OpenLLMetry's <name>.agent): no graph node or step counts
	var agents []string
	for _, s := range exported {
		if Str(s, genai.AttrOperationName) == genai.OpInvokeAgent {
			agents = append(agents, Str(s, genai.AttrAgentName))
		}
	}
	assert.ElementsMatch(t, []string{"lead_agent", "researcher"}, agents, "one invoke_agent span per agent run")
}

// only keeps the listed usage kinds of u (a library that passes on only some).
func only(u genai.Usage, input, output, cacheRead, reasoning bool) genai.Usage {
	var out genai.Usage
	if input {
		out.Input = u.Input
	}
	if output {
		out.Output = u.Output
	}
	if cacheRead {
		out.CacheRead = u.CacheRead
	}
	if reasoning {
		out.Reasoning = u.Reasoning
	}
	return out
}

// rawModelCall finds the one received span of a model call to model (by
// gen_ai.request.model or llm.model_name).
func rawModelCall(t *testing.T, raw []ptrace.Span, model string) ptrace.Span {
	t.Helper()
	var found []ptrace.Span
	for _, s := range raw {
		if Str(s, genai.AttrRequestModel) == model || Str(s, "llm.model_name") == model {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "one received model call to %s", model)
	return found[0]
}

// subModel is the subagent's model in test/interop/common.mjs.
const subModel = "gpt-4o-mini"

// OpenLLMetry (@traceloop/node-server-sdk 0.27.0) instrumenting openai 7.55.0. It reads
// input and output tokens only (no cached, no reasoning), and for a streamed call it
// records its own token estimate instead of the usage chunk the server sent.
func TestInteropOpenLLMetry(t *testing.T) {
	runAndAssert(t, interopCase{script: "openllmetry.mjs", fixture: "openllmetry", rawSpans: 7,
		passesOn: func(t *testing.T, c ServedCall, raw []ptrace.Span) genai.Usage {
			if !c.Stream {
				return only(c.Usage, true, true, false, false)
			}
			s := rawModelCall(t, raw, subModel)
			est := genai.Usage{Input: Int(s, genai.AttrUsageInput), Output: Int(s, genai.AttrUsageOutput)}
			assert.NotEqual(t, only(c.Usage, true, true, false, false), est,
				"OpenLLMetry now passes the streamed usage on: update docs/compatibility.md and this test")
			return est
		}})
}

// OpenInference (@arizeai/openinference-instrumentation-openai 4.2.7) instrumenting
// openai 7.55.0, agents and tool traced with openinference-core. Every usage kind of a
// non-streamed call; a streamed call's span carries no usage at all.
func TestInteropOpenInference(t *testing.T) {
	runAndAssert(t, interopCase{script: "openinference.mjs", fixture: "openinference", rawSpans: 6,
		passesOn: func(t *testing.T, c ServedCall, raw []ptrace.Span) genai.Usage {
			if c.Stream {
				_, has := rawModelCall(t, raw, subModel).Attributes().Get("llm.token_count.prompt")
				assert.False(t, has, "OpenInference now records streamed usage: update docs/compatibility.md and this test")
				return genai.Usage{}
			}
			return c.Usage
		}})
}

// The Vercel AI SDK (ai 7.0.173, @ai-sdk/openai 4.0.118) with the @ai-sdk/otel 1.0.173
// OpenTelemetry integration: input, output and cached tokens on each chat span (reasoning
// only with its `usage` option), and the sum of the steps again on each invoke_agent span.
func TestInteropAISDKOTel(t *testing.T) {
	runAndAssert(t, interopCase{script: "aisdk-otel.mjs", fixture: "aisdk-otel", rawSpans: 9,
		passesOn: func(t *testing.T, c ServedCall, raw []ptrace.Span) genai.Usage {
			return only(c.Usage, true, true, true, false)
		}})
}

// The same with the integration's `usage` option on: reasoning tokens arrive too (as
// ai.usage.outputTokenDetails.reasoningTokens), so every served kind is counted.
func TestInteropAISDKOTelUsageOption(t *testing.T) {
	runAndAssert(t, interopCase{script: "aisdk-otel.mjs", env: []string{"AISDK_OTEL_USAGE=1"}, fixture: "aisdk-otel-usage", rawSpans: 9})
}

// The Vercel AI SDK's legacy telemetry (@ai-sdk/otel LegacyOpenTelemetry, ai.* spans):
// every usage kind on the doGenerate/doStream spans, sums again on the outer
// ai.generateText/ai.streamText spans.
func TestInteropAISDKLegacy(t *testing.T) {
	runAndAssert(t, interopCase{script: "aisdk-legacy.mjs", fixture: "aisdk-legacy", rawSpans: 6})
}

// LangChain.js 1.5.14 / LangGraph 1.7.3 (@langchain/openai 1.6.0) traced by the
// LangSmith SDK 0.12.0 into the agentusage receiver's LangSmith face.
func TestInteropLangChainLangSmith(t *testing.T) {
	runAndAssert(t, interopCase{script: "langchain-langsmith.mjs", fixture: "langchain-langsmith", rawSpans: 14})
}

// The same with the subagent invoked with the tool's run config: every run inside it
// inherits lc_agent_name "lead_agent"; the subagent is still one agent run, named after
// its own run.
func TestInteropLangChainLangSmithConfigPassed(t *testing.T) {
	runAndAssert(t, interopCase{script: "langchain-langsmith.mjs", env: []string{"INTEROP_PASS_CONFIG=1"},
		fixture: "langchain-langsmith-config-passed", rawSpans: 14})
}

// LangChain.js / LangGraph traced by @langfuse/langchain + @langfuse/otel 5.11.1 into the
// agentusage receiver's Langfuse face.
func TestInteropLangChainLangfuse(t *testing.T) {
	runAndAssert(t, interopCase{script: "langchain-langfuse.mjs", fixture: "langchain-langfuse", rawSpans: 14})
}

// The same with the subagent invoked with the tool's run config (see
// TestInteropLangChainLangSmithConfigPassed).
func TestInteropLangChainLangfuseConfigPassed(t *testing.T) {
	runAndAssert(t, interopCase{script: "langchain-langfuse.mjs", env: []string{"INTEROP_PASS_CONFIG=1"},
		fixture: "langchain-langfuse-config-passed", rawSpans: 14})
}

// The same with the Langfuse SDK exporting every span on its own as it ends
// (LANGFUSE_FLUSH_AT=1), as a long run's batches do: the subagent's spans reach the
// receiver before the task span that dispatched them, so the face cannot attribute
// them; the merge does, from the whole trace.
func TestInteropLangChainLangfuseSpanBySpan(t *testing.T) {
	runAndAssert(t, interopCase{script: "langchain-langfuse.mjs", env: []string{"LANGFUSE_FLUSH_AT=1"},
		fixture: "langchain-langfuse-span-by-span", rawSpans: 14})
}
