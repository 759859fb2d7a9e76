package journal

import (
	"fmt"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/message"
)

// TokenCollector is DeerFlow's per-subagent-execution usage collector. It is created
// with caller "subagent:<name>" and fed every model call of that execution (OnLLMEnd);
// records are deduplicated by model-call id. Safe for concurrent use.
type TokenCollector struct {
	caller  string
	mu      sync.Mutex
	seen    map[string]bool
	records []UsageRecord
}

// NewTokenCollector returns a collector tagging its records with caller.
func NewTokenCollector(caller string) *TokenCollector {
	return &TokenCollector{caller: caller, seen: map[string]bool{}}
}

// Caller is the collector's caller tag.
func (c *TokenCollector) Caller() string { return c.caller }

// OnLLMEnd records at most one usage record for callID: from the first generation that
// is a message with positive usage (total, or input+output when total is 0). Later
// callbacks for a call id already recorded are ignored.
func (c *TokenCollector) OnLLMEnd(callID string, generations []*message.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[callID] {
		return
	}
	for _, g := range generations {
		if g == nil || g.UsageMetadata == nil {
			continue
		}
		u := *g.UsageMetadata
		total := u.TotalTokens
		if total <= 0 {
			total = u.InputTokens + u.OutputTokens
		}
		if total <= 0 {
			continue
		}
		c.seen[callID] = true
		model := g.ModelName()
		gu := u.GenAI()
		var provided *float64
		if pc, ok := g.ProviderCostUSD(); ok {
			provided = &pc
		}
		c.records = append(c.records, UsageRecord{CostUSD: provided,
			SourceRunID: callID, Caller: c.caller, ModelName: model,
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: total,
			CacheReadTokens: u.CacheRead(), CacheCreationTokens: gu.CacheCreation, ReasoningTokens: gu.Reasoning, CacheCreation1hTokens: u.CacheCreation1h(),
		})
		return
	}
}

// Snapshot returns a copy of the records so far, in call order.
func (c *TokenCollector) Snapshot() []UsageRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]UsageRecord(nil), c.records...)
}

// Sum is the input/output/total sum over records (the task events' "usage"); ok is false
// when there are no records (DeerFlow reports null then).
func Sum(records []UsageRecord) (in, out, total int64, ok bool) {
	for _, r := range records {
		in += r.InputTokens
		out += r.OutputTokens
		total += r.TotalTokens
	}
	return in, out, total, len(records) > 0
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
