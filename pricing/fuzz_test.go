package pricing

import (
	"os"
	"testing"
	"time"
)

// Price files are user input: any bytes give rows or an error, never a panic, and rows a
// loader returns either build a table or fail validation with an error.
func FuzzLoaders(f *testing.F) {
	if b, err := os.ReadFile("testdata/litellm_prices.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`[{"id":"anthropic","models":[{"id":"m","match":{"or":[{"starts_with":"m-"}]},"prices":[{"prices":{"input_mtok":{"base":1,"tiers":[{"start":5,"price":2}]},"output_mtok":3}}]}]}]`))
	f.Add([]byte(`- {provider: p, model: m, input: 1, output: 2, tiers: [{above_input_tokens: 10, input: 3}]}`))
	f.Add([]byte(`{"m": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "litellm_provider": "openai", "input_cost_per_token_above_0k_tokens": 1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) ([]Row, error){
			ParseRows,
			func(b []byte) ([]Row, error) { return ParseLiteLLM(b, "fuzz") },
			func(b []byte) ([]Row, error) { return ParseGenAIPrices(b, "fuzz") },
		} {
			rows, err := parse(data)
			if err != nil {
				continue
			}
			if tab, err := New(Layer{Name: "fuzz", Rows: rows}); err == nil {
				for _, r := range rows {
					_, _ = tab.Lookup(r.Provider, r.Model, time.Now())
				}
			}
		}
	})
}
