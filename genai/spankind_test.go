package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestIsToolCallSpan(t *testing.T) {
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
		{"semconv", "execute_tool task", attrs(AttrOperationName, OpExecuteTool), true},
		{"semconv by name", "execute_tool task", attrs(), true},
		{"ai sdk", "ai.toolCall", attrs(AttrAIOperationID, AIOperationToolCall), true},
		{"ai sdk by name", "ai.toolCall", attrs(), true},
		{"openinference", "task", attrs(AttrOpenInferenceSpanKind, "TOOL"), true},
		{"openllmetry", "search.tool", attrs(AttrTraceloopSpanKind, "tool"), true},
		{"operation wins", "x", attrs(AttrOperationName, OpChat, AttrOpenInferenceSpanKind, "TOOL"), false},
		{"chain", "x", attrs(AttrOpenInferenceSpanKind, "CHAIN"), false},
		{"http", "GET /", attrs(), false},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, IsToolCallSpan(c.span, c.attrs), c.name)
	}
}

func TestAgentRunName(t *testing.T) {
	m := func(kv ...string) pcommon.Map {
		a := pcommon.NewMap()
		for i := 0; i+1 < len(kv); i += 2 {
			a.PutStr(kv[i], kv[i+1])
		}
		return a
	}
	cases := []struct {
		name  string
		span  string
		attrs pcommon.Map
		agent string
		isRun bool
	}{
		{"semconv with name attr", "invoke_agent x", m(AttrOperationName, OpInvokeAgent, AttrAgentName, "researcher"), "researcher", true},
		{"semconv name target", "invoke_agent coder", m(), "coder", true},
		{"semconv bare", "invoke_agent", m(AttrOperationName, OpInvokeAgent), "", true},
		{"chat is not", "chat gpt", m(), "", false},
		{"openinference", "lead", m(AttrOpenInferenceSpanKind, "AGENT", AttrOIAgentName, "lead"), "lead", true},
		{"openinference no name", "lead_graph", m(AttrOpenInferenceSpanKind, "AGENT"), "lead_graph", true},
		{"openllmetry", "x.agent", m(AttrTraceloopSpanKind, "agent", AttrTraceloopEntityName, "planner"), "planner", true},
		{"ai sdk outer", "ai.generateText", m(AttrAIOperationID, "ai.generateText", AttrAIFunctionID, "researcher"), "researcher", true},
		{"ai sdk provider call is not", "ai.generateText.doGenerate", m(AttrAIOperationID, "ai.generateText.doGenerate"), "", false},
		{"openllmetry workflow is not", "w", m(AttrTraceloopSpanKind, "workflow"), "", false},
	}
	for _, c := range cases {
		agent, ok := AgentRunName(c.span, c.attrs)
		assert.Equal(t, c.isRun, ok, c.name)
		assert.Equal(t, c.agent, agent, c.name)
	}
}
