package journal

import (
	"time"

	"github.com/agentmeter/agentmeter/genai"
)

// addLocked adds one call or record to the totals, its caller bucket and its model bucket.
func (j *RunJournal) addLocked(caller, model string, in, out, total, cacheRead int64) {
	j.data.TotalInputTokens += in
	j.data.TotalOutputTokens += out
	j.data.TotalTokens += total
	switch genai.CallerBucket(caller) {
	case genai.BucketSubagent:
		j.data.SubagentTokens += total
	case genai.BucketMiddleware:
		j.data.MiddlewareTokens += total
	default:
		j.data.LeadAgentTokens += total
	}
	if model == "" {
		model = "unknown"
	}
	b := j.data.TokenUsageByModel[model]
	b.InputTokens += in
	b.OutputTokens += out
	b.TotalTokens += total
	if cacheRead > 0 {
		b.CacheReadTokens += cacheRead
	}
	j.data.TokenUsageByModel[model] = b
}

// addCostLocked prices one call or record and adds it to the cost keys: the provider's
// own figure when it reported one, else the price table; a model without a price is
// counted in unpriced_llm_call_count instead, never guessed.
func (j *RunJournal) addCostLocked(caller, model string, u genai.Usage, write1h int64, provided *float64) {
	if j.pricer == nil {
		return
	}
	var c genai.Cost
	ok := provided != nil
	if ok {
		c.Total = *provided
	} else {
		c, ok = j.pricer.Price("", model, u, write1h, time.Now())
	}
	if !ok {
		j.data.UnpricedCallCount++
		return
	}
	j.data.TotalCostUSD += c.Total
	if j.data.CostUSDByCaller == nil {
		j.data.CostUSDByCaller = &CallerCost{}
	}
	switch genai.CallerBucket(caller) {
	case genai.BucketSubagent:
		j.data.CostUSDByCaller.Subagent += c.Total
	case genai.BucketMiddleware:
		j.data.CostUSDByCaller.Middleware += c.Total
	default:
		j.data.CostUSDByCaller.LeadAgent += c.Total
	}
	if model == "" {
		model = "unknown"
	}
	if j.data.CostUSDByModel == nil {
		j.data.CostUSDByModel = map[string]float64{}
	}
	j.data.CostUSDByModel[model] += c.Total
	b := j.data.TokenUsageByModel[model]
	b.CostUSD += c.Total
	j.data.TokenUsageByModel[model] = b
}
