package genainormalize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// normalizeOne runs one span with the given name and attributes through the default
// normaliser and returns its attributes afterwards.
func normalizeOne(t *testing.T, name, scope, version string, kv ...any) map[string]any {
	t.Helper()
	f := newFixture(1, "svc", scope, version)
	f.span(root, name, client, kv...)
	n := normalizer{convs: createDefaultConfig().mask()}
	n.traces(f.td)
	return f.spans.At(0).Attributes().AsRaw()
}

func TestSpanRules(t *testing.T) {
	cases := []struct {
		name, span, scope, version string
		in                         []any
		want                       map[string]any // keys the normaliser adds or changes
		absent                     []string       // keys that must not appear
	}{
		{
			name: "contract span is left alone", span: "chat gpt-4o",
			in:   []any{"gen_ai.operation.name", "chat", "gen_ai.provider.name", "openai", "gen_ai.usage.input_tokens", 10, "gen_ai.usage.output_tokens", 2},
			want: map[string]any{},
		},
		{
			name: "older semconv names", span: "chat gpt-4o",
			in: []any{"gen_ai.system", "openai", "gen_ai.usage.prompt_tokens", 100, "gen_ai.usage.completion_tokens", 20, "gen_ai.request.model", "gpt-4o"},
			want: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
				"gen_ai.usage.input_tokens": int64(100), "gen_ai.usage.output_tokens": int64(20)},
		},
		{
			name: "semconv wins over a foreign key", span: "chat gpt-4o",
			in:   []any{"gen_ai.operation.name", "chat", "gen_ai.usage.input_tokens", 7, "gen_ai.usage.prompt_tokens", 99, "gen_ai.provider.name", "anthropic", "gen_ai.system", "openai"},
			want: map[string]any{},
		},
		{
			name: "newer cache_write name is copied to cache_creation", span: "chat claude",
			in:   []any{"gen_ai.operation.name", "chat", "gen_ai.usage.input_tokens", 500, "gen_ai.usage.output_tokens", 5, "gen_ai.usage.cache_write.input_tokens", 300},
			want: map[string]any{"gen_ai.usage.cache_creation.input_tokens": int64(300)},
		},
		{
			name: "no usage in, no usage out", span: "chat gpt-4o",
			in:     []any{"gen_ai.operation.name", "chat", "gen_ai.system", "openai"},
			want:   map[string]any{"gen_ai.provider.name": "openai"},
			absent: []string{genai.AttrUsageInput, genai.AttrUsageOutput},
		},
		{
			name: "openllmetry request type, flat cache keys", span: "anthropic.chat",
			in: []any{"llm.request.type", "chat", "gen_ai.system", "Anthropic", "gen_ai.usage.prompt_tokens", 1200, "gen_ai.usage.completion_tokens", 30,
				"llm.usage.total_tokens", 1230, "gen_ai.usage.cache_read_input_tokens", 900, "gen_ai.usage.cache_creation_input_tokens", 200},
			want: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
				"gen_ai.usage.input_tokens": int64(1200), "gen_ai.usage.output_tokens": int64(30),
				"gen_ai.usage.cache_read.input_tokens": int64(900), "gen_ai.usage.cache_creation.input_tokens": int64(200)},
		},
		{
			name: "openllmetry completion request", span: "openai.completion",
			in:   []any{"llm.request.type", "completion", "gen_ai.usage.prompt_tokens", 3, "gen_ai.usage.completion_tokens", 4},
			want: map[string]any{"gen_ai.operation.name": "text_completion", "gen_ai.usage.input_tokens": int64(3), "gen_ai.usage.output_tokens": int64(4)},
		},
		{
			name: "input smaller than its cache parts is made inclusive", span: "chat claude",
			in: []any{"gen_ai.operation.name", "chat", "gen_ai.usage.input_tokens", 100, "gen_ai.usage.output_tokens", 5,
				"gen_ai.usage.cache_read.input_tokens", 900, "gen_ai.usage.cache_creation.input_tokens", 200},
			want: map[string]any{"gen_ai.usage.input_tokens": int64(1200), "agentmeter.usage.reported_input_tokens": int64(100)},
		},
		{
			name: "openllmetry-js anthropic 0.27 reports exclusive input", span: "chat claude-sonnet-4",
			scope: "@traceloop/instrumentation-anthropic", version: "0.27.0",
			in: []any{"gen_ai.operation.name", "chat", "gen_ai.provider.name", "anthropic", "gen_ai.usage.input_tokens", 1000, "gen_ai.usage.output_tokens", 5,
				"gen_ai.usage.cache_read.input_tokens", 400},
			want: map[string]any{"gen_ai.usage.input_tokens": int64(1400), "agentmeter.usage.reported_input_tokens": int64(1000)},
		},
		{
			name: "a later openllmetry-js anthropic is inclusive", span: "chat claude-sonnet-4",
			scope: "@traceloop/instrumentation-anthropic", version: "0.28.0",
			in: []any{"gen_ai.operation.name", "chat", "gen_ai.usage.input_tokens", 1400, "gen_ai.usage.output_tokens", 5,
				"gen_ai.usage.cache_read.input_tokens", 400},
			want: map[string]any{},
		},
		{
			name: "already adjusted input is not adjusted again", span: "chat claude-sonnet-4",
			scope: "@traceloop/instrumentation-anthropic", version: "0.27.0",
			in: []any{"gen_ai.operation.name", "chat", "gen_ai.usage.input_tokens", 1400, "agentmeter.usage.reported_input_tokens", 1000,
				"gen_ai.usage.cache_read.input_tokens", 400},
			want: map[string]any{},
		},
		{
			name: "reasoning larger than output is made inclusive", span: "generate_content gemini",
			in:   []any{"gen_ai.usage.input_tokens", 10, "gen_ai.usage.output_tokens", 20, "gen_ai.usage.reasoning.output_tokens", 50},
			want: map[string]any{"gen_ai.operation.name": "generate_content", "gen_ai.usage.output_tokens": int64(70), "agentmeter.usage.reported_output_tokens": int64(20)},
		},
		{
			name: "openinference LLM span", span: "OpenAI Chat Completions",
			in: []any{"openinference.span.kind", "LLM", "llm.model_name", "gpt-4o-mini-2024-07-18", "llm.system", "openai",
				"llm.token_count.prompt", 678, "llm.token_count.completion", 40, "llm.token_count.total", 718,
				"llm.token_count.prompt_details.cache_read", 512, "llm.token_count.completion_details.reasoning", 16,
				"llm.output_messages.0.message.tool_calls.0.tool_call.id", "call_1", "llm.output_messages.0.message.tool_calls.1.tool_call.id", "call_2"},
			want: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini-2024-07-18",
				"gen_ai.usage.input_tokens": int64(678), "gen_ai.usage.output_tokens": int64(40),
				"gen_ai.usage.cache_read.input_tokens": int64(512), "gen_ai.usage.reasoning.output_tokens": int64(16),
				"agentmeter.response.tool_call_ids": []any{"call_1", "call_2"}},
		},
		{
			name: "openinference llm.provider wins over llm.system", span: "OpenAI Chat Completions",
			in:   []any{"openinference.span.kind", "LLM", "llm.provider", "azure", "llm.system", "openai"},
			want: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "azure.ai.openai"},
		},
		{
			name: "openinference CHAIN sums stay as sent", span: "RunnableSequence",
			in:     []any{"openinference.span.kind", "CHAIN", "llm.token_count.prompt", 678, "llm.token_count.completion", 40},
			want:   map[string]any{},
			absent: []string{genai.AttrUsageInput, genai.AttrOperationName},
		},
		{
			name: "openinference TOOL span", span: "task",
			in:   []any{"openinference.span.kind", "TOOL", "tool.name", "task", "tool_call.id", "call_1"},
			want: map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "task", "gen_ai.tool.call.id": "call_1"},
		},
		{
			name: "openinference AGENT span", span: "researcher",
			in:   []any{"openinference.span.kind", "AGENT", "agent.name", "researcher"},
			want: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"},
		},
		{
			name: "ai sdk doGenerate", span: "ai.generateText.doGenerate",
			in: []any{"ai.operationId", "ai.generateText.doGenerate", "ai.model.id", "gpt-4o-mini", "ai.model.provider", "openai.chat",
				"ai.response.model", "gpt-4o-mini-2024-07-18", "ai.usage.inputTokens", 678, "ai.usage.outputTokens", 40,
				"ai.usage.inputTokenDetails.cacheReadTokens", 512, "ai.usage.cachedInputTokens", 512,
				"ai.usage.outputTokenDetails.reasoningTokens", 16, "ai.usage.reasoningTokens", 16,
				"ai.response.toolCalls", `[{"toolCallId":"call_1","toolName":"task","input":"{}"}]`},
			want: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
				"gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
				"gen_ai.usage.input_tokens": int64(678), "gen_ai.usage.output_tokens": int64(40),
				"gen_ai.usage.cache_read.input_tokens": int64(512), "gen_ai.usage.reasoning.output_tokens": int64(16),
				"agentmeter.response.tool_call_ids": []any{"call_1"}},
		},
		{
			name: "ai sdk v4 prompt/completion tokens, gen_ai.system provider id", span: "ai.streamText.doStream",
			in: []any{"ai.operationId", "ai.streamText.doStream", "gen_ai.system", "anthropic.messages", "gen_ai.request.model", "claude-3-5-haiku",
				"ai.usage.promptTokens", 12, "ai.usage.completionTokens", 3},
			want: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
				"gen_ai.usage.input_tokens": int64(12), "gen_ai.usage.output_tokens": int64(3)},
		},
		{
			name: "ai sdk outer span keeps its sums", span: "ai.generateText",
			in:     []any{"ai.operationId", "ai.generateText", "ai.telemetry.functionId", "researcher", "ai.usage.inputTokens", 1356, "ai.usage.outputTokens", 80},
			want:   map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"},
			absent: []string{genai.AttrUsageInput},
		},
		{
			name: "ai sdk tool call", span: "ai.toolCall",
			in:   []any{"ai.operationId", "ai.toolCall", "ai.toolCall.name", "task", "ai.toolCall.id", "call_1"},
			want: map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "task", "gen_ai.tool.call.id": "call_1"},
		},
		{
			name: "ai sdk otel invoke_agent sums stay as sent", span: "invoke_agent gpt-4o-mini",
			in:   []any{"gen_ai.operation.name", "invoke_agent", "gen_ai.usage.input_tokens", 1356},
			want: map[string]any{},
		},
		{
			name: "langchain metadata through langsmith", span: "ChatOpenAI",
			in: []any{"gen_ai.operation.name", "chat", "langsmith.metadata.ls_provider", "openai", "langsmith.metadata.ls_model_name", "gpt-4o-mini",
				"gen_ai.usage.input_tokens", 9, "gen_ai.usage.output_tokens", 1},
			want: map[string]any{"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini"},
		},
		{
			name: "langsmith otel export: details JSON, ls_provider over its guessed gen_ai.system", span: "ChatAnthropic",
			in: []any{"gen_ai.operation.name", "chat", "langsmith.span.kind", "llm", "gen_ai.system", "langchain",
				"langsmith.metadata.ls_provider", "anthropic", "gen_ai.request.model", "claude-sonnet-4",
				"gen_ai.usage.input_tokens", 1500, "gen_ai.usage.output_tokens", 40, "gen_ai.usage.total_tokens", 1540,
				"gen_ai.usage.input_token_details", `{"cache_read":1000,"cache_creation":300,"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200}`,
				"gen_ai.usage.output_token_details", `{"reasoning":12}`},
			want: map[string]any{"gen_ai.provider.name": "anthropic", "gen_ai.usage.cache_read.input_tokens": int64(1000),
				"gen_ai.usage.cache_creation.input_tokens": int64(300), "agentmeter.usage.cache_creation.ephemeral_1h.input_tokens": int64(200),
				"gen_ai.usage.reasoning.output_tokens": int64(12)},
		},
		{
			name: "langsmith's guessed system langchain is no provider", span: "ChatModel",
			in:     []any{"gen_ai.operation.name", "chat", "gen_ai.system", "langchain"},
			want:   map[string]any{},
			absent: []string{genai.AttrProviderName},
		},
		{
			name: "langchain metadata inside openinference metadata JSON", span: "ChatOpenAI",
			in: []any{"openinference.span.kind", "LLM", "metadata", `{"ls_provider":"openai","ls_model_name":"gpt-4o-mini","langgraph_node":"model"}`,
				"llm.token_count.prompt", 9, "llm.token_count.completion", 1},
			want: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
				"gen_ai.usage.input_tokens": int64(9), "gen_ai.usage.output_tokens": int64(1)},
		},
		{
			name: "counts sent as strings and doubles", span: "chat x",
			in:   []any{"gen_ai.usage.prompt_tokens", "12", "gen_ai.usage.completion_tokens", 3.0},
			want: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": int64(12), "gen_ai.usage.output_tokens": int64(3)},
		},
		{
			name: "a non-numeric count is no count", span: "chat x",
			in:     []any{"gen_ai.usage.prompt_tokens", "many"},
			want:   map[string]any{"gen_ai.operation.name": "chat"},
			absent: []string{genai.AttrUsageInput},
		},
		{
			name: "an http span is left alone", span: "POST /v1/chat/completions",
			in:   []any{"http.request.method", "POST", "gen_ai.usage.prompt_tokens", 5},
			want: map[string]any{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := attrMap(c.in...).AsRaw()
			got := normalizeOne(t, c.span, c.scope, c.version, c.in...)
			want := map[string]any{}
			for k, v := range before {
				want[k] = v
			}
			for k, v := range c.want {
				want[k] = v
			}
			assert.Equal(t, want, got)
			for _, k := range c.absent {
				assert.NotContains(t, got, k)
			}
		})
	}
}

// Every convention left out of the list is not read.
func TestConventionsSwitchOff(t *testing.T) {
	f := newFixture(1, "svc", "", "")
	f.span(root, "OpenAI Chat Completions", client, "openinference.span.kind", "LLM", "llm.token_count.prompt", 5, "gen_ai.system", "openai")
	cfg := &Config{Conventions: []string{ConvSemconv}}
	n := normalizer{convs: cfg.mask()}
	n.traces(f.td)
	got := f.spans.At(0).Attributes().AsRaw()
	assert.Equal(t, "openai", got[genai.AttrProviderName])
	assert.Equal(t, "chat", got[genai.AttrOperationName], "recognising the model call does not depend on the list")
	assert.NotContains(t, got, genai.AttrUsageInput)
}

// Normalising twice changes nothing the second time.
func TestIdempotent(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.name, func(t *testing.T) {
			once := gc.build()
			n := normalizer{convs: createDefaultConfig().mask()}
			n.traces(once)
			twice := ptrace.NewTraces()
			once.CopyTo(twice)
			n.traces(twice)
			assert.Equal(t, rawSpans(once), rawSpans(twice))
		})
	}
}

func TestVersionAtMost(t *testing.T) {
	max := [3]int{0, 27, 0}
	for v, want := range map[string]bool{"0.27.0": true, "v0.26.9": true, "0.27.1": false, "0.28.0": false, "1.0.0": false, "0.27.0-beta.1": true, "": false, "x.y.z": false, "0.27": false} {
		assert.Equal(t, want, versionAtMost(v, max), v)
	}
}

func TestCanonicalProvider(t *testing.T) {
	for in, want := range map[string]string{
		"openai": "openai", "openai.chat": "openai", "openai.responses": "openai", "Anthropic": "anthropic",
		"anthropic.messages": "anthropic", "google.vertex.chat": "gcp.vertex_ai", "google.generative-ai": "gcp.gemini",
		"amazon-bedrock": "aws.bedrock", "aws.bedrock": "aws.bedrock", "az.ai.openai": "azure.ai.openai", "azure": "azure.ai.openai",
		"mistralai": "mistral_ai", "ollama.chat": "ollama", "my-gateway": "my-gateway", " ": "",
	} {
		assert.Equal(t, want, canonicalProvider(in), in)
	}
}

func rawSpans(td ptrace.Traces) []map[string]any {
	var out []map[string]any
	for sp := range spaniter.All(td) {
		out = append(out, sp.Attributes().AsRaw())
	}
	return out
}
