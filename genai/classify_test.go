package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Classify agrees with IsModelCallSpan, IsToolCallSpan and AgentRunName on every
// convention's spans (the first that matches wins), and AgentRunNameOf names the same
// agent as AgentRunName.
func TestClassifyAgreesWithTheRules(t *testing.T) {
	m := func(kv ...string) pcommon.Map {
		out := pcommon.NewMap()
		for i := 0; i+1 < len(kv); i += 2 {
			out.PutStr(kv[i], kv[i+1])
		}
		return out
	}
	cases := []struct {
		name  string
		attrs pcommon.Map
	}{
		{"chat gpt-4o", m(AttrOperationName, OpChat)},
		{"chat gpt-4o", m()},
		{"text_completion x", m()},
		{"generate_content gemini", m(AttrOperationName, OpGenerateContent)},
		{"execute_tool task", m(AttrOperationName, OpExecuteTool)},
		{"execute_tool task", m()},
		{"invoke_agent lead_agent", m(AttrOperationName, OpInvokeAgent)},
		{"invoke_agent researcher", m(AttrOperationName, OpInvokeAgent, AttrAgentName, "r2")},
		{"invoke_agent", m()},
		{"whatever", m(AttrOperationName, "embeddings")},
		{"whatever", m(AttrOperationName, "")},
		{"OpenAI Chat", m(AttrOpenInferenceSpanKind, "LLM")},
		{"tool", m(AttrOpenInferenceSpanKind, "TOOL")},
		{"lead", m(AttrOpenInferenceSpanKind, "AGENT", AttrOIAgentName, "lead")},
		{"chain", m(AttrOpenInferenceSpanKind, "CHAIN")},
		{"openai.chat", m(AttrLLMRequestType, "chat")},
		{"openai.embeddings", m(AttrLLMRequestType, "embedding")},
		{"search.tool", m(AttrTraceloopSpanKind, TraceloopKindTool)},
		{"x.agent", m(AttrTraceloopSpanKind, TraceloopKindAgent, AttrTraceloopEntityName, "planner")},
		{"w", m(AttrTraceloopSpanKind, "workflow")},
		// marked both a tool and a model call: the model call wins, as in genainormalize
		{"odd", m(AttrTraceloopSpanKind, TraceloopKindTool, AttrLLMRequestType, "chat")},
		{"ai.generateText.doGenerate", m()},
		{"x", m(AttrAIOperationID, "ai.streamText.doStream")},
		{"ai.toolCall", m()},
		{"ai.generateText", m(AttrAIFunctionID, "fn")},
		{"ai.streamObject", m()},
		{"GET /", m("http.method", "GET")},
	}
	for _, tc := range cases {
		c := Classify(tc.name, tc.attrs)
		assert.Equal(t, SpanOperation(tc.name, tc.attrs), c.Operation, tc.name)
		model := IsModelCallSpan(tc.name, tc.attrs)
		tool := !model && IsToolCallSpan(tc.name, tc.attrs)
		agent, isAgent := AgentRunName(tc.name, tc.attrs)
		isAgent = isAgent && !model && !tool
		want := SpanOther
		switch {
		case model:
			want = SpanModelCall
		case tool:
			want = SpanToolCall
		case isAgent:
			want = SpanAgentRun
		}
		assert.Equal(t, want, c.Kind, "%s %v", tc.name, tc.attrs.AsRaw())
		opAttr := ""
		if v, ok := tc.attrs.Get(AttrOperationName); ok {
			opAttr = v.AsString()
		}
		assert.Equal(t, c, ClassifyRead(opAttr, tc.name, tc.attrs), "ClassifyRead with the attribute read by the caller: %s", tc.name)
		got, ok := AgentRunNameOf(c, tc.name, tc.attrs)
		assert.Equal(t, isAgent, ok, tc.name)
		if isAgent {
			assert.Equal(t, agent, got, tc.name)
		}
	}
}
