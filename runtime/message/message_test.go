package message

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
)

func TestConstructorsGiveStableUniqueIDs(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range []Message{Human("q"), System("s"), AI("a"), Tool("c1", "bash", "ok", "")} {
		require.NotEmpty(t, m.ID)
		assert.False(t, seen[m.ID], "ids are unique")
		seen[m.ID] = true
	}
	tm := Tool("c1", "bash", "ok", "")
	assert.Equal(t, ToolSuccess, tm.Status, "default status success")
	assert.Equal(t, "c1", tm.ToolCallID)
	c := tm.Clone()
	assert.Equal(t, tm.ID, c.ID, "clone keeps the id")
}

func TestCloneIsDeep(t *testing.T) {
	m := AI("x", ToolCall{ID: "c", Name: "task", Args: map[string]any{"prompt": "p"}})
	m.UsageMetadata = &UsageMetadata{InputTokens: 1, InputTokenDetails: &InputTokenDetails{CacheRead: 1}}
	m.AdditionalKwargs = map[string]any{"nested": map[string]any{"k": 1}}
	c := m.Clone()
	c.ToolCalls[0].Args["prompt"] = "changed"
	c.UsageMetadata.InputTokenDetails.CacheRead = 9
	c.AdditionalKwargs["nested"].(map[string]any)["k"] = 2
	assert.Equal(t, "p", m.ToolCalls[0].Args["prompt"])
	assert.Equal(t, int64(1), m.UsageMetadata.InputTokenDetails.CacheRead)
	assert.Equal(t, 1, m.AdditionalKwargs["nested"].(map[string]any)["k"])

	w := m.WithKwarg("flag", true)
	_, has := m.Kwarg("flag")
	assert.False(t, has, "WithKwarg does not touch the original")
	v, _ := w.Kwarg("flag")
	assert.Equal(t, true, v)
}

func TestUsageConversions(t *testing.T) {
	u := genai.Usage{Input: 120, Output: 30, CacheRead: 100, CacheCreation: 10, Reasoning: 12}
	um := UsageFromGenAI(u)
	assert.Equal(t, int64(150), um.TotalTokens)
	assert.Equal(t, u, um.GenAI(), "round trip")
	assert.Equal(t, int64(100), um.CacheRead())
	plain := UsageFromGenAI(genai.Usage{Input: 1, Output: 2})
	assert.Nil(t, plain.InputTokenDetails, "no detail blocks without details")
	assert.Nil(t, plain.OutputTokenDetails)
	assert.Equal(t, int64(50), UsageMetadata{InputTokens: 30, OutputTokens: 20}.Total(), "missing total derived")
	assert.Equal(t, int64(7), UsageMetadata{InputTokens: 30, OutputTokens: 20, TotalTokens: 7}.Total(), "explicit total kept")
}

func TestJSONShapeIsLangChains(t *testing.T) {
	m := AI("hi", ToolCall{ID: "call_1", Name: "bash", Args: map[string]any{"command": "ls"}})
	m.ID = "msg_1"
	um := UsageFromGenAI(genai.Usage{Input: 10, Output: 5, CacheRead: 4, Reasoning: 2})
	m.UsageMetadata = &um
	m.ResponseMetadata = map[string]any{MetaModelName: "gpt"}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"msg_1","type":"ai","content":"hi",
		"tool_calls":[{"id":"call_1","name":"bash","args":{"command":"ls"}}],
		"usage_metadata":{"input_tokens":10,"output_tokens":5,"total_tokens":15,
			"input_token_details":{"cache_read":4},"output_token_details":{"reasoning":2}},
		"response_metadata":{"model_name":"gpt"}}`, string(b))
	var back Message
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, "gpt", back.ModelName())
	assert.Equal(t, []string{"call_1"}, back.ToolCallIDs())
}

func TestModelNameLookup(t *testing.T) {
	assert.Equal(t, "a", Message{ResponseMetadata: map[string]any{MetaModelName: "a", MetaModel: "b"}}.ModelName())
	assert.Equal(t, "b", Message{ResponseMetadata: map[string]any{MetaModel: "b"}}.ModelName())
	assert.Equal(t, "", Message{}.ModelName())
}

func TestUpsertAndRemove(t *testing.T) {
	a, b, c := Human("a"), AI("b"), Tool("x", "t", "c", "")
	list := []Message{a, b}
	b2 := b.Clone()
	b2.Content = "b2"
	out := Upsert(list, b2, c)
	require.Len(t, out, 3)
	assert.Equal(t, "b2", out[1].Content, "same id replaces in place")
	assert.Equal(t, c.ID, out[2].ID, "new id appends")
	assert.Equal(t, "b", list[1].Content, "input not mutated")
	noID := Upsert(nil, Message{Role: RoleHuman, Content: "z"})
	assert.NotEmpty(t, noID[0].ID)

	out = Remove(out, b.ID, "unknown")
	assert.Equal(t, []string{a.ID, c.ID}, []string{out[0].ID, out[1].ID})
	assert.Equal(t, -1, LastAI(out))
	assert.Equal(t, 1, Find(out, c.ID))
	assert.Equal(t, 1, LastAI([]Message{a, b}))
}
