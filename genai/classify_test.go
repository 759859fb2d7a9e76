package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// attrMap builds string attributes from key, value pairs.
func attrMap(kv ...string) pcommon.Map {
	m := pcommon.NewMap()
	for i := 0; i+1 < len(kv); i += 2 {
		m.PutStr(kv[i], kv[i+1])
	}
	return m
}

// spanCase is a span, by name and attributes, and whether a rule must hold for it.
type spanCase struct {
	name  string
	span  string
	attrs pcommon.Map
	want  bool
}

// checkRule checks rule on every case.
func checkRule(t *testing.T, rule func(string, pcommon.Map) bool, cases []spanCase) {
	t.Helper()
	for _, c := range cases {
		assert.Equal(t, c.want, rule(c.span, c.attrs), c.name)
	}
}

// Classify agrees with IsModelCallSpan, IsToolCallSpan and AgentRunName on every
// convention's spans (the first that matches wins), and AgentRunNameOf names the same
// agent as AgentRunName.
func TestClassifyAgreesWithTheRules(t *testing.T) {
	cases := []struct {
		name  string
		attrs pcommon.Map
	}{
		{"chat gpt-4o", attrMap(AttrOperationName, OpChat)},
		{"chat gpt-4o", attrMap()},
		{"text_completion x", attrMap()},
		{"generate_content gemini", attrMap(AttrOperationName, OpGenerateContent)},
		{"execute_tool task", attrMap(AttrOperationName, OpExecuteTool)},
		{"execute_tool task", attrMap()},
		{"invoke_agent lead_agent", attrMap(AttrOperationName, OpInvokeAgent)},
		{"invoke_agent researcher", attrMap(AttrOperationName, OpInvokeAgent, AttrAgentName, "r2")},
		{"invoke_agent", attrMap()},
		{"whatever", attrMap(AttrOperationName, "embeddings")},
		{"whatever", attrMap(AttrOperationName, "")},
		{"OpenAI Chat", attrMap(AttrOpenInferenceSpanKind, "LLM")},
		{"tool", attrMap(AttrOpenInferenceSpanKind, "TOOL")},
		{"lead", attrMap(AttrOpenInferenceSpanKind, "AGENT", AttrOIAgentName, "lead")},
		{"chain", attrMap(AttrOpenInferenceSpanKind, "CHAIN")},
		{"openai.chat", attrMap(AttrLLMRequestType, "chat")},
		{"openai.embeddings", attrMap(AttrLLMRequestType, "embedding")},
		{"search.tool", attrMap(AttrTraceloopSpanKind, TraceloopKindTool)},
		{"x.agent", attrMap(AttrTraceloopSpanKind, TraceloopKindAgent, AttrTraceloopEntityName, "planner")},
		{"w", attrMap(AttrTraceloopSpanKind, "workflow")},
		// marked both a tool and a model call: the model call wins, as in genainormalize
		{"odd", attrMap(AttrTraceloopSpanKind, TraceloopKindTool, AttrLLMRequestType, "chat")},
		{"ai.generateText.doGenerate", attrMap()},
		{"x", attrMap(AttrAIOperationID, "ai.streamText.doStream")},
		{"ai.toolCall", attrMap()},
		{"ai.generateText", attrMap(AttrAIFunctionID, "fn")},
		{"ai.streamObject", attrMap()},
		{"GET /", attrMap("http.method", "GET")},
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
