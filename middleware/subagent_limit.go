package middleware

import (
	"context"
	"strings"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// SubagentLimit constants (DeerFlow's SubagentLimitMiddleware).
const (
	SubagentLimitNotice = "[SUBAGENT LIMIT REACHED] The subagent delegation limit for this run has been reached. Continue using the subagent results already collected, execute remaining simple work directly, or summarize the remaining work instead of launching more subagents."
	// DelegationsKey is the delegation ledger channel (state.Extra): a list of
	// {id, description, subagent_type, status, run_id}, at most MaxDelegations entries.
	DelegationsKey = "delegations"
	MaxDelegations = 50
)

// ClampConcurrent clamps max_concurrent to [1, 4]; ClampTotal max_total to [1, 50].
func ClampConcurrent(n int) int { return min(max(n, 1), 4) }

// ClampTotal clamps the per-run total.
func ClampTotal(n int) int { return min(max(n, 1), 50) }

// SubagentLimitMiddleware caps task dispatches (after_model): per response at
// max_concurrent, per run at max_total (prior dispatches are the delegation-ledger entries
// of this run). Excess task calls are dropped (other calls untouched); when the run's total
// is exhausted the response gets a visible notice and stop_reason subagent_limit_capped.
// DurableContextMiddleware records the kept dispatches in the ledger after this hook ran, so
// dropped calls never enter it.
type SubagentLimitMiddleware struct {
	maxConcurrent, maxTotal int
}

// NewSubagentLimitMiddleware returns the middleware with clamped limits.
func NewSubagentLimitMiddleware(maxConcurrent, maxTotal int) *SubagentLimitMiddleware {
	return &SubagentLimitMiddleware{maxConcurrent: ClampConcurrent(maxConcurrent), maxTotal: ClampTotal(maxTotal)}
}

// Name implements agent.Middleware.
func (*SubagentLimitMiddleware) Name() string { return NameSubagentLimit }

// Limits returns the clamped (max_concurrent, max_total).
func (m *SubagentLimitMiddleware) Limits() (int, int) { return m.maxConcurrent, m.maxTotal }

func ledger(st *state.State) []any {
	l, _ := st.Extra[DelegationsKey].([]any)
	return l
}

// priorDelegations counts distinct ledger ids of this run (no run id: all entries).
func priorDelegations(st *state.State, run string) int {
	ids := map[string]bool{}
	for _, e := range ledger(st) {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		id, _ := m["id"].(string)
		r, _ := m["run_id"].(string)
		if run == "" || r == run {
			ids[id] = true
		}
	}
	return len(ids)
}

// AfterModel implements agent.AfterModelHook.
func (m *SubagentLimitMiddleware) AfterModel(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	last, ok := lastAIIsLast(st.Messages)
	if !ok || len(last.ToolCalls) == 0 {
		return nil, nil
	}
	var tasks []message.ToolCall
	for _, c := range last.ToolCalls {
		if c.Name == genai.TaskToolName {
			tasks = append(tasks, c)
		}
	}
	if len(tasks) == 0 {
		return nil, nil
	}
	run := runID(rt)
	remaining := max(0, m.maxTotal-priorDelegations(st, run))
	allowed := min(m.maxConcurrent, remaining)
	keep := tasks
	if len(tasks) > allowed {
		keep = tasks[:allowed]
	}
	if len(tasks) <= allowed {
		return nil, nil
	}
	kept := map[string]bool{}
	for _, c := range keep {
		kept[c.ID] = true
	}
	out := last.Clone()
	out.ToolCalls = nil
	for _, c := range last.ToolCalls {
		if c.Name != genai.TaskToolName || kept[c.ID] {
			out.ToolCalls = append(out.ToolCalls, c)
		}
	}
	if raw, ok := out.AdditionalKwargs[kwargRawToolCalls].([]any); ok {
		var synced []any
		for _, r := range raw {
			rc, _ := r.(map[string]any)
			fn, _ := rc["function"].(map[string]any)
			name, _ := fn["name"].(string)
			id, _ := rc["id"].(string)
			if name != genai.TaskToolName || kept[id] {
				synced = append(synced, r)
			}
		}
		if len(synced) == 0 {
			delete(out.AdditionalKwargs, kwargRawToolCalls)
		} else {
			out.AdditionalKwargs[kwargRawToolCalls] = synced
		}
	}
	if len(out.ToolCalls) == 0 {
		out = setFinishReason(out, "stop")
	}
	if remaining == 0 {
		if strings.TrimSpace(out.Content) == "" {
			out.Content = SubagentLimitNotice
		} else {
			out.Content = appendText(out.Content, SubagentLimitNotice)
		}
		if rt != nil && rt.Context != nil {
			rt.Context.SetStopReason(agent.StopSubagentLimit)
		}
	}
	record(rt, "subagent_limit", NameSubagentLimit, "after_model", "truncate", map[string]any{"kept": len(keep), "dropped": len(tasks) - len(keep)})
	return &state.Update{Messages: []message.Message{out}}, nil
}
