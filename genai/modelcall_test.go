package genai

import "testing"

func TestIsModelCallSpan(t *testing.T) {
	checkRule(t, IsModelCallSpan, []spanCase{
		{"semconv chat", "chat gpt-4o", attrMap(AttrOperationName, OpChat), true},
		{"chat by span name", "chat gpt-4o", attrMap(), true},
		{"text_completion", "x", attrMap(AttrOperationName, OpTextCompletion), true},
		{"generate_content", "generate_content gemini", attrMap(), true},
		{"invoke_agent with usage sums", "invoke_agent lead", attrMap(AttrOperationName, OpInvokeAgent), false},
		{"execute_tool", "execute_tool task", attrMap(), false},
		{"operation wins over openinference", "x", attrMap(AttrOperationName, OpInvokeAgent, AttrOpenInferenceSpanKind, "LLM"), false},
		{"openinference LLM", "ChatCompletion", attrMap(AttrOpenInferenceSpanKind, "LLM"), true},
		{"openinference AGENT", "agent", attrMap(AttrOpenInferenceSpanKind, "AGENT"), false},
		{"openinference CHAIN", "chain", attrMap(AttrOpenInferenceSpanKind, "CHAIN"), false},
		{"ai sdk doGenerate by name", "ai.generateText.doGenerate", attrMap(), true},
		{"ai sdk doStream by id", "anything", attrMap(AttrAIOperationID, "ai.streamText.doStream"), true},
		{"ai sdk outer generateText", "ai.generateText", attrMap(AttrAIOperationID, "ai.generateText"), false},
		{"ai sdk toolCall", "ai.toolCall", attrMap(AttrAIOperationID, "ai.toolCall"), false},
		{"openllmetry chat", "openai.chat", attrMap(AttrLLMRequestType, "chat"), true},
		{"openllmetry completion", "openai.completion", attrMap(AttrLLMRequestType, "completion"), true},
		{"openllmetry embedding", "openai.embeddings", attrMap(AttrLLMRequestType, "embedding"), false},
		{"http span", "GET /v1/runs", attrMap(), false},
	})
}
