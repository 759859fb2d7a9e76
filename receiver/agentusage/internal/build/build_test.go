package build

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

func attrs(s ptrace.Span) map[string]any { return s.Attributes().AsRaw() }

func TestAddByKind(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := New()
	b.Add(&record.Record{Kind: record.ModelCall, Service: "svc", SpanID: [8]byte{1}, Start: t0, End: t0.Add(time.Second),
		RunID: "run", ThreadID: "th", Caller: "subagent:bash", RequestModel: "gpt-4o", ResponseModel: "gpt-4o-2024",
		Provider: "openai", HasUsage: true, Usage: genai.Usage{Input: 10, Output: 3, CacheCreation: 4}, CacheCreation1h: 2,
		ResponseToolCallIDs: []string{"call_1"}})
	b.Add(&record.Record{Kind: record.ToolCall, Service: "svc", SpanID: [8]byte{2}, Name: "task", ToolCallID: "call_1", SubagentStatus: "completed"})
	b.Add(&record.Record{Kind: record.AgentRun, Service: "other", SpanID: [8]byte{3}, Name: "bash", ToolCallID: "call_1", AgentID: "a1"})
	b.Add(&record.Record{Kind: record.Step, Service: "svc", SpanID: [8]byte{4}, Name: "RunnableSequence", Failed: true, Error: "ValueError('x')",
		Start: t0.Add(time.Second), End: t0}) // end before start: clamped
	b.Add(&record.Record{Kind: record.ModelCall, Service: "svc", SpanID: [8]byte{5}, Operation: genai.OpTextCompletion})
	td := b.Traces()
	require.Equal(t, 2, td.ResourceSpans().Len(), "one resource per service")
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	require.Equal(t, 4, spans.Len())

	chat := spans.At(0)
	assert.Equal(t, "chat gpt-4o", chat.Name(), "named after the request model, as semconv says")
	assert.Equal(t, ptrace.SpanKindClient, chat.Kind())
	assert.Equal(t, map[string]any{
		genai.AttrOperationName: genai.OpChat, genai.AttrRunID: "run", genai.AttrConversationID: "th", genai.AttrCaller: "subagent:bash",
		genai.AttrRequestModel: "gpt-4o", genai.AttrResponseModel: "gpt-4o-2024", genai.AttrProviderName: "openai",
		genai.AttrUsageInput: int64(10), genai.AttrUsageOutput: int64(3), genai.AttrUsageCacheCreat: int64(4),
		genai.AttrUsageCacheCreat1h: int64(2), genai.AttrResponseToolCallIDs: []any{"call_1"},
	}, attrs(chat))

	tool := spans.At(1)
	assert.Equal(t, "execute_tool task", tool.Name())
	assert.Equal(t, map[string]any{genai.AttrOperationName: genai.OpExecuteTool, genai.AttrToolName: "task",
		genai.AttrToolType: genai.ToolTypeFunction, genai.AttrToolCallID: "call_1", genai.AttrSubagentStatus: "completed"}, attrs(tool))

	step := spans.At(2)
	assert.Equal(t, "RunnableSequence", step.Name())
	assert.Equal(t, ptrace.StatusCodeError, step.Status().Code())
	assert.Equal(t, "ValueError", attrs(step)[genai.AttrErrorType])
	assert.Equal(t, step.StartTimestamp(), step.EndTimestamp())

	tc := spans.At(3)
	assert.Equal(t, "text_completion", tc.Name())
	assert.NotContains(t, attrs(tc), genai.AttrUsageInput, "a call that reported no usage carries none")

	agent := td.ResourceSpans().At(1).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, "invoke_agent bash", agent.Name())
	assert.Equal(t, "a1", attrs(agent)[genai.AttrAgentID])
}

func TestWriteKeepsTheEmittersSpan(t *testing.T) {
	s := ptrace.NewSpan()
	s.SetName("ChatOpenAI")
	s.SetKind(ptrace.SpanKindServer)
	s.Attributes().PutStr("langfuse.observation.type", "generation")
	s.Attributes().PutStr(genai.AttrToolType, "extension")
	Write(s, &record.Record{Kind: record.ToolCall, Name: "search", ToolType: "extension", SpanKind: s.Kind()})
	assert.Equal(t, "execute_tool search", s.Name())
	assert.Equal(t, ptrace.SpanKindServer, s.Kind(), "the emitter's kind is kept")
	assert.Equal(t, "generation", attrs(s)["langfuse.observation.type"], "other attributes stay")
	assert.Equal(t, "extension", attrs(s)[genai.AttrToolType])
	assert.Equal(t, ptrace.StatusCodeUnset, s.Status().Code())
}
