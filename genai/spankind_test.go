package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestIsToolCallSpan(t *testing.T) {
	checkRule(t, IsToolCallSpan, []spanCase{
		{"semconv", "execute_tool task", attrMap(AttrOperationName, OpExecuteTool), true},
		{"semconv by name", "execute_tool task", attrMap(), true},
		{"ai sdk", "ai.toolCall", attrMap(AttrAIOperationID, AIOperationToolCall), true},
		{"ai sdk by name", "ai.toolCall", attrMap(), true},
		{"openinference", "task", attrMap(AttrOpenInferenceSpanKind, "TOOL"), true},
		{"openllmetry", "search.tool", attrMap(AttrTraceloopSpanKind, "tool"), true},
		{"operation wins", "x", attrMap(AttrOperationName, OpChat, AttrOpenInferenceSpanKind, "TOOL"), false},
		{"chain", "x", attrMap(AttrOpenInferenceSpanKind, "CHAIN"), false},
		{"http", "GET /", attrMap(), false},
	})
}

func TestAgentRunName(t *testing.T) {
	cases := []struct {
		name  string
		span  string
		attrs pcommon.Map
		agent string
		isRun bool
	}{
		{"semconv with name attr", "invoke_agent x", attrMap(AttrOperationName, OpInvokeAgent, AttrAgentName, "researcher"), "researcher", true},
		{"semconv name target", "invoke_agent coder", attrMap(), "coder", true},
		{"semconv bare", "invoke_agent", attrMap(AttrOperationName, OpInvokeAgent), "", true},
		{"chat is not", "chat gpt", attrMap(), "", false},
		{"openinference", "lead", attrMap(AttrOpenInferenceSpanKind, "AGENT", AttrOIAgentName, "lead"), "lead", true},
		{"openinference no name", "lead_graph", attrMap(AttrOpenInferenceSpanKind, "AGENT"), "lead_graph", true},
		{"openllmetry", "x.agent", attrMap(AttrTraceloopSpanKind, "agent", AttrTraceloopEntityName, "planner"), "planner", true},
		{"ai sdk outer", "ai.generateText", attrMap(AttrAIOperationID, "ai.generateText", AttrAIFunctionID, "researcher"), "researcher", true},
		{"ai sdk provider call is not", "ai.generateText.doGenerate", attrMap(AttrAIOperationID, "ai.generateText.doGenerate"), "", false},
		{"openllmetry workflow is not", "w", attrMap(AttrTraceloopSpanKind, "workflow"), "", false},
	}
	for _, c := range cases {
		agent, ok := AgentRunName(c.span, c.attrs)
		assert.Equal(t, c.isRun, ok, c.name)
		assert.Equal(t, c.agent, agent, c.name)
	}
}

func TestStringAttrs(t *testing.T) {
	m := attrMap("a", "", "b", "x", "c", "y")
	m.PutInt("n", 7)
	assert.Equal(t, "x", StringAttr(m, "b"))
	assert.Equal(t, "7", StringAttr(m, "n"), "any value reads as its string")
	assert.Equal(t, "", StringAttr(m, "missing"))
	assert.Equal(t, "x", FirstStringAttr(m, "missing", "a", "b", "c"), "absent and empty are passed over")
	assert.Equal(t, "", FirstStringAttr(m, "missing", "a"))
	assert.Equal(t, "", FirstStringAttr(m))
}
