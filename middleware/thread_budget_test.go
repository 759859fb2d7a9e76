package middleware

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// dollarPerMillion prices every token at $1 per million.
type dollarPerMillion struct{}

func (dollarPerMillion) Price(_, _ string, u genai.Usage, _ int64, _ time.Time) (genai.Cost, bool) {
	c := genai.Cost{Input: float64(u.Input) / 1e6, Output: float64(u.Output) / 1e6}
	c.Total = c.Input + c.Output
	return c, true
}

func leadCall(j *journal.RunJournal, id string, in, out int64) {
	m := message.AI("x")
	m.UsageMetadata = &message.UsageMetadata{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
	j.OnLLMEnd(id, genai.BucketLeadAgent, []message.Message{m}, time.Millisecond)
}

// The lead alone stays under the budget; its subagents' calls (reported by the task tool)
// and a middleware's call push the thread over it: the next lead response loses its tool
// calls and the run records stop_reason budget_capped, with a message naming the limit.
func TestThreadBudgetCountsSubagentsAndMiddlewares(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   ThreadBudgetConfig
		limit string
	}{
		{"tokens", ThreadBudgetConfig{Enabled: true, MaxTokens: 10_000, WarnRatio: 0.5, HardRatio: 1}, "10000-token"},
		{"usd", ThreadBudgetConfig{Enabled: true, MaxCostUSD: 0.01, WarnRatio: 0.5, HardRatio: 1}, "0.0100 USD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewThreadBudgetMiddleware(tc.cfg)
			require.NoError(t, err)
			ctx, rt := context.Background(), testRuntime()
			rt.Journal = journal.New(journal.Options{Pricer: dollarPerMillion{}})

			leadCall(rt.Journal, "l1", 2000, 100) // lead: 2,100 tokens, $0.0021
			dispatch := aiMsg("a1", "", call("task-1", "task", nil))
			s := st(human("h", "q"), dispatch)
			u, _ := m.AfterModel(ctx, rt, s)
			assert.Nil(t, u, "lead alone is far under the budget")

			// the subagent's calls and the title middleware's call
			rt.Journal.RecordExternalLLMUsageRecords([]journal.UsageRecord{
				{SourceRunID: "s1", Caller: "subagent:researcher", InputTokens: 4000, OutputTokens: 500, TotalTokens: 4500},
				{SourceRunID: "s2", Caller: "subagent:researcher", InputTokens: 3000, OutputTokens: 400, TotalTokens: 3400},
			})
			mw := message.AI("title")
			mw.UsageMetadata = &message.UsageMetadata{InputTokens: 200, OutputTokens: 10, TotalTokens: 210}
			rt.Journal.OnLLMEnd("t1", "middleware:title", []message.Message{mw}, time.Millisecond)

			leadCall(rt.Journal, "l2", 1000, 50) // thread now 11,260 tokens, $0.01126
			next := aiMsg("a2", "", call("c2", "write_file", nil))
			s = mustApply(t, s, &state.Update{Messages: []message.Message{toolMsg("t", "task-1", "task", "done"), next}})
			u, _ = m.AfterModel(ctx, rt, s)
			require.NotNil(t, u, "the subagents pushed the thread over its budget")
			stopped := u.Messages[0]
			assert.Empty(t, stopped.ToolCalls)
			assert.Contains(t, stopped.Content, "THREAD BUDGET EXCEEDED")
			assert.Contains(t, stopped.Content, tc.limit)
			assert.Equal(t, StopBudgetCapped, rt.Context.StopReason())
		})
	}
}

// Earlier runs of the thread count (the gateway's baseline), and the warning is injected
// once into the next request.
func TestThreadBudgetBaselineAndWarning(t *testing.T) {
	m, err := NewThreadBudgetMiddleware(ThreadBudgetConfig{Enabled: true, MaxTokens: 10_000, WarnRatio: 0.8, HardRatio: 1})
	require.NoError(t, err)
	ctx, rt := context.Background(), testRuntime()
	rt.Journal = journal.New(journal.Options{})
	rt.Context.Set(journal.BaselineContextKey, journal.ThreadBaseline{Tokens: 8000})
	leadCall(rt.Journal, "l1", 400, 100)
	u, _ := m.AfterModel(ctx, rt, st(human("h", "q"), aiMsg("a1", "", call("c", "ls", nil))))
	assert.Nil(t, u, "8,500 of 10,000: a warning, no stop")
	tokens, _ := m.ThreadUsage(rt)
	assert.Equal(t, int64(8500), tokens)

	var seen []message.Message
	h := func(_ context.Context, r *agent.ModelRequest) (*agent.ModelResponse, error) {
		seen = r.Request.Messages
		return &agent.ModelResponse{Message: aiMsg("r", "ok")}, nil
	}
	_, _ = m.WrapModelCall(ctx, modelReq(rt, human("h", "q")), h)
	require.Len(t, seen, 2)
	assert.Equal(t, "thread_budget_warning", seen[1].Name)
	assert.Contains(t, seen[1].Content, "This thread has used 8500 tokens of its 10000-token budget (85%)")
	_, _ = m.WrapModelCall(ctx, modelReq(rt, human("h", "q")), h)
	assert.Len(t, seen, 1, "warned once")

	leadCall(rt.Journal, "l2", 1400, 100)
	final := aiMsg("a2", "the answer")
	u, _ = m.AfterModel(ctx, rt, st(human("h", "q"), final))
	assert.Nil(t, u, "a final answer is never rewritten, even over the budget")
}

func TestThreadBudgetConfig(t *testing.T) {
	d := DefaultThreadBudgetConfig()
	require.NoError(t, d.Validate(), "off by default, no limits")
	for _, tc := range []struct {
		cfg  ThreadBudgetConfig
		want string
	}{
		{ThreadBudgetConfig{Enabled: true, WarnRatio: 0.8, HardRatio: 1}, "max_tokens, max_cost_usd, max_user_tokens or max_user_cost_usd must be set when enabled"},
		{ThreadBudgetConfig{MaxUserTokens: -1, WarnRatio: 0.8, HardRatio: 1}, "max_user_tokens must not be negative"},
		{ThreadBudgetConfig{MaxTokens: -1, WarnRatio: 0.8, HardRatio: 1}, "max_tokens must not be negative"},
		{ThreadBudgetConfig{MaxCostUSD: -1, WarnRatio: 0.8, HardRatio: 1}, "max_cost_usd must not be negative"},
		{ThreadBudgetConfig{MaxTokens: 5, WarnRatio: 2, HardRatio: 1}, "warn_ratio must be positive and at most hard_ratio"},
	} {
		assert.ErrorContains(t, tc.cfg.Validate(), tc.want)
	}
}

// The user's budget counts every thread of the user: a fresh thread of a user who has
// spent most of their budget elsewhere is stopped, with the user scope in the message.
func TestUserBudget(t *testing.T) {
	m, err := NewThreadBudgetMiddleware(ThreadBudgetConfig{Enabled: true, MaxTokens: 100_000, MaxUserCostUSD: 1, WarnRatio: 0.8, HardRatio: 1})
	require.NoError(t, err)
	ctx, rt := context.Background(), testRuntime()
	rt.Journal = journal.New(journal.Options{Pricer: dollarPerMillion{}})
	rt.Context.Set(journal.BaselineContextKey, journal.ThreadBaseline{UserTokens: 900_000, UserCostUSD: 0.999})
	leadCall(rt.Journal, "l1", 2000, 100)
	u, _ := m.AfterModel(ctx, rt, st(human("h", "q"), aiMsg("a1", "", call("c", "ls", nil))))
	require.NotNil(t, u)
	assert.Contains(t, u.Messages[0].Content, "This user has used 1.0011 USD of its 1.0000 USD budget")
	assert.Equal(t, StopBudgetCapped, rt.Context.StopReason())
}
