package scripted

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
)

func TestDemoScriptParses(t *testing.T) {
	s, err := Parse(DemoScript())
	require.NoError(t, err)
	names := []string{}
	for _, c := range s.Conversations {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"lead", "paris", "tokyo", "title", "summarize"}, names)
}

func TestMatchingByCallerPromptAndTurn(t *testing.T) {
	m, err := model.New(config.Model{Name: "main", Provider: ProviderName})
	require.NoError(t, err)
	assert.Equal(t, DefaultModelName, m.Info().Model)
	ctx := telemetry.WithCaller(context.Background(), "subagent:general-purpose")
	human := message.Human("Collect three facts about Tokyo")
	r1, err := m.Generate(ctx, &model.Request{Messages: []message.Message{human}})
	require.NoError(t, err)
	assert.Equal(t, "scripted-tokyo-1", r1.ID)
	assert.Equal(t, "call_tokyo_write", r1.Message.ToolCalls[0].ID)
	assert.Equal(t, "scripted-demo-mini", r1.Model)
	assert.Equal(t, []string{"tool_calls"}, r1.FinishReasons)
	assert.Equal(t, &message.UsageMetadata{InputTokens: 655, OutputTokens: 61, TotalTokens: 716}, r1.Message.UsageMetadata)
	r2, err := m.Generate(ctx, &model.Request{Messages: []message.Message{human, r1.Message, message.Tool("call_tokyo_write", "write_file", "ok", "")}})
	require.NoError(t, err)
	assert.Equal(t, "scripted-tokyo-2", r2.ID)
	assert.Equal(t, int64(512), r2.Message.UsageMetadata.CacheRead())

	_, err = m.Generate(ctx, &model.Request{Messages: []message.Message{message.Human("Berlin")}})
	assert.ErrorContains(t, err, `scripted: no conversation for caller "subagent:general-purpose"`)
	title, err := m.Generate(context.Background(), &model.Request{Caller: "middleware:title", Messages: []message.Message{message.Human("t")}})
	require.NoError(t, err)
	assert.Equal(t, "Paris vs Tokyo", title.Message.Content)
	assert.Equal(t, "middleware:title", title.Caller, "traced wrapper records the caller")
	assert.NotEmpty(t, title.CallID)
}

func TestStreamingDeltasAndErrorsAndDelay(t *testing.T) {
	s, err := Parse([]byte(`
conversations:
  - name: c
    caller: lead_agent
    turns:
      - content: "hello streaming world"
        reasoning: "think"
      - error: {status: 429, message: "slow down"}
  - name: slow
    caller: "middleware:*"
    turns:
      - content: x
        delay: 5s
`))
	require.NoError(t, err)
	m := model.Wrap(New(s, "m"), model.Info{Provider: "scripted", Model: "m", Stream: true})
	var deltas []string
	r, err := m.Generate(context.Background(), &model.Request{Messages: []message.Message{message.Human("a")},
		OnDelta: func(d model.Delta) { deltas = append(deltas, d.Reasoning+"|"+d.Content) }})
	require.NoError(t, err)
	assert.Equal(t, []string{"think|", "|hello ", "|streaming ", "|world"}, deltas)
	assert.Nil(t, r.Message.UsageMetadata, "no usage in the script means none reported")
	assert.Equal(t, "think", r.Message.AdditionalKwargs["reasoning_content"])

	_, err = m.Generate(context.Background(), &model.Request{Messages: []message.Message{message.Human("a"), r.Message}})
	var se *model.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 429, se.StatusCode)
	assert.True(t, model.IsRetryable(err))

	_, err = m.Generate(context.Background(), &model.Request{Messages: []message.Message{message.Human("a"), r.Message, r.Message}})
	assert.ErrorContains(t, err, `conversation "c" has 2 turns, request is turn 3`)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = m.Generate(ctx, &model.Request{Caller: "middleware:x", Messages: []message.Message{message.Human("a")}})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestParseErrors(t *testing.T) {
	for src, want := range map[string]string{
		`conversations: []`: "conversations: at least one is required",
		"conversations:\n  - {name: a, caller: x, turns: [{contnt: x}]}":                                   "field contnt not found",
		"conversations:\n  - {caller: x, turns: [{content: x}]}":                                           "conversations[0].name is required",
		"conversations:\n  - {name: a, caller: x, turns: [{tool_calls: [{id: c}]}]}":                       "conversations[0].turns[0].tool_calls[0].name is required",
		"conversations:\n  - {name: a, caller: x, turns: [{usage: {input: 1, output: 1, cache_read: 5}}]}": "cache within input",
	} {
		_, err := Parse([]byte(src))
		require.Error(t, err, src)
		assert.True(t, strings.Contains(err.Error(), want), "%q: got %v", src, err)
	}
	_, err := model.New(config.Model{Name: "x", Provider: ProviderName, Script: "/nonexistent/script.yaml"})
	assert.ErrorContains(t, err, `model "x": script: open /nonexistent/script.yaml`)
}

// A per_user_message conversation counts turns from the latest user message, so a thread
// whose history carries earlier runs replays the script; hidden human messages (reminders
// injected by middlewares) do not restart it.
func TestPerUserMessageTurns(t *testing.T) {
	s, err := Parse([]byte(`
conversations:
  - name: lead
    caller: lead_agent
    per_user_message: true
    turns:
      - {content: "", tool_calls: [{id: c1, name: ls, args: {}}]}
      - {content: "done"}
`))
	require.NoError(t, err)
	m := New(s, "x")
	ctx := telemetry.WithCaller(context.Background(), "lead_agent")
	u1 := message.Human("first")
	r1, err := m.Generate(ctx, &model.Request{Messages: []message.Message{u1}})
	require.NoError(t, err)
	hidden := message.Message{ID: "h", Role: message.RoleHuman, Name: "loop_warning", Content: "x", AdditionalKwargs: map[string]any{"hide_from_ui": true}}
	r2, err := m.Generate(ctx, &model.Request{Messages: []message.Message{u1, r1.Message, message.Tool("c1", "ls", "ok", ""), hidden}})
	require.NoError(t, err)
	assert.Equal(t, "done", r2.Message.Content)
	// The second run of the thread: its request carries the first run, then a new message.
	r3, err := m.Generate(ctx, &model.Request{Messages: []message.Message{u1, r1.Message, message.Tool("c1", "ls", "ok", ""), r2.Message, message.Human("second")}})
	require.NoError(t, err)
	assert.Equal(t, "c1", r3.Message.ToolCalls[0].ID, "the script starts again")
}

// A message quoted in an error is cut without cutting a character in two.
func TestClipKeepsUTF8(t *testing.T) {
	assert.Equal(t, "ab"+strings.Repeat("中", 26)+"...", clip("ab"+strings.Repeat("中", 40), 80))
	assert.Equal(t, "short", clip("short", 80))
}
