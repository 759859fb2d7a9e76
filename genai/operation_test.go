package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestSpanOperation(t *testing.T) {
	withAttr := pcommon.NewMap()
	withAttr.PutStr(AttrOperationName, OpExecuteTool)
	empty := pcommon.NewMap()
	emptyAttr := pcommon.NewMap()
	emptyAttr.PutStr(AttrOperationName, "")

	assert.Equal(t, OpExecuteTool, SpanOperation("chat gpt-4o", withAttr), "the attribute wins over the name")
	assert.Equal(t, OpChat, SpanOperation("chat gpt-4o", empty))
	assert.Equal(t, OpChat, SpanOperation("chat gpt-4o", emptyAttr), "an empty attribute falls back to the name")
	assert.Equal(t, OpExecuteTool, SpanOperation("execute_tool task", empty))
	assert.Equal(t, OpInvokeAgent, SpanOperation("invoke_agent lead_agent", empty))
	assert.Equal(t, OpGenerateContent, SpanOperation("generate_content gemini", empty))
	assert.Equal(t, "", SpanOperation("GET /v1/runs", empty))
	assert.Equal(t, "", SpanOperation("", empty))
}

func TestIsModelCall(t *testing.T) {
	for _, op := range []string{OpChat, OpGenerateContent, OpTextCompletion} {
		assert.True(t, IsModelCall(op), op)
	}
	for _, op := range []string{OpExecuteTool, OpInvokeAgent, "embeddings", ""} {
		assert.False(t, IsModelCall(op), op)
	}
}
