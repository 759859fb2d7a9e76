package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestStringsFromMap(t *testing.T) {
	m := pcommon.NewMap()
	PutStrings(m, AttrResponseToolCallIDs, []string{"call_a", "call_b"})
	assert.Equal(t, []string{"call_a", "call_b"}, StringsFromMap(m, AttrResponseToolCallIDs))

	m.PutStr("one", "call_x")
	assert.Equal(t, []string{"call_x"}, StringsFromMap(m, "one"))
	m.PutStr("json", `["a","b"]`)
	assert.Equal(t, []string{"a", "b"}, StringsFromMap(m, "json"))
	m.PutStr("empty", "")
	assert.Nil(t, StringsFromMap(m, "empty"))
	assert.Nil(t, StringsFromMap(m, "missing"))
}

func TestDispatchedToolCallIDs(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr(AttrOutputMessages, `[{"role":"assistant","parts":[{"type":"text","content":"go"},`+
		`{"type":"tool_call","id":"call_1","name":"task","arguments":{"prompt":"x"}},`+
		`{"type":"tool_call","id":"call_2","name":"task"}],"finish_reason":"tool_call"}]`)
	assert.Equal(t, []string{"call_1", "call_2"}, DispatchedToolCallIDs(m), "fallback to output messages")

	PutStrings(m, AttrResponseToolCallIDs, []string{"call_9"})
	assert.Equal(t, []string{"call_9"}, DispatchedToolCallIDs(m), "explicit attribute wins")

	bad := pcommon.NewMap()
	bad.PutStr(AttrOutputMessages, `{not json`)
	assert.Nil(t, DispatchedToolCallIDs(bad))
}

func TestCallerBucket(t *testing.T) {
	for caller, want := range map[string]string{
		"lead_agent":                  BucketLeadAgent,
		"":                            BucketLeadAgent,
		"subagent:general-purpose":    BucketSubagent,
		"middleware:title":            BucketMiddleware,
		"something:else":              BucketLeadAgent,
		SubagentCaller("bash"):        BucketSubagent,
		MiddlewareCaller("summarize"): BucketMiddleware,
	} {
		assert.Equal(t, want, CallerBucket(caller), caller)
	}
}

func TestSpanName(t *testing.T) {
	assert.Equal(t, "chat gpt-4o", SpanName(OpChat, "gpt-4o"))
	assert.Equal(t, "execute_tool task", SpanName(OpExecuteTool, TaskToolName))
	assert.Equal(t, "invoke_agent lead_agent", SpanName(OpInvokeAgent, LeadAgentName))
	assert.Equal(t, "chat", SpanName(OpChat, ""))
}

func TestCallerFromTags(t *testing.T) {
	assert.Equal(t, "subagent:bash", CallerFromTags([]string{"seq:step:1", "subagent:bash", "lead_agent"}))
	assert.Equal(t, "middleware:title", CallerFromTags([]string{"middleware:title"}))
	assert.Equal(t, "", CallerFromTags([]string{"x", "subagent"}))
}
