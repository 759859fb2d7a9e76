package middleware

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

func TestTitleConfigDefaultsAndValidation(t *testing.T) {
	d := DefaultTitleConfig()
	assert.True(t, d.Enabled)
	assert.Equal(t, 6, d.MaxWords)
	assert.Equal(t, 60, d.MaxChars)
	assert.Empty(t, d.ModelName)
	bad := d
	bad.MaxWords, bad.MaxChars = 21, 5
	err := bad.Validate()
	assert.ErrorContains(t, err, "max_words must be between 1 and 20")
	assert.ErrorContains(t, err, "max_chars must be between 10 and 200")
}

func TestShouldGenerateTitle(t *testing.T) {
	cfg := DefaultTitleConfig()
	first := st(human("h", "hi"), aiMsg("a", "hello"))
	assert.True(t, ShouldGenerateTitle(cfg, first))
	reminder := message.Message{ID: "r", Role: message.RoleHuman, Content: "<memory>", AdditionalKwargs: map[string]any{KwargDynamicContextReminder: true}}
	assert.True(t, ShouldGenerateTitle(cfg, st(reminder, human("h", "hi"), aiMsg("a", "x"))), "reminders are not user turns")
	off := cfg
	off.Enabled = false
	assert.False(t, ShouldGenerateTitle(off, first))
	titled := *first
	titled.Title = "Set"
	assert.False(t, ShouldGenerateTitle(cfg, &titled))
	assert.False(t, ShouldGenerateTitle(cfg, st(human("h", "a"), aiMsg("a", "b"), human("h2", "c"), aiMsg("a2", "d"))))
	assert.False(t, ShouldGenerateTitle(cfg, st(human("h", "alone"))))
}

func TestFallbackTitle(t *testing.T) {
	assert.Equal(t, strings.Repeat("x", 50)+"...", FallbackTitle(strings.Repeat("x", 80), 60))
	got := FallbackTitle(strings.Repeat("y", 80), 20)
	assert.LessOrEqual(t, len([]rune(got)), 20)
	assert.True(t, strings.HasSuffix(got, "..."))
	assert.Equal(t, "short", FallbackTitle("  short ", 60))
	assert.Equal(t, NewConversationTitle, FallbackTitle("   ", 60))
	assert.Equal(t, "短标题", ParseTitle(`"短标题"`, 10))
	assert.Equal(t, "Paris", ParseTitle("<think>hmm</think> 'Paris'", 60))
	assert.Equal(t, "", ParseTitle("<think>only</think>", 60))
	assert.Equal(t, "abcdefghij", ParseTitle("abcdefghijklmno", 10))
}

type titleModel struct {
	reqs   []*model.Request
	answer string
	err    error
}

func (m *titleModel) Generate(_ context.Context, req *model.Request) (*model.Response, error) {
	m.reqs = append(m.reqs, req)
	if m.err != nil {
		return nil, m.err
	}
	return &model.Response{Message: aiMsg("t", m.answer)}, nil
}

func (m *titleModel) Info() model.Info { return model.Info{Name: "title", Model: "title-model"} }

func TestTitleModelCallTaggedAndFallback(t *testing.T) {
	mw, err := NewTitleMiddleware(DefaultTitleConfig(), nil)
	require.NoError(t, err)
	tm := &titleModel{answer: "<think>x</think>\"Paris vs Tokyo\""}
	rt := testRuntime()
	rt.Model = tm
	s := st(human("h", "Compare <think>secret</think>Paris and Tokyo"), aiMsg("a", "Sure"))
	u, err := mw.AfterModel(context.Background(), rt, s)
	require.NoError(t, err)
	assert.Equal(t, "Paris vs Tokyo", *u.Title)
	require.Len(t, tm.reqs, 1)
	req := tm.reqs[0]
	assert.Equal(t, TitleCaller, req.Caller)
	require.NotNil(t, req.Stream)
	assert.False(t, *req.Stream, "nostream")
	prompt := req.Messages[0].Content
	assert.Contains(t, prompt, "max 6 words")
	assert.Contains(t, prompt, "Compare Paris and Tokyo")
	assert.NotContains(t, prompt, "secret", "think blocks stripped from the prompt")

	tm.err = errors.New("down")
	long := strings.Repeat("z", 70)
	u, _ = mw.AfterModel(context.Background(), rt, st(human("h", long), aiMsg("a", "x")))
	assert.Equal(t, strings.Repeat("z", 50)+"...", *u.Title, "model error falls back")

	noModel := &agent.Runtime{ThreadID: "t", Context: agent.NewRunContext()}
	u, _ = mw.AfterModel(context.Background(), noModel, st(human("h", "hello"), aiMsg("a", "x")))
	assert.Equal(t, "hello", *u.Title, "no title model: local fallback")
	u, _ = mw.AfterModel(context.Background(), rt, &state.State{Title: "set", Messages: s.Messages})
	assert.Nil(t, u)
}
