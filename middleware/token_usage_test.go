package middleware

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

type recordingSpan struct{ attrs []attribute.KeyValue }

func (s *recordingSpan) SetAttributes(kv ...attribute.KeyValue) { s.attrs = append(s.attrs, kv...) }

func usage(in, out, total int64) *message.UsageMetadata {
	return &message.UsageMetadata{InputTokens: in, OutputTokens: out, TotalTokens: total}
}

func taskResult(id, callID string, in, out, total any) message.Message {
	m := toolMsg(id, callID, "task", "done")
	m.AdditionalKwargs = map[string]any{message.KwargSubagentTokenUsage: map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": total}}
	return m
}

func TestTokenUsageLogsCacheDetails(t *testing.T) {
	var buf bytes.Buffer
	m := NewTokenUsageMiddleware()
	m.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	last := aiMsg("a1", "answer")
	last.UsageMetadata = &message.UsageMetadata{InputTokens: 350, OutputTokens: 240, TotalTokens: 590,
		InputTokenDetails: &message.InputTokenDetails{CacheRead: 100}, OutputTokenDetails: &message.OutputTokenDetails{Reasoning: 40}}
	u, err := m.AfterModel(context.Background(), testRuntime(), st(human("h", "q"), last))
	require.NoError(t, err)
	require.NotNil(t, u)
	assert.Contains(t, buf.String(), "LLM token usage: input=350 output=240 total=590")
	assert.Contains(t, buf.String(), "input_token_details=")
	assert.Contains(t, buf.String(), "output_token_details=")

	buf.Reset()
	last.UsageMetadata = usage(10, 5, 15)
	_, _ = m.AfterModel(context.Background(), testRuntime(), st(human("h", "q"), last))
	assert.Contains(t, buf.String(), "input=10 output=5 total=15")
	assert.NotContains(t, buf.String(), "details")

	buf.Reset()
	last.UsageMetadata = nil
	last.ResponseMetadata = map[string]any{"token_usage": map[string]any{"total_tokens": 9}}
	u, _ = m.AfterModel(context.Background(), testRuntime(), st(human("h", "q"), last))
	assert.Empty(t, buf.String(), "usage only in response_metadata: no log")
	require.NotNil(t, u, "attribution still written")
}

func TestTokenUsageAnnotatesTodoUpdates(t *testing.T) {
	s := st(human("h", "plan"), aiMsg("a1", "", call("write_todos:1", "write_todos", map[string]any{"todos": []any{
		map[string]any{"content": "A", "status": "completed"}, map[string]any{"content": "B", "status": "in_progress"}}})))
	s.Todos = []state.Todo{{Content: "A", Status: "in_progress"}, {Content: "B", Status: "pending"}}
	span := &recordingSpan{}
	ctx := model.WithResponseSpan(context.Background(), span)
	u, err := NewTokenUsageMiddleware().AfterModel(ctx, testRuntime(), s)
	require.NoError(t, err)
	attr := u.Messages[0].AdditionalKwargs[KwargAttribution].(map[string]any)
	assert.Equal(t, "tool_batch", attr["kind"])
	assert.Equal(t, true, attr["shared_attribution"])
	assert.Equal(t, []string{"write_todos:1"}, attr["tool_call_ids"])
	assert.Equal(t, []map[string]any{
		{"kind": "todo_complete", "content": "A", "tool_call_id": "write_todos:1"},
		{"kind": "todo_start", "content": "B", "tool_call_id": "write_todos:1"},
	}, attr["actions"])
	assert.Equal(t, []attribute.KeyValue{attribute.String(genai.AttrStepKind, "tool_batch")}, span.attrs)
}

func TestTokenUsageSubagentAndSearchSteps(t *testing.T) {
	a := aiMsg("a1", "", call("c1", "task", map[string]any{"description": " Research ", "subagent_type": "general-purpose", "prompt": "p"}),
		call("c2", "web_search", map[string]any{"query": "paris"}))
	attr := BuildAttribution(a, nil)
	assert.Equal(t, "tool_batch", attr["kind"])
	assert.Equal(t, []map[string]any{
		{"kind": "subagent", "description": "Research", "subagent_type": "general-purpose", "tool_call_id": "c1"},
		{"kind": "search", "tool_name": "web_search", "query": "paris", "tool_call_id": "c2"},
	}, attr["actions"])
	assert.Equal(t, genai.StepSubagentDispatch, BuildAttribution(aiMsg("a", "", call("c1", "task", nil)), nil)["kind"])
	final := BuildAttribution(aiMsg("a", "The answer"), nil)
	assert.Equal(t, "final_answer", final["kind"])
	assert.Equal(t, false, final["shared_attribution"])
	assert.Equal(t, []map[string]any{}, final["actions"])
	// Python truthiness: whitespace-only content is a final answer, only "" is thinking.
	assert.Equal(t, "final_answer", BuildAttribution(aiMsg("a", "  "), nil)["kind"])
	assert.Equal(t, "final_answer", BuildAttribution(aiMsg("a", "\n"), nil)["kind"])
	assert.Equal(t, "thinking", BuildAttribution(aiMsg("a", ""), nil)["kind"])
	other := BuildAttribution(aiMsg("a", "", call("c", "", map[string]any{"description": ""})), nil)
	assert.Equal(t, []map[string]any{{"kind": "tool", "tool_name": "unknown", "description": nil, "tool_call_id": "c"}}, other["actions"])
}

func TestTokenUsageRemovedTodos(t *testing.T) {
	a := aiMsg("a", "", call("w", "write_todos", map[string]any{"todos": []any{}}))
	attr := BuildAttribution(a, []state.Todo{{Content: "A", Status: "pending"}})
	assert.Equal(t, "todo_update", attr["kind"])
	assert.Equal(t, []map[string]any{{"kind": "todo_remove", "content": "A", "tool_call_id": "w"}}, attr["actions"])
	// Unchanged list: one plain tool action without a description key.
	same := BuildAttribution(aiMsg("a", "", call("w", "write_todos", map[string]any{"todos": []any{map[string]any{"content": "A", "status": "pending"}}})),
		[]state.Todo{{Content: "A", Status: "pending"}})
	assert.Equal(t, []map[string]any{{"kind": "tool", "tool_name": "write_todos", "tool_call_id": "w"}}, same["actions"])
}

func TestBuildTodoActionsDuplicateContentEmitsRemove(t *testing.T) {
	prev := []normTodo{{"A", "pending"}, {"B", "pending"}}
	next := []normTodo{{"A", "in_progress"}, {"A", "completed"}}
	assert.Equal(t, []map[string]any{
		{"kind": "todo_start", "content": "A"},
		{"kind": "todo_complete", "content": "A"},
		{"kind": "todo_remove", "content": "B"},
	}, BuildTodoActions(prev, next))
	// Positional rename fallback for new content.
	assert.Equal(t, []map[string]any{{"kind": "todo_update", "content": "A2"}},
		BuildTodoActions([]normTodo{{"A", "pending"}}, []normTodo{{"A2", "pending"}}))
}

func TestTokenUsageMergesByMessagePositionWithoutIDs(t *testing.T) {
	d1 := aiMsg("", "", call("t1", "task", nil))
	d1.UsageMetadata = usage(1, 1, 2)
	d2 := aiMsg("", "", call("tA", "task", nil), call("tB", "task", nil))
	d2.UsageMetadata = usage(100, 10, 110)
	tool1 := toolMsg("", "t1", "task", "no usage")
	msgs := []message.Message{d1, tool1, d2, taskResult("", "tA", int64(10), int64(5), int64(15)), taskResult("", "tB", 20, 7.0, 27), aiMsg("", "final")}
	updates := MergeSubagentUsage(msgs)
	require.Len(t, updates, 3, "one AIMessage update and two marked ToolMessages")
	var ais []message.Message
	for _, u := range updates {
		if u.IsAI() {
			ais = append(ais, u)
		} else {
			assert.Equal(t, true, u.AdditionalKwargs[KwargUsageAttributed])
		}
	}
	require.Len(t, ais, 1)
	assert.Equal(t, []message.ToolCall{d2.ToolCalls[0], d2.ToolCalls[1]}, ais[0].ToolCalls, "the second dispatcher")
	assert.Equal(t, message.UsageMetadata{InputTokens: 130, OutputTokens: 22, TotalTokens: 152}, *ais[0].UsageMetadata,
		"30/12/42 added onto its own 100/10/110")
}

func TestTokenUsageMergeAccumulatesFromEmptyAndIsIdempotent(t *testing.T) {
	d := aiMsg("d", "", call("tA", "task", nil), call("tB", "task", nil))
	s := st(human("h", "q"), d, taskResult("ta", "tA", 10, 5, 15), taskResult("tb", "tB", 20, 7, 27), aiMsg("f", "final"))
	m := NewTokenUsageMiddleware()
	u, err := m.AfterModel(context.Background(), testRuntime(), s)
	require.NoError(t, err)
	s = mustApply(t, s, u)
	assert.Equal(t, message.UsageMetadata{InputTokens: 30, OutputTokens: 12, TotalTokens: 42}, *s.Messages[1].UsageMetadata)
	u, err = m.AfterModel(context.Background(), testRuntime(), s)
	require.NoError(t, err)
	assert.Nil(t, u, "replaying the checkpoint merges nothing and the attribution is unchanged")
}

func TestTokenUsageReusedToolCallIDScopedToHistory(t *testing.T) {
	h1 := []message.Message{aiMsg("d", "", call("same", "task", nil)), taskResult("t", "same", 10, 2, 12), aiMsg("f", "x")}
	h2 := []message.Message{aiMsg("d", "", call("same", "task", nil)), taskResult("t", "same", 90, 8, 98), aiMsg("f", "x")}
	assert.Equal(t, int64(12), MergeSubagentUsage(h1)[0].UsageMetadata.TotalTokens)
	assert.Equal(t, int64(98), MergeSubagentUsage(h2)[0].UsageMetadata.TotalTokens)
}

func TestSubagentUsageValidation(t *testing.T) {
	for _, bad := range []map[string]any{
		{"input_tokens": 1, "output_tokens": 1},
		{"input_tokens": true, "output_tokens": 1, "total_tokens": 2},
		{"input_tokens": -1, "output_tokens": 1, "total_tokens": 2},
		{"input_tokens": 1.5, "output_tokens": 1, "total_tokens": 2},
		{"input_tokens": "1", "output_tokens": 1, "total_tokens": 2},
	} {
		_, _, _, ok := SubagentUsage(map[string]any{message.KwargSubagentTokenUsage: bad})
		assert.False(t, ok, "%v", bad)
	}
	// An invalid usage leaves the ToolMessage unmarked (retryable).
	msgs := []message.Message{aiMsg("d", "", call("t", "task", nil)), taskResult("t1", "t", true, 1, 2), aiMsg("f", "x")}
	assert.Empty(t, MergeSubagentUsage(msgs))
	// No dispatcher found: untouched.
	assert.Empty(t, MergeSubagentUsage([]message.Message{taskResult("t1", "zz", 1, 1, 2), aiMsg("f", "x")}))
}
