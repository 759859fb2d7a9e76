package middleware

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

const (
	tokenBudgetRunKey     = "middleware.token_budget"
	budgetWarningName     = "budget_warning"
	TokenBudgetWarningFmt = "[TOKEN BUDGET WARNING] This run has used %d of its %d %s budget (%.0f%%). Finish the task with the fewest further tool calls and produce your final answer soon."
	TokenBudgetExceeded   = "[TOKEN BUDGET EXCEEDED] This run has used %d of its %d %s budget. Tool calls were stopped; producing the final answer with the results collected so far."
)

// budgetRun is the run's cumulative usage, counted as positive deltas of each AI message's
// usage_metadata versus what was seen before (so subagent usage merged later onto a
// dispatcher by TokenUsageMiddleware is counted too, DeerFlow's TokenUsage and TokenBudget interplay).
type budgetRun struct {
	mu           sync.Mutex
	seen         map[string][3]int64 // message id → (input, output, total) already counted
	in, out, tot int64
	warning      budgetWarning
}

// TokenBudgetMiddleware (opt-in) enforces a per-run token budget: a one-time warning
// injected into the next request as HumanMessage "budget_warning", and a hard stop that
// strips tool calls and records stop_reason token_capped.
type TokenBudgetMiddleware struct {
	cfg TokenBudgetConfig
}

// NewTokenBudgetMiddleware validates cfg and returns the middleware.
func NewTokenBudgetMiddleware(cfg TokenBudgetConfig) (*TokenBudgetMiddleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &TokenBudgetMiddleware{cfg: cfg}, nil
}

// Name implements agent.Middleware.
func (*TokenBudgetMiddleware) Name() string { return NameTokenBudget }

func (m *TokenBudgetMiddleware) run(rt *agent.Runtime) *budgetRun {
	return runScoped(rt, tokenBudgetRunKey, func() *budgetRun { return &budgetRun{seen: map[string][3]int64{}} })
}

func usageTriple(u *message.UsageMetadata) [3]int64 {
	if u == nil {
		return [3]int64{}
	}
	return [3]int64{u.InputTokens, u.OutputTokens, u.Total()}
}

// BeforeAgent takes the baseline: usage already in the history belongs to earlier runs.
func (m *TokenBudgetMiddleware) BeforeAgent(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	b := m.run(rt)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, msg := range st.Messages {
		if msg.IsAI() {
			b.seen[msg.ID] = usageTriple(msg.UsageMetadata)
		}
	}
	return nil, nil
}

// AfterAgent forgets the run.
func (m *TokenBudgetMiddleware) AfterAgent(_ context.Context, rt *agent.Runtime, _ *state.State) (*state.Update, error) {
	if rt != nil && rt.Context != nil {
		rt.Context.Set(tokenBudgetRunKey, &budgetRun{seen: map[string][3]int64{}})
	}
	return nil, nil
}

// Usage returns the run's counted (input, output, total).
func (m *TokenBudgetMiddleware) Usage(rt *agent.Runtime) (int64, int64, int64) {
	b := m.run(rt)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.in, b.out, b.tot
}

// AfterModel implements agent.AfterModelHook.
func (m *TokenBudgetMiddleware) AfterModel(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	b := m.run(rt)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, msg := range st.Messages {
		if !msg.IsAI() || msg.UsageMetadata == nil {
			continue
		}
		cur, prev := usageTriple(msg.UsageMetadata), b.seen[msg.ID]
		b.in += max(0, cur[0]-prev[0])
		b.out += max(0, cur[1]-prev[1])
		b.tot += max(0, cur[2]-prev[2])
		b.seen[msg.ID] = [3]int64{max(cur[0], prev[0]), max(cur[1], prev[1]), max(cur[2], prev[2])}
	}
	used, limit, kind := b.tot, m.cfg.MaxTokens, "token"
	ratio := float64(used) / float64(limit)
	for _, l := range []struct {
		used, limit int64
		kind        string
	}{{b.in, m.cfg.MaxInputTokens, "input token"}, {b.out, m.cfg.MaxOutputTokens, "output token"}} {
		if l.limit > 0 && float64(l.used)/float64(l.limit) > ratio {
			used, limit, kind, ratio = l.used, l.limit, l.kind, float64(l.used)/float64(l.limit)
		}
	}
	last, isAI := lastAIIsLast(st.Messages)
	if ratio >= m.cfg.HardRatio && isAI && len(last.ToolCalls) > 0 {
		up := hardStop(rt, last, agent.StopTokenCapped, fmt.Sprintf(TokenBudgetExceeded, used, limit, kind))
		record(rt, "token_budget", NameTokenBudget, "after_model", "hard_stop", map[string]any{"used": used, "limit": limit})
		return up, nil
	}
	if ratio >= m.cfg.WarnRatio {
		b.warning.queueOnce(fmt.Sprintf(TokenBudgetWarningFmt, used, limit, kind, 100*ratio))
	}
	return nil, nil
}

// WrapModelCall injects the pending warning once, after all messages of the request.
func (m *TokenBudgetMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	return m.run(req.Runtime).warning.wrap(ctx, req, next, budgetWarningName)
}
