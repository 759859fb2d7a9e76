package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/middleware"
)

// The demo run (scripted model) under a thread budget of 6,000 tokens: the lead agent's
// own calls up to its third response are 4,906 tokens, under the budget; with its two
// subagents' 3,822 and the title middleware's 186 the thread is at 8,914 when that third
// response arrives, so its tool calls are stripped and the run stops with budget_capped.
// Priced with a config row for the scripted models, a USD budget stops the same way.
func TestThreadBudgetStopsTheDemoRun(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	for _, tc := range []struct{ name, budget string }{
		{"tokens", "thread_budget: {enabled: true, max_tokens: 6000}\n"},
		{"usd", "thread_budget: {enabled: true, max_cost_usd: 0.006}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// $1 per million tokens: the thread is at $0.0089 when the third response arrives
			cfg := writeConfig(t, "models:\n"+
				"  - {name: main, provider: scripted, model: scripted-demo, pricing: {input: 1, output: 1}}\n"+
				"  - {name: mini, provider: scripted, model: scripted-demo-mini, pricing: {input: 1, output: 1}}\n"+
				"sandbox: {root: "+t.TempDir()+"}\n"+tc.budget)
			var out, errb bytes.Buffer
			require.Equal(t, 0, dispatch([]string{"run", "--config", cfg, "--json", "Compare", "Paris", "and", "Tokyo"}, &out, &errb), errb.String())
			var res runOutput
			require.NoError(t, json.Unmarshal(out.Bytes(), &res))
			assert.Equal(t, middleware.StopBudgetCapped, res.StopReason)
			assert.Contains(t, res.Answer, "THREAD BUDGET EXCEEDED")
			c := res.Completion
			assert.Equal(t, int64(3822), c.SubagentTokens, "both subagents ran")
			assert.Less(t, c.LeadAgentTokens, int64(6000), "the lead's own calls alone are under the budget")
			assert.Greater(t, c.TotalTokens, int64(6000))
			assert.Less(t, c.TotalTokens, int64(13152), "the run stopped before the demo's last calls")
		})
	}
}
