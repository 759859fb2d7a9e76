package journal

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/message"
)

// flatPricer prices every token at $1 per million, except model "unknown-x".
type flatPricer struct{}

func (flatPricer) Price(_, model string, u genai.Usage, _ int64, _ time.Time) (genai.Cost, bool) {
	if model == "unknown-x" {
		return genai.Cost{}, false
	}
	c := genai.Cost{Input: float64(u.Input) / 1e6, Output: float64(u.Output) / 1e6}
	c.Total = c.Input + c.Output
	return c, true
}

// The journal prices the lead's calls, the middleware's and the subagents' records into
// added keys: per caller bucket and per model, summing to the total; an unknown model is
// counted, never guessed; DeerFlow's keys are unchanged.
func TestJournalCost(t *testing.T) {
	j := New(Options{Pricer: flatPricer{}})
	end(j, "r1", "lead_agent", ai("a", 1000, 100, 1100, "gpt-4o"))
	end(j, "r2", "middleware:title", ai("t", 200, 10, 210, "gpt-4o-mini"))
	j.RecordExternalLLMUsageRecords([]UsageRecord{
		{SourceRunID: "s1", Caller: "subagent:researcher", ModelName: "gpt-4o-mini", InputTokens: 3000, OutputTokens: 300, TotalTokens: 3300, CacheCreationTokens: 10},
		{SourceRunID: "s2", Caller: "subagent:researcher", ModelName: "unknown-x", InputTokens: 50, OutputTokens: 5, TotalTokens: 55},
	})
	d := j.CompletionData()
	assert.InDelta(t, 0.0011+0.00021+0.0033, d.TotalCostUSD, 1e-15)
	require.NotNil(t, d.CostUSDByCaller)
	assert.InDelta(t, 0.0011, d.CostUSDByCaller.LeadAgent, 1e-15)
	assert.InDelta(t, 0.0033, d.CostUSDByCaller.Subagent, 1e-15)
	assert.InDelta(t, 0.00021, d.CostUSDByCaller.Middleware, 1e-15)
	assert.InDelta(t, 0.00351, d.CostUSDByModel["gpt-4o-mini"], 1e-15)
	assert.Equal(t, int64(1), d.UnpricedCallCount)
	assert.Equal(t, int64(1100+210+3300+55), d.TotalTokens, "tokens unchanged")

	// DeerFlow's keys keep their shape; cost keys are added ones
	b, err := json.Marshal(d)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"total_cost_usd", "cost_usd_by_caller", "cost_usd_by_model", "unpriced_llm_call_count"} {
		assert.Contains(t, m, k)
	}
	assert.Equal(t, map[string]any{"input_tokens": 1000.0, "output_tokens": 100.0, "total_tokens": 1100.0, "cost_usd": 0.0011},
		m["token_usage_by_model"].(map[string]any)["gpt-4o"], "DeerFlow's bucket keys plus cost_usd")

	// without a pricer the JSON is exactly DeerFlow's
	plain := New(Options{})
	end(plain, "r1", "lead_agent", ai("a", 1000, 100, 1100, "gpt-4o"))
	b, err = json.Marshal(plain.CompletionData())
	require.NoError(t, err)
	assert.NotContains(t, string(b), "cost")
}

// A subagent's records carry its cache writes and reasoning, so the journal prices them
// like the calls themselves.
func TestCollectorRecordsCarryAllKinds(t *testing.T) {
	c := NewTokenCollector("subagent:x")
	m := message.AI("x")
	u := message.UsageFromGenAI(genai.Usage{Input: 100, Output: 20, CacheRead: 30, CacheCreation: 40, Reasoning: 5})
	m.UsageMetadata = &u
	c.OnLLMEnd("c1", []*message.Message{&m})
	r := c.Snapshot()[0]
	assert.Equal(t, genai.Usage{Input: 100, Output: 20, CacheRead: 30, CacheCreation: 40, Reasoning: 5}, r.usage())
}

// pricer1h records the 1-hour write count it was given.
type pricer1h struct{ got *int64 }

func (p pricer1h) Price(_, _ string, _ genai.Usage, w int64, _ time.Time) (genai.Cost, bool) {
	*p.got += w
	return genai.Cost{Total: 1}, true
}

func TestJournalPassesOneHourWrites(t *testing.T) {
	var got int64
	j := New(Options{Pricer: pricer1h{&got}})
	m := message.AI("x")
	u := message.UsageFromGenAI(genai.Usage{Input: 100, Output: 1, CacheCreation: 80})
	u.InputTokenDetails.CacheCreation1h = 50
	m.UsageMetadata = &u
	end(j, "r1", "lead_agent", m)
	j.RecordExternalLLMUsageRecords([]UsageRecord{{SourceRunID: "s", Caller: "subagent:a", InputTokens: 10, OutputTokens: 1, TotalTokens: 11, CacheCreationTokens: 10, CacheCreation1hTokens: 7}})
	assert.Equal(t, int64(57), got)
}

// A cost the provider reported (OpenRouter's usage.cost) wins over the table, for the
// lead's calls and for subagents' records.
func TestJournalProviderCostWins(t *testing.T) {
	j := New(Options{Pricer: flatPricer{}})
	m := ai("a", 1000, 100, 1100, "anthropic/claude-sonnet-4.5")
	m.ResponseMetadata[message.MetaProviderCostUSD] = 0.5
	end(j, "r1", "lead_agent", m)
	c := NewTokenCollector("subagent:x")
	sub := ai("b", 10, 1, 11, "unknown-x")
	sub.ResponseMetadata[message.MetaProviderCostUSD] = 0.25
	c.OnLLMEnd("s1", []*message.Message{&sub})
	j.RecordExternalLLMUsageRecords(c.Snapshot())
	d := j.CompletionData()
	assert.InDelta(t, 0.75, d.TotalCostUSD, 1e-15)
	assert.Zero(t, d.UnpricedCallCount, "a provider cost prices even a model the table does not know")
}
