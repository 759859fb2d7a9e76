package middleware

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// StopBudgetCapped is the stop reason of a run stopped by ThreadBudgetMiddleware.
const StopBudgetCapped = "budget_capped"

const (
	threadBudgetRunKey     = "middleware.thread_budget"
	threadBudgetWarnName   = "thread_budget_warning"
	ThreadBudgetWarningFmt = "[THREAD BUDGET WARNING] This %s has used %s of its %s budget (%.0f%%), counting the lead agent, its subagents and middleware model calls. Finish the task with the fewest further tool calls and produce your final answer soon."
	ThreadBudgetExceeded   = "[THREAD BUDGET EXCEEDED] This %s has used %s of its %s budget, counting the lead agent, its subagents and middleware model calls. Tool calls were stopped; producing the final answer with the results collected so far."
)

// ThreadBudgetConfig configures ThreadBudgetMiddleware (opt-in): a budget in tokens
// and/or USD over everything a thread's runs spend — the lead agent's calls, every
// subagent's and the middlewares' own model calls — not only the lead's own, as
// TokenBudget counts.
type ThreadBudgetConfig struct {
	Enabled    bool    `yaml:"enabled"`      // default false
	MaxTokens  int64   `yaml:"max_tokens"`   // input+output over the thread; 0 = no token limit
	MaxCostUSD float64 `yaml:"max_cost_usd"` // USD over the thread (docs/cost.md); 0 = no cost limit
	// MaxUserTokens and MaxUserCostUSD are the same limits over every thread of the run's
	// user (the gateway's run store knows them; 0 = none).
	MaxUserTokens  int64   `yaml:"max_user_tokens"`
	MaxUserCostUSD float64 `yaml:"max_user_cost_usd"`
	WarnRatio      float64 `yaml:"warn_ratio"` // default 0.8
	HardRatio      float64 `yaml:"hard_ratio"` // default 1.0
}

// DefaultThreadBudgetConfig returns the defaults (off, no limits).
func DefaultThreadBudgetConfig() ThreadBudgetConfig {
	return ThreadBudgetConfig{WarnRatio: 0.8, HardRatio: 1.0}
}

// Validate implements the config section contract.
func (c *ThreadBudgetConfig) Validate() error {
	var errs []error
	if c.MaxTokens < 0 {
		errs = append(errs, errors.New("max_tokens must not be negative"))
	}
	if !(c.MaxCostUSD >= 0) {
		errs = append(errs, errors.New("max_cost_usd must not be negative"))
	}
	if c.MaxUserTokens < 0 {
		errs = append(errs, errors.New("max_user_tokens must not be negative"))
	}
	if !(c.MaxUserCostUSD >= 0) {
		errs = append(errs, errors.New("max_user_cost_usd must not be negative"))
	}
	if c.Enabled && c.MaxTokens == 0 && c.MaxCostUSD == 0 && c.MaxUserTokens == 0 && c.MaxUserCostUSD == 0 {
		errs = append(errs, errors.New("max_tokens, max_cost_usd, max_user_tokens or max_user_cost_usd must be set when enabled"))
	}
	if c.WarnRatio <= 0 || c.WarnRatio > c.HardRatio {
		errs = append(errs, errors.New("warn_ratio must be positive and at most hard_ratio"))
	}
	return errors.Join(errs...)
}

// ThreadBudgetMiddleware enforces a thread budget on the lead agent. It reads the run
// journal, which counts the lead's calls, the subagents' (reported by the task tool when
// a subagent finishes) and the middlewares' own calls, plus the thread's earlier runs
// (journal.ThreadBaseline in the run context, set by the gateway from the run store).
// Past warn_ratio it injects a one-time hidden warning into the next request; past
// hard_ratio it strips the tool calls of the lead's response, so the run answers with
// what it has, and records stop_reason budget_capped with which limit was reached.
type ThreadBudgetMiddleware struct {
	cfg ThreadBudgetConfig
}

// NewThreadBudgetMiddleware validates cfg and returns the middleware.
func NewThreadBudgetMiddleware(cfg ThreadBudgetConfig) (*ThreadBudgetMiddleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &ThreadBudgetMiddleware{cfg: cfg}, nil
}

// Name implements agent.Middleware.
func (*ThreadBudgetMiddleware) Name() string { return NameThreadBudget }

func (m *ThreadBudgetMiddleware) run(rt *agent.Runtime) *budgetWarning {
	return runScoped(rt, threadBudgetRunKey, func() *budgetWarning { return &budgetWarning{} })
}

// BudgetUsage is what the thread and the user have used so far: their earlier runs plus this
// run's journal (the lead, its subagents and middleware calls).
type BudgetUsage struct {
	ThreadTokens, UserTokens int64
	ThreadCostUSD, UserCost  float64
}

// ThreadUsage returns the thread's tokens and cost so far.
func (m *ThreadBudgetMiddleware) ThreadUsage(rt *agent.Runtime) (tokens int64, costUSD float64) {
	u := m.usage(rt)
	return u.ThreadTokens, u.ThreadCostUSD
}

func (m *ThreadBudgetMiddleware) usage(rt *agent.Runtime) BudgetUsage {
	var u BudgetUsage
	if rt == nil {
		return u
	}
	if rt.Context != nil {
		if v, ok := rt.Context.Get(journal.BaselineContextKey); ok {
			if b, ok := v.(journal.ThreadBaseline); ok {
				u = BudgetUsage{ThreadTokens: b.Tokens, ThreadCostUSD: b.CostUSD, UserTokens: b.UserTokens, UserCost: b.UserCostUSD}
			}
		}
	}
	if rt.Journal != nil {
		d := rt.Journal.CompletionData()
		u.ThreadTokens += d.TotalTokens
		u.ThreadCostUSD += d.TotalCostUSD
		u.UserTokens += d.TotalTokens
		u.UserCost += d.TotalCostUSD
	}
	return u
}

// level is the budget's use: the largest ratio of the configured limits, described for
// messages (scope "thread" or "user", the amounts, the limit's config key).
func (m *ThreadBudgetMiddleware) level(u BudgetUsage) (ratio float64, scope, used, limit, kind string) {
	ratio = -1
	for _, l := range []struct {
		scope, kind string
		used, max   float64
		usd         bool
	}{
		{"thread", "max_tokens", float64(u.ThreadTokens), float64(m.cfg.MaxTokens), false},
		{"thread", "max_cost_usd", u.ThreadCostUSD, m.cfg.MaxCostUSD, true},
		{"user", "max_user_tokens", float64(u.UserTokens), float64(m.cfg.MaxUserTokens), false},
		{"user", "max_user_cost_usd", u.UserCost, m.cfg.MaxUserCostUSD, true},
	} {
		if l.max <= 0 {
			continue
		}
		if r := l.used / l.max; r > ratio {
			ratio, scope, kind = r, l.scope, l.kind
			if l.usd {
				used, limit = fmt.Sprintf("%.4f USD", l.used), fmt.Sprintf("%.4f USD", l.max)
			} else {
				used, limit = fmt.Sprintf("%d tokens", int64(l.used)), fmt.Sprintf("%d-token", int64(l.max))
			}
		}
	}
	return max(ratio, 0), scope, used, limit, kind
}

// AfterModel implements agent.AfterModelHook.
func (m *ThreadBudgetMiddleware) AfterModel(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	u := m.usage(rt)
	ratio, scope, used, limit, kind := m.level(u)
	last, isAI := lastAIIsLast(st.Messages)
	if ratio >= m.cfg.HardRatio && isAI && len(last.ToolCalls) > 0 {
		up := hardStop(rt, last, StopBudgetCapped, fmt.Sprintf(ThreadBudgetExceeded, scope, used, limit))
		record(rt, "thread_budget", NameThreadBudget, "after_model", "hard_stop",
			map[string]any{"limit": kind, "thread_tokens": u.ThreadTokens, "thread_cost_usd": u.ThreadCostUSD, "user_tokens": u.UserTokens, "user_cost_usd": u.UserCost})
		return up, nil
	}
	if ratio >= m.cfg.WarnRatio && m.run(rt).queueOnce(fmt.Sprintf(ThreadBudgetWarningFmt, scope, used, limit, 100*ratio)) {
		record(rt, "thread_budget", NameThreadBudget, "after_model", "warn",
			map[string]any{"limit": kind, "thread_tokens": u.ThreadTokens, "thread_cost_usd": u.ThreadCostUSD})
	}
	return nil, nil
}

// WrapModelCall injects the pending warning once, after all messages of the request.
func (m *ThreadBudgetMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	return m.run(req.Runtime).wrap(ctx, req, next, threadBudgetWarnName)
}
