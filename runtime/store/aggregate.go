package store

import "github.com/agentmeter/agentmeter/runtime/journal"

// ModelTokens is one by_model entry of the token-usage response.
type ModelTokens struct {
	Tokens int64 `json:"tokens"`
	Runs   int64 `json:"runs"`
	// CostUSD is added to DeerFlow's shape (omitted while 0): the model's cost over the
	// thread's runs, from each run's stored per-model cost (docs/cost.md).
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// CallerTokens is the by_caller object.
type CallerTokens struct {
	LeadAgent  int64 `json:"lead_agent"`
	Subagent   int64 `json:"subagent"`
	Middleware int64 `json:"middleware"`
}

// TokenUsage is the token-usage aggregate of a thread. Encoded with encoding/json its map
// keys are sorted, so equal values are byte-identical JSON.
type TokenUsage struct {
	TotalTokens       int64                  `json:"total_tokens"`
	TotalInputTokens  int64                  `json:"total_input_tokens"`
	TotalOutputTokens int64                  `json:"total_output_tokens"`
	TotalRuns         int64                  `json:"total_runs"`
	ByModel           map[string]ModelTokens `json:"by_model"`
	ByCaller          CallerTokens           `json:"by_caller"`
	// TotalCostUSD is added to DeerFlow's shape (omitted while 0): Σ by_model cost_usd.
	TotalCostUSD float64 `json:"total_cost_usd,omitempty"`
	// CostUSDByCaller is added to DeerFlow's shape (omitted while no run was priced): the
	// runs' cost per caller bucket.
	CostUSDByCaller *journal.CallerCost `json:"cost_usd_by_caller,omitempty"`
}

// AggregateRow is the per-row projection the aggregation SELECT returns.
type AggregateRow struct {
	ModelName         string
	TotalTokens       int64
	TotalInputTokens  int64
	TotalOutputTokens int64
	LeadAgentTokens   int64
	SubagentTokens    int64
	MiddlewareTokens  int64
	ByModel           map[string]journal.ModelUsage
	// CostUSDByCaller is the run's cost per caller bucket (the cost_usd column); nil when
	// the run was not priced.
	CostUSDByCaller *journal.CallerCost
}

// Aggregate reduces rows as DeerFlow does in application code: plain sums for the
// totals and callers; by_model from each row's per-model JSON (a run using several models
// counts once per model), or — for legacy rows with empty JSON — the row's total under
// its model_name ("unknown" when empty).
func Aggregate(rows []AggregateRow) TokenUsage {
	u := TokenUsage{ByModel: map[string]ModelTokens{}}
	for _, r := range rows {
		u.TotalRuns++
		u.TotalTokens += r.TotalTokens
		u.TotalInputTokens += r.TotalInputTokens
		u.TotalOutputTokens += r.TotalOutputTokens
		u.ByCaller.LeadAgent += r.LeadAgentTokens
		u.ByCaller.Subagent += r.SubagentTokens
		u.ByCaller.Middleware += r.MiddlewareTokens
		if c := r.CostUSDByCaller; c != nil {
			if u.CostUSDByCaller == nil {
				u.CostUSDByCaller = &journal.CallerCost{}
			}
			u.CostUSDByCaller.LeadAgent += c.LeadAgent
			u.CostUSDByCaller.Subagent += c.Subagent
			u.CostUSDByCaller.Middleware += c.Middleware
		}
		if len(r.ByModel) > 0 {
			for name, mu := range r.ByModel {
				b := u.ByModel[name]
				b.Tokens += mu.TotalTokens
				b.Runs++
				b.CostUSD += mu.CostUSD
				u.TotalCostUSD += mu.CostUSD
				u.ByModel[name] = b
			}
			continue
		}
		name := r.ModelName
		if name == "" {
			name = "unknown"
		}
		b := u.ByModel[name]
		b.Tokens += r.TotalTokens
		b.Runs++
		u.ByModel[name] = b
	}
	return u
}
