package storetest

import (
	"math"
	"testing"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// testCost: a run's journal cost keys survive progress and completion writes and come
// back on the run row; the thread aggregate sums cost per model and per caller; an
// unpriced run stores none.
func testCost(t *testing.T, s store.RunStore) {
	priced := func(lead, sub, mw float64) journal.CompletionData {
		return journal.CompletionData{
			TotalTokens: 100, LeadAgentTokens: 100,
			TokenUsageByModel: map[string]journal.ModelUsage{"m": {TotalTokens: 100, CostUSD: lead + sub + mw}},
			TotalCostUSD:      lead + sub + mw,
			CostUSDByCaller:   &journal.CallerCost{LeadAgent: lead, Subagent: sub, Middleware: mw},
			CostUSDByModel:    map[string]float64{"m": lead + sub + mw},
			UnpricedCallCount: 1,
		}
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		must(t, s.CreateRun(ctx, store.Run{RunID: id, ThreadID: "tc", UserID: "bob"}))
		_, err := s.MarkRunning(ctx, id)
		must(t, err)
	}
	_, err := s.UpdateRunProgress(ctx, "c1", priced(0.1, 0, 0))
	must(t, err)
	r, err := s.GetRun(ctx, "c1")
	must(t, err)
	if r.Usage.TotalCostUSD != 0.1 || r.Usage.CostUSDByCaller == nil || r.Usage.UnpricedCallCount != 1 {
		t.Fatalf("progress cost = %+v", r.Usage)
	}
	_, err = s.UpdateRunCompletion(ctx, "c1", store.Completion{Status: store.StatusSuccess, Usage: priced(0.25, 0.5, 0.125)})
	must(t, err)
	_, err = s.UpdateRunCompletion(ctx, "c2", store.Completion{Status: store.StatusSuccess, Usage: priced(1, 2, 0)})
	must(t, err)
	_, err = s.UpdateRunCompletion(ctx, "c3", store.Completion{Status: store.StatusSuccess, Usage: journal.CompletionData{TotalTokens: 5, LeadAgentTokens: 5}})
	must(t, err)
	r, err = s.GetRun(ctx, "c1")
	must(t, err)
	if c := r.Usage.CostUSDByCaller; c == nil || c.Subagent != 0.5 || r.Usage.CostUSDByModel["m"] != 0.875 {
		t.Fatalf("completed cost = %+v", r.Usage)
	}
	r, err = s.GetRun(ctx, "c3")
	must(t, err)
	if r.Usage.CostUSDByCaller != nil || r.Usage.TotalCostUSD != 0 {
		t.Fatalf("unpriced run has cost %+v", r.Usage)
	}
	u, err := s.AggregateTokensByThread(ctx, "tc", false)
	must(t, err)
	if math.Abs(u.TotalCostUSD-3.875) > 1e-12 || u.CostUSDByCaller == nil ||
		math.Abs(u.CostUSDByCaller.LeadAgent-1.25) > 1e-12 || math.Abs(u.CostUSDByCaller.Subagent-2.5) > 1e-12 || math.Abs(u.CostUSDByCaller.Middleware-0.125) > 1e-12 {
		t.Fatalf("aggregate cost = %v by caller %+v", u.TotalCostUSD, u.CostUSDByCaller)
	}

	// the user's aggregate spans their threads
	must(t, s.CreateRun(ctx, store.Run{RunID: "c4", ThreadID: "tc-other", UserID: "bob"}))
	_, err = s.MarkRunning(ctx, "c4")
	must(t, err)
	_, err = s.UpdateRunCompletion(ctx, "c4", store.Completion{Status: store.StatusSuccess, Usage: priced(0.125, 0, 0)})
	must(t, err)
	uu, err := s.AggregateTokensByUser(ctx, "bob", false)
	must(t, err)
	if uu.TotalRuns != 4 || uu.TotalTokens != 305 || math.Abs(uu.TotalCostUSD-4) > 1e-12 {
		t.Fatalf("user aggregate = %+v", uu)
	}
}
