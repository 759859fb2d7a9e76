package pricing

import (
	"time"

	"github.com/agentmeter/agentmeter/genai"
)

// JournalPricer prices the runtime journal's calls with a table, by the same rules as the
// collector's cost step: the journal's cost equals the spans' cost for the same calls.
type JournalPricer struct{ Table *Table }

// Price implements the journal's Pricer.
func (p JournalPricer) Price(provider, model string, u genai.Usage, cacheWrite1h int64, at time.Time) (genai.Cost, bool) {
	row, ok := p.Table.Lookup(provider, model, at)
	if !ok {
		return genai.Cost{}, false
	}
	return Compute(Split(u, cacheWrite1h), row), true
}
