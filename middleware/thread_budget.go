package middleware

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// StopBudgetCapped is the stop reason of a run stopped by ThreadBudgetMiddleware.
const StopBudgetCapped = "budget_capped"

const (
	threadBudgetRunKey     = "middleware.thread_budget"
	threadBudgetWarnName   = "thread_budget_warning"
	ThreadBudgetWarningFmt = "[THREAD BUDGET WARNING] This thread has used %s of its %s budget (%.0f%%), counting the lead agent, its subagents and middleware model calls. Finish the task with the fewest further tool calls and produce your final answer soon."
	ThreadBudgetExceeded   = "[THREAD BUDGET EXCEEDED] This thread has used %s of its %s budget, counting the lead agent, its subagents and middleware model calls. Tool calls were stopped; producing the final answer with the results collected so far."
)

// ThreadBudgetConfig configures ThreadBudgetMiddleware (opt-in): a budget in tokens
// and/or USD over everything a thread's runs spend — the lead agent's calls, every
// subagent's and the middlewares' own model calls — not only the lead's own, as
// TokenBudget counts.
type ThreadBudgetConfig struct {
	Enabled    bool    `yaml:"enabled"`      // default false
	MaxTokens  int64   `yaml:"max_tokens"`   // input+output over the thread; 0 = no token limit
	MaxCostUSD float64 `yaml:"max_cost_usd"` // USD over the thread (docs/cost.md); 0 = no cost limit
	WarnRatio  float64 `yaml:"warn_ratio"`   // default 0.8
	HardRatio  float64 `yaml:"hard_ratio"`   // default 1.0
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
	if c.Enabled && c.MaxTokens == 0 && c.MaxCostUSD == 0 {
		errs = append(errs, errors.New("max_tokens or max_cost_usd must be set when enabled"))
	}
	if c.WarnRatio <= 0 || c.WarnRatio > c.HardRatio {
		errs = append(errs, errors.New("warn_ratio must be positive and at most hard_ratio"))
	}
	return errors.Join(errs...)
}

type threadBudgetRun struct {
	mu          sync.Mutex
	warned      bool
	pendingWarn string
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

func (m *ThreadBudgetMiddleware) run(rt *agent.Runtime) *threadBudgetRun {
	return runScoped(rt, threadBudgetRunKey, func() *threadBudgetRun { return &threadBudgetRun{} })
}

// ThreadUsage is what the thread has used so far: earlier runs plus this run's journal.
func (m *ThreadBudgetMiddleware) ThreadUsage(rt *agent.Runtime) (tokens int64, costUSD float64) {
	if rt == nil {
		return 0, 0
	}
	if rt.Context != nil {
		if v, ok := rt.Context.Get(journal.BaselineContextKey); ok {
			if b, ok := v.(journal.ThreadBaseline); ok {
				tokens, costUSD = b.Tokens, b.CostUSD
			}
		}
	}
	if rt.Journal != nil {
		d := rt.Journal.CompletionData()
		tokens += d.TotalTokens
		costUSD += d.TotalCostUSD
	}
	return tokens, costUSD
}

// level is the budget's use: the larger ratio of the two limits, described for messages.
func (m *ThreadBudgetMiddleware) level(tokens int64, cost float64) (ratio float64, used, limit, kind string) {
	if m.cfg.MaxTokens > 0 {
		ratio = float64(tokens) / float64(m.cfg.MaxTokens)
		used, limit, kind = fmt.Sprintf("%d tokens", tokens), fmt.Sprintf("%d-token", m.cfg.MaxTokens), "max_tokens"
	}
	if m.cfg.MaxCostUSD > 0 {
		if r := cost / m.cfg.MaxCostUSD; r > ratio || m.cfg.MaxTokens == 0 {
			ratio = r
			used, limit, kind = fmt.Sprintf("%.4f USD", cost), fmt.Sprintf("%.4f USD", m.cfg.MaxCostUSD), "max_cost_usd"
		}
	}
	return ratio, used, limit, kind
}

// AfterModel implements agent.AfterModelHook.
func (m *ThreadBudgetMiddleware) AfterModel(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	tokens, cost := m.ThreadUsage(rt)
	ratio, used, limit, kind := m.level(tokens, cost)
	b := m.run(rt)
	b.mu.Lock()
	defer b.mu.Unlock()
	last, isAI := lastAIIsLast(st.Messages)
	if ratio >= m.cfg.HardRatio && isAI && len(last.ToolCalls) > 0 {
		stopped := withoutToolCalls(last)
		stopped.Content = appendText(stopped.Content, fmt.Sprintf(ThreadBudgetExceeded, used, limit))
		if finishReason(stopped) == "tool_calls" {
			stopped = setFinishReason(stopped, "stop")
		}
		if rt != nil && rt.Context != nil {
			rt.Context.SetStopReason(StopBudgetCapped)
		}
		record(rt, "thread_budget", NameThreadBudget, "after_model", "hard_stop",
			map[string]any{"limit": kind, "tokens": tokens, "cost_usd": cost, "max_tokens": m.cfg.MaxTokens, "max_cost_usd": m.cfg.MaxCostUSD})
		return &state.Update{Messages: []message.Message{stopped}}, nil
	}
	if ratio >= m.cfg.WarnRatio && !b.warned {
		b.warned = true
		b.pendingWarn = fmt.Sprintf(ThreadBudgetWarningFmt, used, limit, 100*ratio)
		record(rt, "thread_budget", NameThreadBudget, "after_model", "warn",
			map[string]any{"limit": kind, "tokens": tokens, "cost_usd": cost})
	}
	return nil, nil
}

// WrapModelCall injects the pending warning once, after all messages of the request.
func (m *ThreadBudgetMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	b := m.run(req.Runtime)
	b.mu.Lock()
	w := b.pendingWarn
	b.pendingWarn = ""
	b.mu.Unlock()
	if w == "" {
		return next(ctx, req)
	}
	r := req.Request.Clone()
	r.Messages = append(r.Messages, message.Message{ID: message.NewID(), Role: message.RoleHuman, Name: threadBudgetWarnName,
		Content: w, AdditionalKwargs: map[string]any{"hide_from_ui": true}})
	return next(ctx, req.WithRequest(r))
}
