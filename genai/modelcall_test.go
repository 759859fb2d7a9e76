package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestIsModelCallSpan(t *testing.T) {
	attrs := func(kv ...string) pcommon.Map {
		m := pcommon.NewMap()
		for i := 0; i+1 < len(kv); i += 2 {
			m.PutStr(kv[i], kv[i+1])
		}
		return m
	}
	cases := []struct {
		name  string
		span  string
		attrs pcommon.Map
		want  bool
	}{
		{"semconv chat", "chat gpt-4o", attrs(AttrOperationName, OpChat), true},
		{"chat by span name", "chat gpt-4o", attrs(), true},
		{"text_completion", "x", attrs(AttrOperationName, OpTextCompletion), true},
		{"generate_content", "generate_content gemini", attrs(), true},
		{"invoke_agent with usage sums", "invoke_agent lead", attrs(AttrOperationName, OpInvokeAgent), false},
		{"execute_tool", "execute_tool task", attrs(), false},
		{"operation wins over openinference", "x", attrs(AttrOperationName, OpInvokeAgent, AttrOpenInferenceSpanKind, "LLM"), false},
		{"openinference LLM", "ChatCompletion", attrs(AttrOpenInferenceSpanKind, "LLM"), true},
		{"openinference AGENT", "agent", attrs(AttrOpenInferenceSpanKind, "AGENT"), false},
		{"openinference CHAIN", "chain", attrs(AttrOpenInferenceSpanKind, "CHAIN"), false},
		{"ai sdk doGenerate by name", "ai.generateText.doGenerate", attrs(), true},
		{"ai sdk doStream by id", "anything", attrs(AttrAIOperationID, "ai.streamText.doStream"), true},
		{"ai sdk outer generateText", "ai.generateText", attrs(AttrAIOperationID, "ai.generateText"), false},
		{"ai sdk toolCall", "ai.toolCall", attrs(AttrAIOperationID, "ai.toolCall"), false},
		{"openllmetry chat", "openai.chat", attrs(AttrLLMRequestType, "chat"), true},
		{"openllmetry completion", "openai.completion", attrs(AttrLLMRequestType, "completion"), true},
		{"openllmetry embedding", "openai.embeddings", attrs(AttrLLMRequestType, "embedding"), false},
		{"http span", "GET /v1/runs", attrs(), false},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, IsModelCallSpan(c.span, c.attrs), c.name)
	}
}
