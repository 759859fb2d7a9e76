package middleware

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

func TestDurableContextLedger(t *testing.T) {
	m := NewDurableContextMiddleware()
	ctx, rt := context.Background(), testRuntime()
	dispatch := aiMsg("a", "", call("t1", "task", map[string]any{"description": strings.Repeat("d", 300), "subagent_type": "general-purpose"}), call("b", "bash", nil))
	s := st(human("h", "q"), dispatch)
	u, err := m.AfterModel(ctx, rt, s)
	require.NoError(t, err)
	s = mustApply(t, s, u)
	l := s.Extra[DelegationsKey].([]any)
	require.Len(t, l, 1, "only task calls")
	e := l[0].(map[string]any)
	assert.Equal(t, "dispatched", e["status"])
	assert.Equal(t, "run-1", e["run_id"])
	assert.Len(t, e["description"], 200)
	u, _ = m.AfterModel(ctx, rt, s)
	assert.Nil(t, u, "already in the ledger")

	res := toolMsg("r1", "t1", "task", "Paris has 2.1 million people.")
	res.AdditionalKwargs = map[string]any{message.KwargSubagentStatus: "completed"}
	s = mustApply(t, s, &state.Update{Messages: []message.Message{res}})
	u, _ = m.BeforeModel(ctx, rt, s)
	s = mustApply(t, s, u)
	e = s.Extra[DelegationsKey].([]any)[0].(map[string]any)
	assert.Equal(t, "completed", e["status"])
	assert.Equal(t, "Paris has 2.1 million people.", e["result_brief"])
	assert.Len(t, e["result_sha256"], 64)
	downgrade := res.Clone()
	downgrade.AdditionalKwargs[message.KwargSubagentStatus] = "running"
	s2 := mustApply(t, s, &state.Update{Messages: []message.Message{downgrade}})
	u, _ = m.BeforeModel(ctx, rt, s2)
	assert.Nil(t, u, "a terminal status is never downgraded")

	var seen []message.Message
	req := modelReq(rt, message.System("sys"), human("h", "q"))
	req.State = &state.State{Extra: map[string]any{SummaryTextKey: "S <b>", DelegationsKey: s.Extra[DelegationsKey]}}
	_, err = m.WrapModelCall(ctx, req, func(_ context.Context, r *agent.ModelRequest) (*agent.ModelResponse, error) {
		seen = r.Request.Messages
		return &agent.ModelResponse{Message: aiMsg("r", "ok")}, nil
	})
	require.NoError(t, err)
	require.Len(t, seen, 4)
	assert.Equal(t, "sys", seen[0].Content)
	assert.Equal(t, DurableAuthorityContract, seen[1].Content)
	assert.Equal(t, "durable_context_data", seen[2].Name)
	assert.Contains(t, seen[2].Content, "<conversation_summary>\nS &lt;b&gt;")
	assert.Contains(t, seen[2].Content, "[completed]")
	assert.Len(t, req.Request.Messages, 2, "request rewrite is ephemeral")
	_, _ = m.WrapModelCall(ctx, modelReq(rt, human("h", "q")), func(_ context.Context, r *agent.ModelRequest) (*agent.ModelResponse, error) {
		seen = r.Request.Messages
		return &agent.ModelResponse{Message: aiMsg("r", "ok")}, nil
	})
	assert.Len(t, seen, 1, "nothing durable: pass through")
}

// SubagentLimit truncates before DurableContext captures: dropped calls never enter the
// ledger, and the ledger is what the next response's per-run count reads.
func TestDurableContextCapturesAfterSubagentLimit(t *testing.T) {
	chain := []agent.Middleware{NewDurableContextMiddleware(), NewSubagentLimitMiddleware(1, 2)}
	p := &scriptedProvider{}
	for turn := range 3 {
		p.turns = append(p.turns, reply(aiMsg("", "", call("t"+string(rune('a'+2*turn)), "task", nil), call("t"+string(rune('b'+2*turn)), "task", nil))))
	}
	res := runAgent(t, p, chain, "go", countingTool{n: new(int)}, taskStub{})
	l := res.State.Extra[DelegationsKey].([]any)
	var ids []string
	for _, e := range l {
		ids = append(ids, e.(map[string]any)["id"].(string))
	}
	assert.Equal(t, []string{"ta", "tc"}, ids, "one per response, two per run; excess never recorded")
	assert.Equal(t, agent.StopSubagentLimit, res.StopReason)
}
