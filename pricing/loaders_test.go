package pricing

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
)

func TestLiteLLMLoader(t *testing.T) {
	data, err := os.ReadFile("testdata/litellm_prices.json")
	require.NoError(t, err)
	rows, err := ParseLiteLLM(data, "litellm")
	require.NoError(t, err)
	require.Len(t, rows, 4, "sample_spec, embeddings and images are skipped")
	tab, err := New(Layer{Name: "litellm", Rows: rows})
	require.NoError(t, err)
	at := time.Now()

	r, ok := tab.Lookup("anthropic", "claude-sonnet-4-5-20250929", at)
	require.True(t, ok)
	assert.Equal(t, Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75, CacheWrite1h: 6, Reasoning: 15}, r.Base)
	require.Len(t, r.Tiers, 1)
	assert.Equal(t, Price{Input: 6, Output: 22.5, CacheRead: 0.6, CacheWrite: 7.5, CacheWrite1h: 6, Reasoning: 22.5}, r.Tiers[0].Price,
		"LiteLLM has no 1-hour price above 200k: the row's own 1-hour price carries over")

	r, ok = tab.Lookup("gcp.gemini", "gemini-2.5-pro", at)
	require.True(t, ok, "the gemini/ key prefix is dropped, litellm_provider gemini is google")
	c := Compute(Split(genai.Usage{Input: 300_000, Output: 1000}, 0), r)
	assert.InDelta(t, 0.75+0.015, c.Total, 1e-12)

	_, ok = tab.Lookup("openai", "text-embedding-3-small", at)
	assert.False(t, ok)
}

func TestLiteLLMLoaderErrors(t *testing.T) {
	_, err := ParseLiteLLM([]byte(`[1]`), "x")
	assert.ErrorContains(t, err, "litellm price file")
	_, err = ParseLiteLLM([]byte(`{"m": {"litellm_provider": "openai", "input_cost_per_token": "a"}}`), "x")
	assert.ErrorContains(t, err, `entry "m"`)
}

func TestGenAIPricesShapes(t *testing.T) {
	data := []byte(`[{"id": "anthropic", "models": [
	  {"id": "claude-z", "match": {"or": [{"starts_with": "claude-z-"}, {"regex": "^claude-z$"}]},
	   "prices": [{"prices": {"input_mtok": 1, "output_mtok": 5}},
	              {"constraint": {"type": "start_date", "start_date": "2026-01-01"}, "prices": {"input_mtok": {"base": 2, "tiers": [{"start": 200000, "price": 4}]}, "output_mtok": 8}}]},
	  {"id": "tod", "match": {"equals": "tod"}, "prices": [{"prices": {"input_mtok": 1, "output_mtok": 1}}, {"constraint": {"type": "time_of_date", "start_time": "16:30:00", "end_time": "00:30:00"}, "prices": {"input_mtok": 0.5, "output_mtok": 0.5}}]},
	  {"id": "per-call", "match": {"equals": "per-call"}, "prices": {"requests_kcount": 1}}
	]}]`)
	rows, err := ParseGenAIPrices(data, "gp")
	require.NoError(t, err)
	require.Len(t, rows, 4, "a model without token prices (per-call) is left out")
	tab, err := New(Layer{Name: "gp", Rows: rows})
	require.NoError(t, err)
	r, ok := tab.Lookup("anthropic", "claude-z-fast", time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC))
	require.True(t, ok)
	assert.Equal(t, 1.0, r.Base.Input)
	r, _ = tab.Lookup("anthropic", "claude-z", time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	assert.Equal(t, "anthropic/claude-z@2026-01-01", r.ID)
	assert.Equal(t, 4.0, r.PriceFor(200_001).Input)
	assert.Equal(t, 8.0, r.PriceFor(200_001).Output, "a flat price carries into the tier")

	r, _ = tab.Lookup("anthropic", "tod", time.Date(2026, 6, 1, 20, 0, 0, 0, time.UTC))
	assert.Equal(t, 0.5, r.Base.Input, "inside the window that wraps past midnight")
	r, _ = tab.Lookup("anthropic", "tod", time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	assert.Equal(t, 1.0, r.Base.Input)

	_, err = ParseGenAIPrices([]byte(`{}`), "gp")
	assert.ErrorContains(t, err, "genai-prices data: no providers")
	for _, bad := range []struct{ data, want string }{
		{`[{"id":"p","models":[{"id":"m","match":{"equals":"m"},"prices":{"input_mtok":-1,"output_mtok":1}}]}]`, "p/m (models[0]): prices[0].input_mtok must be a finite non-negative number"},
		{`[{"id":"p","models":[{"id":"m","match":{"equals":"m"},"prices":{"input_mtok":"x","output_mtok":1}}]}]`, "input_mtok must be a finite non-negative number or {base, tiers}"},
		{`[{"id":"p","models":[{"id":"m","match":{"regex":"(?<=a)b"},"prices":{"input_mtok":1}}]}]`, "p/m (models[0]): match: regex"},
		{`[{"id":"p","models":[{"id":"m","match":{"equals":"m"},"prices":[{"constraint":{"type":"moon"},"prices":{"input_mtok":1}}]}]}]`, `unknown type "moon"`},
		{`[{"id":"p","models":[{"id":"m","match":{"equals":"m"},"prices":{"input_mtok":1}}]`, "genai-prices data"},
	} {
		_, err = ParseDataset([]byte(bad.data), "gp")
		assert.ErrorContains(t, err, bad.want)
	}
}

// What an error quotes of a file is cut without cutting a character in two.
func TestTruncateKeepsUTF8(t *testing.T) {
	assert.Equal(t, strings.Repeat("€", 20)+"…", truncate([]byte(strings.Repeat("€", 40))))
	assert.Equal(t, "short", truncate([]byte(" short \n")))
}
