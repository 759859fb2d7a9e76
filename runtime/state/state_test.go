package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/message"
)

func TestApply(t *testing.T) {
	h, a := message.Human("q"), message.AI("a")
	s := State{Messages: []message.Message{h, a}, Artifacts: []string{"/workspace/a"}}
	todos := []Todo{{Content: "x", Status: TodoPending}}
	title := "T"
	edited := a.Clone()
	edited.Content = "edited"
	next := s.Apply(&Update{
		Messages: []message.Message{edited, message.AI("new")}, Todos: &todos, Title: &title,
		Artifacts: []string{"/workspace/a", "/workspace/b"}, Extra: map[string]any{"k": 1},
		Sandbox: &Sandbox{SandboxID: "sb"}, ThreadData: &ThreadData{WorkspacePath: "/w"},
	})
	require.Len(t, next.Messages, 3)
	assert.Equal(t, "edited", next.Messages[1].Content)
	assert.Equal(t, "a", s.Messages[1].Content, "original untouched")
	assert.Equal(t, todos, next.Todos)
	assert.Equal(t, "T", next.Title)
	assert.Equal(t, []string{"/workspace/a", "/workspace/b"}, next.Artifacts, "artifacts merged without duplicates")
	assert.Equal(t, []string{"/workspace/a"}, s.Artifacts)
	assert.Equal(t, "sb", next.Sandbox.SandboxID)
	assert.Equal(t, "/w", next.ThreadData.WorkspacePath)

	cleared := next.Apply(&Update{Todos: &[]Todo{}, Extra: map[string]any{"k": nil}})
	assert.NotNil(t, cleared.Todos)
	assert.Empty(t, cleared.Todos)
	assert.NotContains(t, cleared.Extra, "k")
	assert.Equal(t, 1, next.Extra["k"])

	replaced := next.Apply(&Update{RemoveAll: true, Messages: []message.Message{h}})
	assert.Equal(t, []string{h.ID}, []string{replaced.Messages[0].ID})
	removed := next.Apply(&Update{RemoveMessageIDs: []string{h.ID}})
	assert.Len(t, removed.Messages, 2)
	assert.True(t, (*Update)(nil).IsZero())
	assert.True(t, (&Update{}).IsZero())
	assert.False(t, (&Update{JumpTo: JumpEnd}).IsZero())
}

func TestMerge(t *testing.T) {
	t1 := []Todo{{Content: "a"}}
	a := &Update{Messages: []message.Message{message.AI("1")}, Todos: &t1, Artifacts: []string{"x"}}
	b := &Update{Messages: []message.Message{message.AI("2")}, JumpTo: JumpEnd, Artifacts: []string{"y"}, Extra: map[string]any{"k": 1}}
	m := Merge(a, b)
	assert.Len(t, m.Messages, 2)
	assert.Equal(t, &t1, m.Todos)
	assert.Equal(t, JumpEnd, m.JumpTo)
	assert.Equal(t, []string{"x", "y"}, m.Artifacts)
	assert.Equal(t, 1, m.Extra["k"])
	assert.Equal(t, JumpEnd, Merge(&Update{JumpTo: JumpEnd}, &Update{JumpTo: JumpModel}).JumpTo, "end wins")
	assert.Same(t, a, Merge(a, nil))
	assert.Same(t, b, Merge(nil, b))
}
