package genainormalize

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// usageKeys are every count key of every convention, contract keys included.
var usageKeys = []string{
	genai.AttrUsageInput, genai.AttrUsageOutput, genai.AttrUsageCacheRead, genai.AttrUsageCacheCreat,
	genai.AttrUsageCacheWrite, genai.AttrUsageReasoning,
	genai.AttrUsagePrompt, genai.AttrUsageCompletion, genai.AttrLLMUsagePrompt, genai.AttrLLMUsageCompletion,
	genai.AttrUsageCacheReadFlat, genai.AttrUsageCacheCreationFlat, genai.AttrUsageReasoningFlat,
	genai.AttrOIPromptTokens, genai.AttrOICompletionTokens, genai.AttrOICacheRead, genai.AttrOICacheWrite, genai.AttrOIReasoning,
	genai.AttrAIInputTokens, genai.AttrAIOutputTokens, genai.AttrAIPromptTokens, genai.AttrAICompletionTokens,
	genai.AttrAICacheReadTokens, genai.AttrAICachedInputTokens, genai.AttrAICacheWriteTokens,
	genai.AttrAIOutputReasoning, genai.AttrAIReasoningTokens,
}

var contractUsageKeys = []string{
	genai.AttrUsageInput, genai.AttrUsageOutput, genai.AttrUsageCacheRead, genai.AttrUsageCacheCreat, genai.AttrUsageReasoning,
}

// spanShapes are model calls and non-model spans of each convention.
var spanShapes = []struct {
	name  string
	kv    []any
	model bool
}{
	{"chat gpt-4o", []any{"gen_ai.operation.name", "chat"}, true},
	{"chat gpt-4o", nil, true},
	{"OpenAI Chat Completions", []any{"openinference.span.kind", "LLM"}, true},
	{"ai.streamText.doStream", []any{"ai.operationId", "ai.streamText.doStream"}, true},
	{"openai.chat", []any{"llm.request.type", "chat"}, true},
	{"invoke_agent lead", []any{"gen_ai.operation.name", "invoke_agent"}, false},
	{"step 1", []any{"gen_ai.operation.name", "agent_step"}, false},
	{"RunnableSequence", []any{"openinference.span.kind", "CHAIN"}, false},
	{"ai.generateText", []any{"ai.operationId", "ai.generateText"}, false},
	{"lead.workflow", []any{"traceloop.span.kind", "workflow"}, false},
}

func TestNormalizeProperties(t *testing.T) {
	n := normalizer{convs: createDefaultConfig().mask()}
	for seed := uint64(1); seed <= 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 41))
		shape := spanShapes[r.IntN(len(spanShapes))]
		kv := append([]any{}, shape.kv...)
		for _, k := range usageKeys {
			if r.IntN(4) == 0 {
				kv = append(kv, k, r.IntN(2000))
			}
		}
		scope := ""
		if r.IntN(4) == 0 {
			scope = genai.TraceloopAnthropicScope
		}
		f := newFixture(seed, "svc", scope, "0.27.0")
		f.span(root, shape.name, client, kv...)
		in := f.spans.At(0).Attributes().AsRaw()
		n.traces(f.td)
		sp := f.spans.At(0)
		out := sp.Attributes().AsRaw()
		require.Equal(t, shape.model, genai.IsModelCallSpan(sp.Name(), sp.Attributes()), "seed %d", seed)

		// every key that came in is still there; only input and output may change
		for k, v := range in {
			if k == genai.AttrUsageInput || k == genai.AttrUsageOutput {
				continue
			}
			assert.Equal(t, v, out[k], "seed %d: %s changed", seed, k)
		}
		if !shape.model {
			for _, k := range contractUsageKeys {
				assert.Equal(t, in[k], out[k], "seed %d: %s on a %s span", seed, k, shape.name)
			}
			continue
		}

		anyUsage := false
		for _, k := range usageKeys {
			if _, ok := in[k]; ok {
				anyUsage = true
			}
		}
		u, has := genai.UsageFromMap(sp.Attributes())
		if !anyUsage {
			assert.False(t, has, "seed %d: usage invented", seed)
			continue
		}
		// the contract's inclusive semantics hold afterwards
		if _, ok := out[genai.AttrUsageInput]; ok {
			assert.GreaterOrEqual(t, u.Input, u.CacheRead+u.CacheCreation, "seed %d: input includes its cache parts", seed)
		}
		if _, ok := out[genai.AttrUsageOutput]; ok {
			assert.GreaterOrEqual(t, u.Output, u.Reasoning, "seed %d: output includes reasoning", seed)
		}
		// a contract count that came in is kept, or adjusted with the reported value kept
		if v, ok := in[genai.AttrUsageInput]; ok && out[genai.AttrUsageInput] != v {
			assert.Equal(t, v, out[genai.AttrUsageReportedInput], "seed %d", seed)
		}
		if v, ok := in[genai.AttrUsageOutput]; ok && out[genai.AttrUsageOutput] != v {
			assert.Equal(t, v, out[genai.AttrUsageReportedOutput], "seed %d", seed)
		}

		// idempotent
		again := ptrace.NewTraces()
		f.td.CopyTo(again)
		n.traces(again)
		assert.Equal(t, out, again.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw(), "seed %d: second pass", seed)
	}
}
