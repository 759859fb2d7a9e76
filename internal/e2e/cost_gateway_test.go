//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// costGatewayConfig is `agentmeter serve` on SQLite with the demo script answering as real
// models (costDemoConfig's script), plus extra config lines.
func costGatewayConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	return costGatewayConfigWith(t, dir, costDemoConfig(t), extra)
}

// costGatewayConfigWith is costGatewayConfig on the agent config at cfgPath.
func costGatewayConfigWith(t *testing.T, dir, cfgPath, extra string) string {
	t.Helper()
	cfg, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	return string(cfg) + fmt.Sprintf("sandbox: {root: %s}\nstore: {driver: sqlite, dsn: %s}\n", filepath.Join(dir, "threads"), filepath.Join(dir, "agentmeter.db")) + extra
}

type gatewayCostRun struct {
	RunID      string `json:"run_id"`
	Status     string `json:"status"`
	StopReason string `json:"stop_reason"`
	TraceID    string `json:"trace_id"`
	Usage      struct {
		TotalTokens    int64 `json:"total_tokens"`
		SubagentTokens int64 `json:"subagent_tokens"`
	} `json:"usage"`
}

// The gateway's token-usage cost for a thread equals Σ per-call cost that the shipped
// collector's cost step wrote on the spans of the thread's runs (same price table, same
// formulas), and each dispatching call's merged cost equals its tasks' calls: with models
// of 2025 and with current ones (November 2026).
func TestGatewayThreadCostEqualsSpans(t *testing.T) {
	for _, models := range [][2]string{{"claude-sonnet-4-5", "claude-haiku-4-5"}, {"claude-opus-4-8", "gemini-3.5-flash"}} {
		t.Run(models[0]+"+"+models[1], func(t *testing.T) { gatewayCostEqualsSpans(t, models[0], models[1]) })
	}
}

func gatewayCostEqualsSpans(t *testing.T, lead, sub string) {
	ports := setSidecarEnv(t)
	tracesFile := startShippedWithFile(t, ports)
	dir := t.TempDir()
	g := startGateway(t, dir, costGatewayConfigWith(t, dir, costDemoConfigAs(t, lead, sub), ""),
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+ports.OTLPHTTP, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_BSP_SCHEDULE_DELAY=100")

	traceIDs := map[string]bool{}
	for i := range 2 {
		code, body := g.request(t, "POST", "/api/threads/t-cost/runs?wait=true", "", fmt.Sprintf(`{"input":"Compare Paris and Tokyo (%d)"}`, i))
		require.Equal(t, 200, code, string(body))
		var r gatewayCostRun
		require.NoError(t, json.Unmarshal(body, &r))
		require.Equal(t, "success", r.Status, string(body))
		require.Len(t, r.TraceID, 32)
		traceIDs[strings.ToLower(r.TraceID)] = true
	}
	code, body := g.request(t, "GET", "/api/threads/t-cost/token-usage", "", "")
	require.Equal(t, 200, code, string(body))
	var tu struct {
		TotalTokens  int64   `json:"total_tokens"`
		TotalCostUSD float64 `json:"total_cost_usd"`
		ByModel      map[string]struct {
			Tokens  int64   `json:"tokens"`
			CostUSD float64 `json:"cost_usd"`
		} `json:"by_model"`
		CostUSDByCaller map[string]float64 `json:"cost_usd_by_caller"`
	}
	require.NoError(t, json.Unmarshal(body, &tu))
	var byCaller float64
	for _, v := range tu.CostUSDByCaller {
		byCaller += v
	}
	assert.InDelta(t, tu.TotalCostUSD, byCaller, 1e-12, "cost by caller adds up to the total")
	assert.Positive(t, tu.CostUSDByCaller["subagent"])
	require.Positive(t, tu.TotalCostUSD, string(body))
	var byModel float64
	for m, b := range tu.ByModel {
		assert.Positive(t, b.CostUSD, m)
		byModel += b.CostUSD
	}
	assert.InDelta(t, tu.TotalCostUSD, byModel, 1e-12)

	var sc spanCost
	require.Eventually(t, func() bool {
		sc = sumSpanCost(tracesFile, traceIDs)
		// 11 calls in the first run, 10 in the second (the thread has its title already)
		return sc.priced == 21 && near(sc.own, tu.TotalCostUSD)
	}, 30*time.Second, 200*time.Millisecond, "the spans' cost never added up to the gateway's thread cost $%.9f", tu.TotalCostUSD)
	assert.Empty(t, sc.dispatch, "merged cost == the tasks' calls")
	t.Logf("thread cost: gateway $%.9f, spans $%.9f over %d calls", tu.TotalCostUSD, sc.own, sc.priced)
}

// A thread budget counts the thread's earlier runs and the subagents: with 20,000 tokens,
// the first demo run (13,152) finishes; the second stops with budget_capped once its
// subagents push the thread over, and the thread stays under one more full run's usage.
func TestGatewayThreadBudgetStopsSecondRun(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	dir := t.TempDir()
	g := startGateway(t, dir, costGatewayConfig(t, dir, "thread_budget: {enabled: true, max_tokens: 20000}\n"), "OTEL_SDK_DISABLED=true")
	var runs []gatewayCostRun
	for i := range 2 {
		code, body := g.request(t, "POST", "/api/threads/t-budget/runs?wait=true", "", fmt.Sprintf(`{"input":"Compare Paris and Tokyo (%d)"}`, i))
		require.Equal(t, 200, code, string(body))
		var r gatewayCostRun
		require.NoError(t, json.Unmarshal(body, &r))
		require.Equal(t, "success", r.Status, string(body))
		runs = append(runs, r)
	}
	assert.Empty(t, runs[0].StopReason, "the first run fits the budget")
	assert.Equal(t, int64(13152), runs[0].Usage.TotalTokens)
	assert.Equal(t, "budget_capped", runs[1].StopReason, "the second run is stopped by the thread budget")
	assert.Equal(t, int64(3822), runs[1].Usage.SubagentTokens, "its subagents ran before the stop")
	assert.Less(t, runs[1].Usage.TotalTokens, int64(13152))
}

// A user budget counts every thread of the user: after a full demo run in one thread, the
// user's run in a new thread stops with budget_capped once its subagents push the user
// over 20,000 tokens.
func TestGatewayUserBudgetAcrossThreads(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	dir := t.TempDir()
	g := startGateway(t, dir, costGatewayConfig(t, dir, "thread_budget: {enabled: true, max_user_tokens: 20000}\n"), "OTEL_SDK_DISABLED=true")
	var runs []gatewayCostRun
	for i, thread := range []string{"t-u1", "t-u2"} {
		code, body := g.request(t, "POST", "/api/threads/"+thread+"/runs?wait=true", "", fmt.Sprintf(`{"input":"Compare Paris and Tokyo (%d)"}`, i))
		require.Equal(t, 200, code, string(body))
		var r gatewayCostRun
		require.NoError(t, json.Unmarshal(body, &r))
		require.Equal(t, "success", r.Status, string(body))
		runs = append(runs, r)
	}
	assert.Empty(t, runs[0].StopReason)
	assert.Equal(t, "budget_capped", runs[1].StopReason, "the user's second thread is stopped by the user budget")
	assert.Less(t, runs[1].Usage.TotalTokens, int64(13152))
}
