package pricing

import (
	"time"

	"github.com/agentmeter/agentmeter/genai"
)

// JournalPricer prices the runtime journal's calls with a table, by the same rules as the
// collector's cost step: the journal's cost equals the spans' cost for the same calls.
type JournalPricer struct{ Table *Table }

// Price implements the journal's Pricer. The journal has no 1-hour cache-write count, so
// every write is priced at the 5-minute rate there.
func (p JournalPricer) Price(provider, model string, u genai.Usage, at time.Time) (genai.Cost, bool) {
	row, ok := p.Table.Lookup(provider, model, at)
	if !ok {
		return genai.Cost{}, false
	}
	return Compute(Split(u, 0), row), true
}
