package pricing

import (
	"time"

	"github.com/agentmeter/agentmeter/genai"
)

// JournalPricer prices the runtime journal's calls with a table, by the same rules as the
// collector's cost step: the journal's cost equals the spans' cost for the same calls.
type JournalPricer struct {
	Table *Table
	// Live, when set, is the table in use (a Refresher's), read at each call instead of Table.
	Live func() *Table
}

// Price implements the journal's Pricer.
func (p JournalPricer) Price(provider, model string, u genai.Usage, cacheWrite1h int64, at time.Time) (genai.Cost, bool) {
	tab := p.Table
	if p.Live != nil {
		tab = p.Live()
	}
	row, ok := tab.Lookup(provider, model, at)
	if !ok {
		return genai.Cost{}, false
	}
	return Compute(Split(u, cacheWrite1h), row), true
}
