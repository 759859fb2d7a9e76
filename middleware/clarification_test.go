package middleware

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

func TestNormaliseOptions(t *testing.T) {
	assert.Equal(t, []string{"a", "b"}, NormaliseOptions([]any{"a", " b ", "", "a"}))
	assert.Equal(t, []string{"x", "y"}, NormaliseOptions(`["x","y"]`))
	assert.Equal(t, []string{"only"}, NormaliseOptions("only"))
	assert.Equal(t, []string{"2"}, NormaliseOptions("2"))
	assert.Equal(t, []string{"2", "True", "None"}, NormaliseOptions(`[2, true, null]`))
	assert.Empty(t, NormaliseOptions(nil))
	assert.Equal(t, []string{"First", "2"}, NormaliseOptions(map[string]any{"a": "First", "b": map[string]any{"c": 2.0}}))
	assert.Equal(t, []string{"bold"}, NormaliseOptions([]any{"<b>bold</b>"}), "XML tags removed")
}

func TestBuildClarification(t *testing.T) {
	text, p := BuildClarification("tc1", map[string]any{"question": "Which city?", "context": "Two match.",
		"clarification_type": "ambiguous_requirement", "options": []any{"Paris", "Tokyo"}})
	assert.Equal(t, "🤔 Two match.\n\nWhich city?\n\n  1. Paris\n\n  2. Tokyo", text)
	assert.Equal(t, "clarification:tc1", p["request_id"])
	assert.Equal(t, "choice_with_other", p["input_mode"])
	assert.Equal(t, 1, p["version"])
	assert.Equal(t, "option-1", p["options"].([]map[string]any)[0]["id"])
	assert.Equal(t, "human_input_request", p["kind"])
	assert.Equal(t, "ask_clarification", p["source"])

	_, free := BuildClarification("tc2", map[string]any{"question": "Why?"})
	assert.Equal(t, "free_text", free["input_mode"])
	assert.NotContains(t, free, "options")

	fields := []any{
		map[string]any{"name": "city", "type": "select", "options": []any{"Paris", "Tokyo"}, "required": true},
		map[string]any{"name": "when", "type": "weird"},
		map[string]any{"name": "pick", "type": "select"},
	}
	ftext, form := BuildClarification("tc3", map[string]any{"question": "Details", "fields": fields, "options": []any{"ignored"}})
	assert.Equal(t, "form", form["input_mode"], "form beats options")
	assert.Equal(t, 2, form["version"])
	fs := form["fields"].([]map[string]any)
	assert.Equal(t, "text", fs[1]["type"], "unknown type degrades to text")
	assert.Equal(t, "text", fs[2]["type"], "option-less select degrades to text")
	assert.Contains(t, ftext, "city (required) — options: Paris / Tokyo")

	for _, bad := range [][]any{
		{map[string]any{"name": "a"}, map[string]any{"name": "a"}},
		{map[string]any{"name": "__proto__"}},
		{"not a field"},
	} {
		_, p := BuildClarification("x", map[string]any{"question": "q", "fields": bad})
		assert.Equal(t, 1, p["version"], "invalid forms degrade atomically: %v", bad)
	}
	many := make([]any, 17)
	for i := range many {
		many[i] = map[string]any{"name": string(rune('a' + i))}
	}
	_, p = BuildClarification("x", map[string]any{"question": "q", "fields": many})
	assert.Equal(t, 1, p["version"], "more than 16 fields")

	t1, a := BuildClarification("", map[string]any{"question": "same"})
	_, b := BuildClarification("", map[string]any{"question": "same"})
	assert.Equal(t, a["request_id"], b["request_id"], "missing id: stable hash id")
	assert.NotEmpty(t, t1)
}

func TestClarificationWrapToolCall(t *testing.T) {
	m := NewClarificationMiddleware()
	called := 0
	next := func(context.Context, *agent.ToolRequest) (*agent.ToolResponse, error) {
		called++
		return &agent.ToolResponse{Message: message.Tool("c", "ls", "ok", "")}, nil
	}
	rt := testRuntime()
	_, _ = m.WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("c", "ls", nil), Runtime: rt}, next)
	assert.Equal(t, 1, called, "other tools pass through")
	resp, err := m.WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("c9", "ask_clarification", map[string]any{"question": "Which?"}), Runtime: rt}, next)
	require.NoError(t, err)
	assert.Equal(t, 1, called, "short-circuited")
	assert.Equal(t, state.JumpEnd, resp.Update.JumpTo)
	assert.Equal(t, "clarification:c9", resp.Message.ID)
	assert.Contains(t, resp.Message.AdditionalKwargs, "artifact")
	rt.Context.Set(DisableClarificationKey, true)
	resp, _ = m.WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("c9", "ask_clarification", map[string]any{"question": "Which?"}), Runtime: rt}, next)
	assert.Nil(t, resp.Update, "disabled: the loop continues")
	assert.Equal(t, ClarificationDisabledMessage, resp.Message.Content)
	assert.NotContains(t, resp.Message.AdditionalKwargs, "artifact")
}
