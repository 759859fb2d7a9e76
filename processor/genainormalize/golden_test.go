package genainormalize

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

var update = flag.Bool("update", false, "rewrite testdata/<case>/{input,expected}.yaml from the builders and the processor")

// goldenCase is one library's trace, written from its documented attribute set, and the
// usage a reader can check by hand: what the model calls reported (served), summed over
// the spans genai.IsModelCallSpan counts after normalisation.
type goldenCase struct {
	name   string
	build  func() ptrace.Traces
	served genai.Usage
}

var goldenCases = []goldenCase{
	{"semconv_v141", buildSemconv, genai.Usage{Input: 1300, Output: 60, CacheRead: 1000, CacheCreation: 200, Reasoning: 8}},
	{"semconv_legacy", buildSemconvLegacy, genai.Usage{Input: 150, Output: 30}},
	{"openllmetry", buildOpenLLMetry, genai.Usage{Input: 1778, Output: 45, CacheRead: 900, CacheCreation: 100}},
	{"openinference", buildOpenInference, genai.Usage{Input: 878, Output: 60, CacheRead: 512, Reasoning: 16}},
	{"ai_sdk_legacy", buildAISDKLegacy, genai.Usage{Input: 778, Output: 60, CacheRead: 512, Reasoning: 16}},
	{"ai_sdk_otel", buildAISDKOtel, genai.Usage{Input: 678, Output: 40, CacheRead: 512}},
	{"langchain", buildLangChain, genai.Usage{Input: 120, Output: 12, CacheRead: 64, Reasoning: 5}},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", tc.name)
			if *update {
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, golden.WriteTracesToFile(filepath.Join(dir, "input.yaml"), tc.build()))
			}
			in, err := golden.ReadTraces(filepath.Join(dir, "input.yaml"))
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(tc.build(), in), "builder and input.yaml disagree: run with -update")
			out := run(t, in)
			if *update {
				require.NoError(t, golden.WriteTracesToFile(filepath.Join(dir, "expected.yaml"), out))
			}
			want, err := golden.ReadTraces(filepath.Join(dir, "expected.yaml"))
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(want, out))
			assert.Equal(t, tc.served, modelCallUsage(out), "own usage of model-call spans = what was served")
		})
	}
}

// run sends td through a processor built by the factory with the default config.
func run(t *testing.T, td ptrace.Traces) ptrace.Traces {
	t.Helper()
	sink := new(consumertest.TracesSink)
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), createDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.ConsumeTraces(context.Background(), td))
	require.NoError(t, p.Shutdown(context.Background()))
	require.Len(t, sink.AllTraces(), 1)
	return sink.AllTraces()[0]
}

// modelCallUsage is what the merge and the token metrics count: the own usage of every
// model-call span, read through the contract keys only.
func modelCallUsage(td ptrace.Traces) genai.Usage {
	var sum genai.Usage
	for sp := range spaniter.All(td) {
		if !genai.IsModelCallSpan(sp.Name(), sp.Attributes()) {
			continue
		}
		if u, ok := genai.UsageFromMap(sp.Attributes()); ok {
			sum = sum.Add(u)
		}
	}
	return sum
}

// --- the cases, one per convention, from each library's documented attributes ---

// GenAI semconv v1.41 with the newer cache_write name and an agent span that repeats the
// sum of its calls (which semconv allows): the calls are counted, the sum is not.
func buildSemconv() ptrace.Traces {
	f := newFixture(1, "semconv-app", "opentelemetry.instrumentation.genai", "0.1.0")
	agent := f.span(root, "invoke_agent planner", internal, "gen_ai.operation.name", "invoke_agent", "gen_ai.agent.name", "planner",
		"gen_ai.usage.input_tokens", 1300, "gen_ai.usage.output_tokens", 60)
	f.span(agent, "chat claude-sonnet-4", client, "gen_ai.operation.name", "chat", "gen_ai.provider.name", "anthropic",
		"gen_ai.request.model", "claude-sonnet-4", "gen_ai.usage.input_tokens", 1200, "gen_ai.usage.output_tokens", 40,
		"gen_ai.usage.cache_read.input_tokens", 1000, "gen_ai.usage.cache_write.input_tokens", 200)
	f.span(agent, "chat gpt-5-mini", client, "gen_ai.operation.name", "chat", "gen_ai.provider.name", "openai",
		"gen_ai.request.model", "gpt-5-mini", "gen_ai.usage.input_tokens", 100, "gen_ai.usage.output_tokens", 20,
		"gen_ai.usage.reasoning.output_tokens", 8)
	return f.td
}

// Older semconv: gen_ai.system and prompt/completion token names, no operation name.
func buildSemconvLegacy() ptrace.Traces {
	f := newFixture(2, "legacy-app", "opentelemetry.instrumentation.openai_v2", "2.0b0")
	f.span(root, "chat gpt-4o", client, "gen_ai.system", "openai", "gen_ai.request.model", "gpt-4o", "gen_ai.response.model", "gpt-4o-2024-08-06",
		"gen_ai.usage.prompt_tokens", 150, "gen_ai.usage.completion_tokens", 30)
	return f.td
}

// OpenLLMetry: a workflow span (no usage), the JS SDK 0.27 OpenAI instrumentation
// (semconv names plus gen_ai.usage.total_tokens), the older names (llm.request.type,
// prompt/completion tokens, llm.usage.total_tokens, flat cache keys), and its 0.27
// Anthropic instrumentation, which reported input without cache tokens.
func buildOpenLLMetry() ptrace.Traces {
	f := newFixture(3, "openllmetry-app", "@traceloop/instrumentation-openai", "0.27.0")
	wf := f.span(root, "lead.workflow", internal, "traceloop.span.kind", "workflow", "traceloop.entity.name", "lead")
	f.span(wf, "chat gpt-4o-mini", client, "gen_ai.operation.name", "chat", "gen_ai.provider.name", "openai",
		"gen_ai.request.model", "gpt-4o-mini", "gen_ai.response.model", "gpt-4o-mini-2024-07-18",
		"gen_ai.usage.input_tokens", 678, "gen_ai.usage.output_tokens", 40, "gen_ai.usage.total_tokens", 718)
	f.span(wf, "anthropic.chat", client, "llm.request.type", "chat", "gen_ai.system", "Anthropic", "gen_ai.request.model", "claude-3-haiku",
		"gen_ai.usage.prompt_tokens", 600, "gen_ai.usage.completion_tokens", 3, "llm.usage.total_tokens", 603,
		"gen_ai.usage.cache_read_input_tokens", 500)
	tool := f.span(wf, "search.tool", internal, "traceloop.span.kind", "tool", "traceloop.entity.name", "search")
	_ = tool
	// the Anthropic instrumentation is its own scope
	ss := f.td.ResourceSpans().At(0).ScopeSpans().AppendEmpty()
	ss.Scope().SetName("@traceloop/instrumentation-anthropic")
	ss.Scope().SetVersion("0.27.0")
	g := &fixture{td: f.td, spans: ss.Spans(), tid: f.tid, n: f.n}
	g.span(wf, "chat claude-sonnet-4", client, "gen_ai.operation.name", "chat", "gen_ai.provider.name", "anthropic",
		"gen_ai.request.model", "claude-sonnet-4", "gen_ai.usage.input_tokens", 0, "gen_ai.usage.output_tokens", 2,
		"gen_ai.usage.cache_read.input_tokens", 400, "gen_ai.usage.cache_creation.input_tokens", 100)
	return f.td
}

// OpenInference (openai instrumentation 4.x, LangChain instrumentation): an AGENT span, a
// CHAIN span repeating the sum, LLM spans with llm.* counts (prompt includes cached), a
// TOOL span with its call id, and a subagent LLM call under it.
func buildOpenInference() ptrace.Traces {
	f := newFixture(4, "openinference-app", "@arizeai/openinference-instrumentation-openai", "4.2.7")
	agent := f.span(root, "lead", internal, "openinference.span.kind", "AGENT", "agent.name", "lead")
	chain := f.span(agent, "RunnableSequence", internal, "openinference.span.kind", "CHAIN",
		"llm.token_count.prompt", 878, "llm.token_count.completion", 60, "llm.token_count.total", 938)
	f.span(chain, "OpenAI Chat Completions", internal, "openinference.span.kind", "LLM", "llm.model_name", "gpt-4o-mini-2024-07-18",
		"llm.system", "openai", "llm.token_count.prompt", 678, "llm.token_count.completion", 40, "llm.token_count.total", 718,
		"llm.token_count.prompt_details.cache_read", 512, "llm.token_count.completion_details.reasoning", 16,
		"llm.output_messages.0.message.role", "assistant",
		"llm.output_messages.0.message.tool_calls.0.tool_call.id", "call_task_1",
		"llm.output_messages.0.message.tool_calls.0.tool_call.function.name", "task")
	tool := f.span(chain, "task", internal, "openinference.span.kind", "TOOL", "tool.name", "task", "tool_call.id", "call_task_1")
	sub := f.span(tool, "researcher", internal, "openinference.span.kind", "AGENT", "agent.name", "researcher")
	f.span(sub, "OpenAI Chat Completions", internal, "openinference.span.kind", "LLM", "llm.model_name", "gpt-4o-mini-2024-07-18",
		"llm.system", "openai", "llm.provider", "openai", "llm.token_count.prompt", 200, "llm.token_count.completion", 20, "llm.token_count.total", 220)
	return f.td
}

// Vercel AI SDK legacy telemetry: ai.generateText with the step sums, its doGenerate
// provider calls (ai.usage.* with input/output token details), an ai.toolCall running a
// subagent's ai.generateText.
func buildAISDKLegacy() ptrace.Traces {
	f := newFixture(5, "ai-sdk-app", "ai", "7.0.173")
	outer := f.span(root, "ai.generateText", internal, "ai.operationId", "ai.generateText", "operation.name", "ai.generateText lead",
		"ai.telemetry.functionId", "lead", "ai.model.id", "gpt-4o-mini", "ai.model.provider", "openai.chat",
		"ai.usage.inputTokens", 878, "ai.usage.outputTokens", 60, "ai.usage.totalTokens", 938)
	f.span(outer, "ai.generateText.doGenerate", client, "ai.operationId", "ai.generateText.doGenerate",
		"ai.model.id", "gpt-4o-mini", "ai.model.provider", "openai.chat", "gen_ai.system", "openai.chat",
		"gen_ai.request.model", "gpt-4o-mini", "gen_ai.response.model", "gpt-4o-mini-2024-07-18",
		"ai.response.model", "gpt-4o-mini-2024-07-18",
		"ai.usage.inputTokens", 678, "ai.usage.outputTokens", 40, "ai.usage.totalTokens", 718,
		"ai.usage.inputTokenDetails.noCacheTokens", 166, "ai.usage.inputTokenDetails.cacheReadTokens", 512, "ai.usage.cachedInputTokens", 512,
		"ai.usage.outputTokenDetails.textTokens", 24, "ai.usage.outputTokenDetails.reasoningTokens", 16, "ai.usage.reasoningTokens", 16,
		"ai.response.toolCalls", `[{"toolCallId":"call_task_1","toolName":"task","input":"{\"prompt\":\"look it up\"}"}]`)
	tool := f.span(outer, "ai.toolCall", internal, "ai.operationId", "ai.toolCall", "ai.toolCall.name", "task", "ai.toolCall.id", "call_task_1")
	sub := f.span(tool, "ai.generateText", internal, "ai.operationId", "ai.generateText", "ai.telemetry.functionId", "researcher",
		"ai.usage.inputTokens", 100, "ai.usage.outputTokens", 20)
	f.span(sub, "ai.generateText.doGenerate", client, "ai.operationId", "ai.generateText.doGenerate",
		"ai.model.id", "gpt-4o-mini", "ai.model.provider", "openai.chat", "gen_ai.system", "openai.chat",
		"ai.usage.inputTokens", 100, "ai.usage.outputTokens", 20)
	return f.td
}

// Vercel AI SDK OpenTelemetry integration (@ai-sdk/otel): semconv-shaped invoke_agent
// root with the total usage, agent_step spans, chat spans with own usage, execute_tool.
// It writes no reasoning key, so reasoning is not counted (the library's gap).
func buildAISDKOtel() ptrace.Traces {
	f := newFixture(6, "ai-sdk-otel-app", "gen_ai", "")
	agent := f.span(root, "invoke_agent gpt-4o-mini", internal, "gen_ai.operation.name", "invoke_agent", "gen_ai.provider.name", "openai",
		"gen_ai.request.model", "gpt-4o-mini", "gen_ai.usage.input_tokens", 678, "gen_ai.usage.output_tokens", 40,
		"gen_ai.usage.cache_read.input_tokens", 512)
	step := f.span(agent, "step 1", internal, "gen_ai.operation.name", "agent_step")
	f.span(step, "chat gpt-4o-mini", client, "gen_ai.operation.name", "chat", "gen_ai.provider.name", "openai",
		"gen_ai.request.model", "gpt-4o-mini", "gen_ai.response.model", "gpt-4o-mini-2024-07-18",
		"gen_ai.usage.input_tokens", 678, "gen_ai.usage.output_tokens", 40, "gen_ai.usage.cache_read.input_tokens", 512)
	f.span(step, "execute_tool search", internal, "gen_ai.operation.name", "execute_tool", "gen_ai.tool.name", "search",
		"gen_ai.tool.call.id", "call_1", "gen_ai.tool.type", "function")
	return f.td
}

// LangChain through LangSmith's OpenTelemetry export: operation names from run types
// (llm → chat, chain → chain), a gen_ai.system guessed from the model name ("langchain"
// when it has no guess), provider and model in the run metadata, usage on the model run
// with its details as JSON, and the sum on the chain run above it.
func buildLangChain() ptrace.Traces {
	f := newFixture(7, "langchain-app", "langsmith", "0.12.0")
	chain := f.span(root, "LangGraph", internal, "langsmith.span.kind", "chain", "gen_ai.operation.name", "chain",
		"gen_ai.system", "langchain", "gen_ai.usage.input_tokens", 120, "gen_ai.usage.output_tokens", 12)
	f.span(chain, "ChatOpenAI", client, "langsmith.span.kind", "llm", "gen_ai.operation.name", "chat", "gen_ai.system", "langchain",
		"langsmith.metadata.ls_provider", "openai", "langsmith.metadata.ls_model_name", "gpt-4o-mini",
		"gen_ai.usage.input_tokens", 120, "gen_ai.usage.output_tokens", 12, "gen_ai.usage.total_tokens", 132,
		"gen_ai.usage.input_token_details", `{"audio":0,"cache_read":64}`, "gen_ai.usage.output_token_details", `{"audio":0,"reasoning":5}`)
	return f.td
}
