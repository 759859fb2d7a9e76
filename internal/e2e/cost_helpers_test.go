//go:build e2e

package e2e

import (
	"testing"

	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// costVendors turns both vendor exporters of the shipped config on, against their fakes
// (set before the collector starts: it reads DeerFlow's variables).
func costVendors(t *testing.T) (*langfusefake.Server, *fakevendor.LangSmith) {
	t.Helper()
	lf := langfusefake.New(t)
	t.Setenv("LANGFUSE_TRACING", "true")
	t.Setenv("LANGFUSE_PUBLIC_KEY", lf.PublicKey)
	t.Setenv("LANGFUSE_SECRET_KEY", lf.SecretKey)
	t.Setenv("LANGFUSE_BASE_URL", lf.URL)
	ls := fakevendor.NewLangSmith("lsv2-e2e-key")
	t.Cleanup(ls.Close)
	t.Setenv("LANGSMITH_TRACING", "true")
	t.Setenv("LANGSMITH_API_KEY", ls.APIKey)
	t.Setenv("LANGSMITH_ENDPOINT", ls.URL)
	t.Setenv("LANGSMITH_PROJECT", "agentmeter-e2e")
	return lf, ls
}

// langfuseCost is Σ observation cost Langfuse received for the traces.
func langfuseCost(lf *langfusefake.Server, traceIDs map[string]bool) float64 {
	var total float64
	for _, o := range lf.Observations() {
		if traceIDs[o.TraceID] && o.Cost != nil {
			total += o.CostTotal()
		}
	}
	return total
}

// langsmithCost is Σ usage_metadata.total_cost LangSmith received for the traces' runs.
func langsmithCost(ls *fakevendor.LangSmith, traceIDs map[string]bool) float64 {
	roots := map[string]bool{}
	for tid := range traceIDs {
		roots[uuidOf(tid)] = true
	}
	var total float64
	for _, run := range ls.Runs() {
		if tid, _ := run["trace_id"].(string); !roots[tid] {
			continue
		}
		outputs, _ := run["outputs"].(map[string]any)
		um, _ := outputs["usage_metadata"].(map[string]any)
		if c, ok := um["total_cost"].(float64); ok {
			total += c
		}
	}
	return total
}
