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

func ids(calls []message.ToolCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.ID)
	}
	return out
}

func withLedger(s *state.State, run string, n int) *state.State {
	var l []any
	for i := range n {
		l = append(l, map[string]any{"id": "old" + string(rune('a'+i)), "run_id": run})
	}
	s.Extra = map[string]any{DelegationsKey: l}
	return s
}

func TestSubagentLimitClamp(t *testing.T) {
	for in, want := range map[int]int{-3: 1, 0: 1, 1: 1, 2: 2, 3: 3, 4: 4, 5: 4, 10: 4, 100: 4} {
		assert.Equal(t, want, ClampConcurrent(in), in)
	}
	assert.Equal(t, 50, ClampTotal(500))
	assert.Equal(t, 1, ClampTotal(0))
	c, total := NewSubagentLimitMiddleware(3, 6).Limits()
	assert.Equal(t, []int{3, 6}, []int{c, total})
	d := DefaultSettings().Subagent
	assert.Equal(t, []int{3, 6}, []int{d.MaxConcurrent, d.MaxTotalPerRun})
}

func TestSubagentLimitTruncates(t *testing.T) {
	ctx := context.Background()
	m := NewSubagentLimitMiddleware(2, 6)
	for _, s := range []*state.State{st(), st(human("h", "q")), st(aiMsg("a", "text")), st(aiMsg("a", "", call("b", "bash", nil)))} {
		u, err := m.AfterModel(ctx, testRuntime(), s)
		require.NoError(t, err)
		assert.Nil(t, u)
	}
	last := aiMsg("a", "", call("t1", "task", nil), call("b1", "bash", nil), call("t2", "task", nil), call("t3", "task", nil))
	last.AdditionalKwargs = map[string]any{kwargRawToolCalls: []any{
		map[string]any{"id": "t1", "function": map[string]any{"name": "task"}},
		map[string]any{"id": "b1", "function": map[string]any{"name": "bash"}},
		map[string]any{"id": "t3", "function": map[string]any{"name": "task"}},
	}}
	u, err := m.AfterModel(ctx, testRuntime(), st(last))
	require.NoError(t, err)
	got := u.Messages[0]
	assert.Equal(t, []string{"t1", "b1", "t2"}, ids(got.ToolCalls), "first two task calls kept, non-task untouched")
	assert.Len(t, got.AdditionalKwargs[kwargRawToolCalls], 2, "raw provider calls synced")
	assert.Equal(t, "tool_calls", finishReason(got))
	assert.NotContains(t, got.Content, "LIMIT")
}

func TestSubagentLimitPerRunTotal(t *testing.T) {
	ctx := context.Background()
	m := NewSubagentLimitMiddleware(3, 6)
	rt := testRuntime()
	last := aiMsg("a", "", call("t4", "task", nil), call("t5", "task", nil))
	u, err := m.AfterModel(ctx, rt, withLedger(st(last), "run-1", 5))
	require.NoError(t, err)
	assert.Equal(t, []string{"t4"}, ids(u.Messages[0].ToolCalls), "prior current-run delegations reduce the allowance")
	assert.NotContains(t, u.Messages[0].Content, "LIMIT")
	assert.Empty(t, rt.Context.StopReason())

	u, _ = m.AfterModel(ctx, rt, withLedger(st(last), "other-run", 5))
	assert.Nil(t, u, "previous runs' delegations are ignored: within the limit")

	rt2 := testRuntime()
	u, _ = m.AfterModel(ctx, rt2, withLedger(st(last), "run-1", 6))
	got := u.Messages[0]
	assert.Empty(t, got.ToolCalls)
	assert.Equal(t, "stop", finishReason(got))
	assert.Equal(t, SubagentLimitNotice, got.Content)
	assert.Equal(t, agent.StopSubagentLimit, rt2.Context.StopReason())

	mixed := aiMsg("a", "working", call("t9", "task", nil), call("b", "bash", nil))
	u, _ = m.AfterModel(ctx, testRuntime(), withLedger(st(mixed), "run-1", 6))
	assert.Equal(t, []string{"b"}, ids(u.Messages[0].ToolCalls), "bash kept")
	assert.Equal(t, "working\n\n"+SubagentLimitNotice, u.Messages[0].Content)

	noRun := testRuntime()
	noRun.RunID = ""
	u, _ = m.AfterModel(ctx, noRun, withLedger(st(last), "whatever", 6))
	assert.Empty(t, u.Messages[0].ToolCalls, "missing run id counts every ledger entry")
}
