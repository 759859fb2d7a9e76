package middleware

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
)

func roles(msgs []message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role)
		if m.IsTool() {
			out[i] += ":" + m.ToolCallID
		}
	}
	return out
}

func TestDanglingNoPatchNeeded(t *testing.T) {
	for _, msgs := range [][]message.Message{
		nil,
		{human("h", "q")},
		{human("h", "q"), aiMsg("a", "answer")},
		{human("h", "q"), aiMsg("a", "", call("c1", "ls", nil)), toolMsg("t1", "c1", "ls", "ok"), aiMsg("b", "done")},
	} {
		_, ok := BuildPatchedMessages(msgs)
		assert.False(t, ok)
	}
}

func TestDanglingPatchInsertedRightAfterItsAIMessage(t *testing.T) {
	msgs := []message.Message{
		human("h", "q"),
		aiMsg("a1", "", call("c1", "ls", nil), call("c2", "bash", nil)),
		toolMsg("t2", "c2", "bash", "ok"),
		human("h2", "next"),
		aiMsg("a2", "", call("c3", "read_file", nil)),
	}
	out, ok := BuildPatchedMessages(msgs)
	require.True(t, ok)
	assert.Equal(t, []string{"human", "ai", "tool:c1", "tool:c2", "human", "ai", "tool:c3"}, roles(out))
	assert.Equal(t, DanglingInterrupted, out[2].Content)
	assert.Equal(t, "ls", out[2].Name)
	assert.Equal(t, message.ToolError, out[2].Status)
	assert.Equal(t, "ok", out[3].Content, "the answered call keeps its result")
	assert.Equal(t, "read_file", out[6].Name)
}

func TestDanglingRegroupsAndDropsOrphans(t *testing.T) {
	msgs := []message.Message{
		toolMsg("orphan0", "zz", "ls", "leading orphan"),
		aiMsg("a1", "", call("c1", "ls", nil), call("c2", "ls", nil)),
		toolMsg("t1", "c1", "ls", "r1"),
		human("h", "interjection"),
		toolMsg("t2", "c2", "ls", "r2"),
		toolMsg("orphan", "nope", "ls", "orphan"),
	}
	out, ok := BuildPatchedMessages(msgs)
	require.True(t, ok)
	assert.Equal(t, []string{"ai", "tool:c1", "tool:c2", "human"}, roles(out))
}

func TestDanglingReusedIDsPairFIFO(t *testing.T) {
	msgs := []message.Message{
		aiMsg("a1", "", call("same", "ls", nil)), toolMsg("t1", "same", "ls", "first"),
		aiMsg("a2", "", call("same", "ls", nil)),
	}
	out, ok := BuildPatchedMessages(msgs)
	require.True(t, ok)
	assert.Equal(t, "first", out[1].Content)
	assert.Equal(t, DanglingInterrupted, out[3].Content, "second occurrence patched")
}

func TestDanglingMalformedCalls(t *testing.T) {
	blankName := aiMsg("a", "", call("c1", "", nil))
	out, ok := BuildPatchedMessages([]message.Message{blankName})
	require.True(t, ok)
	assert.Equal(t, UnknownToolName, out[0].ToolCalls[0].Name)
	assert.Equal(t, DanglingMissingName, out[1].Content)

	inv := aiMsg("a", "")
	inv.AdditionalKwargs = map[string]any{kwargInvalidToolCalls: []any{
		map[string]any{"id": "w1", "name": "write_file", "args": "{bad", "error": "Expecting value"},
		map[string]any{"id": "b1", "name": "bash", "args": "[1]", "error": "not an object"},
	}}
	out, ok = BuildPatchedMessages([]message.Message{inv})
	require.True(t, ok)
	assert.Contains(t, out[1].Content, "write_file")
	assert.Contains(t, out[1].Content, "Parser error: Expecting value")
	assert.Equal(t, "[Tool call could not be executed because its arguments were invalid: not an object]", out[2].Content)
	assert.Equal(t, "{}", out[0].AdditionalKwargs[kwargInvalidToolCalls].([]any)[1].(map[string]any)["args"], "non-object args normalised")
	assert.Equal(t, "[1]", inv.AdditionalKwargs[kwargInvalidToolCalls].([]any)[1].(map[string]any)["args"], "input not mutated")

	raw := aiMsg("a", "")
	raw.AdditionalKwargs = map[string]any{kwargRawToolCalls: []any{map[string]any{"id": "r1", "type": "function", "function": map[string]any{"name": "bash", "arguments": "{}"}}}}
	out, ok = BuildPatchedMessages([]message.Message{raw})
	require.True(t, ok, "raw provider calls are patched too")
	assert.Equal(t, "r1", out[1].ToolCallID)
}

func TestDanglingBlankIDsRecoverTheirResults(t *testing.T) {
	msgs := []message.Message{
		aiMsg("a", "", call("", "ls", nil), call(" ", "bash", nil)),
		toolMsg("t1", "", "ls", "ls result"),
		toolMsg("t2", "", "bash", "bash result"),
	}
	out, ok := BuildPatchedMessages(msgs)
	require.True(t, ok)
	require.Len(t, out, 3)
	assert.Equal(t, "deerflow_synthetic_tool_call_0_call_0", out[0].ToolCalls[0].ID)
	assert.Equal(t, "deerflow_synthetic_tool_call_0_call_1", out[0].ToolCalls[1].ID)
	assert.Equal(t, "ls result", out[1].Content)
	assert.Equal(t, "bash result", out[2].Content)

	// A lone nameless result with two eligible siblings is ambiguous: dropped, both patched.
	amb := []message.Message{aiMsg("a", "", call("", "ls", nil), call("", "ls", nil)), toolMsg("t", "", "", "which?")}
	out, _ = BuildPatchedMessages(amb)
	assert.Equal(t, []string{"ai", "tool:deerflow_synthetic_tool_call_0_call_0", "tool:deerflow_synthetic_tool_call_0_call_1"}, roles(out))
	assert.Equal(t, DanglingInterrupted, out[1].Content)

	// Valid ids are never altered, not even trimmed.
	valid := []message.Message{aiMsg("a", "", call(" call_1 ", "ls", nil)), toolMsg("t", " call_1 ", "ls", "r")}
	_, ok = BuildPatchedMessages(valid)
	assert.False(t, ok)
}

func TestDanglingWrapModelCall(t *testing.T) {
	m := NewDanglingToolCallMiddleware()
	var seen []message.Message
	h := func(_ context.Context, req *agent.ModelRequest) (*agent.ModelResponse, error) {
		seen = req.Request.Messages
		return &agent.ModelResponse{Message: aiMsg("r", "ok")}, nil
	}
	clean := modelReq(testRuntime(), human("h", "q"))
	_, err := m.WrapModelCall(context.Background(), clean, h)
	require.NoError(t, err)
	assert.Len(t, seen, 1, "unchanged request passed through")
	dangling := modelReq(testRuntime(), human("h", "q"), aiMsg("a", "", call("c", "ls", nil)), human("h2", "again"))
	_, _ = m.WrapModelCall(context.Background(), dangling, h)
	assert.Equal(t, []string{"human", "ai", "tool:c", "human"}, roles(seen), "placeholder right after its AI message, not at the end")
	assert.Len(t, dangling.Request.Messages, 3, "the request rewrite is ephemeral")
}

// The fast path must agree with the full pass: results out of call order are regrouped.
func TestDanglingFastPathAgreesWithFullPass(t *testing.T) {
	reordered := []message.Message{aiMsg("a", "", call("c1", "ls", nil), call("c2", "ls", nil)),
		toolMsg("t2", "c2", "ls", "2"), toolMsg("t1", "c1", "ls", "1")}
	out, ok := BuildPatchedMessages(reordered)
	require.True(t, ok)
	assert.Equal(t, []string{"ai", "tool:c1", "tool:c2"}, roles(out))
	dup := []message.Message{aiMsg("a", "", call("c", "ls", nil), call("c", "ls", nil)), toolMsg("t1", "c", "ls", "1"), toolMsg("t2", "c", "ls", "2")}
	assert.False(t, wellFormed(dup))
	_, ok = BuildPatchedMessages(dup)
	assert.False(t, ok, "reused ids paired FIFO: nothing to change")
}
