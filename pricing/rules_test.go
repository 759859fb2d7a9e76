package pricing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
)

// ruleTable is a small table with round prices, so every expected cost is checkable by hand.
func ruleTable(t *testing.T) *Table {
	t.Helper()
	tab, err := New(Layer{Name: "test", Rows: []Row{
		{Provider: "anthropic", Model: "claude-x", Effective: "2025-01-01", Rates: Rates{Input: F(3), Output: F(15), CacheRead: F(0.3), CacheWrite: F(3.75), CacheWrite1h: F(6)},
			Tiers: []Tier{{AboveInputTokens: 200_000, Rates: Rates{Input: F(6), Output: F(22.5), CacheRead: F(0.6), CacheWrite: F(7.5), CacheWrite1h: F(12)}}}},
		{Provider: "openai", Model: "o-x", Effective: "2025-01-01", Rates: Rates{Input: F(2), Output: F(8), CacheRead: F(0.5)}},
		{Provider: "openai", Model: "r-x", Effective: "2025-01-01", Rates: Rates{Input: F(1), Output: F(4), Reasoning: F(10)}},
		{Provider: "deepseek", Model: "d-x", Effective: "2025-02-01", Rates: Rates{Input: F(0.27), Output: F(1.1)}},
		{Provider: "deepseek", Model: "d-x", Effective: "2025-09-29", Rates: Rates{Input: F(0.28), Output: F(0.42)}},
	}})
	require.NoError(t, err)
	return tab
}

func TestCostRules(t *testing.T) {
	tab := ruleTable(t)
	day := time.Date(2025, 10, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		provider  string
		model     string
		at        time.Time
		usage     genai.Usage
		write1h   int64
		want      genai.Cost
		wantPrice string
	}{
		{
			name: "plain input and output", provider: "openai", model: "o-x", at: day,
			usage: genai.Usage{Input: 1_000_000, Output: 1_000_000},
			want:  genai.Cost{Input: 2, Output: 8, Total: 10}, wantPrice: "openai/o-x@2025-01-01",
		},
		{
			// 1M input of which 600k cache reads: 400k fresh at $2 + 600k at $0.5, never 1M at $2.
			name: "cache read is part of input, priced once at its own rate", provider: "openai", model: "o-x", at: day,
			usage: genai.Usage{Input: 1_000_000, CacheRead: 600_000, Output: 0},
			want:  genai.Cost{Input: 0.8, CacheRead: 0.3, Total: 1.1},
		},
		{
			// 100k input: 20k fresh, 50k cache read, 30k cache write (5-minute).
			name: "cache write 5-minute", provider: "anthropic", model: "claude-x", at: day,
			usage: genai.Usage{Input: 100_000, CacheRead: 50_000, CacheCreation: 30_000, Output: 1000},
			want:  genai.Cost{Input: 0.06, CacheRead: 0.015, CacheCreation: 0.1125, Output: 0.015, Total: 0.2025},
		},
		{
			// same call, 10k of the 30k writes with a 1-hour lifetime: 20k × 3.75 + 10k × 6.
			name: "cache write 1-hour part at the 1-hour rate", provider: "anthropic", model: "claude-x", at: day,
			usage: genai.Usage{Input: 100_000, CacheRead: 50_000, CacheCreation: 30_000, Output: 1000}, write1h: 10_000,
			want: genai.Cost{Input: 0.06, CacheRead: 0.015, CacheCreation: 0.135, Output: 0.015, Total: 0.225},
		},
		{
			name: "1-hour count above the writes is capped at the writes", provider: "anthropic", model: "claude-x", at: day,
			usage: genai.Usage{Input: 30_000, CacheCreation: 30_000}, write1h: 99_000,
			want: genai.Cost{CacheCreation: 0.18, Total: 0.18},
		},
		{
			// 1000 output of which 400 reasoning: 600 × 4 + 400 × 10 per million, not 1000 × 4 + 400 × 10.
			name: "reasoning is part of output, priced once", provider: "openai", model: "r-x", at: day,
			usage: genai.Usage{Input: 0, Output: 1_000_000, Reasoning: 400_000},
			want:  genai.Cost{Output: 2.4, Reasoning: 4, Total: 6.4},
		},
		{
			name: "reasoning defaults to the output rate", provider: "openai", model: "o-x", at: day,
			usage: genai.Usage{Output: 1_000_000, Reasoning: 250_000},
			want:  genai.Cost{Output: 6, Reasoning: 2, Total: 8},
		},
		{
			name: "prompt of exactly 200k is the base tier", provider: "anthropic", model: "claude-x", at: day,
			usage: genai.Usage{Input: 200_000, Output: 1_000_000},
			want:  genai.Cost{Input: 0.6, Output: 15, Total: 15.6},
		},
		{
			name: "prompt above 200k prices the whole call at the tier", provider: "anthropic", model: "claude-x", at: day,
			usage: genai.Usage{Input: 200_001, Output: 1_000_000},
			want:  genai.Cost{Input: 1.200006, Output: 22.5, Total: 23.700006},
		},
		{
			// the tier is picked by the whole prompt, cache included
			name: "cached tokens count toward the tier", provider: "anthropic", model: "claude-x", at: day,
			usage: genai.Usage{Input: 300_000, CacheRead: 250_000, Output: 0},
			want:  genai.Cost{Input: 0.3, CacheRead: 0.15, Total: 0.45},
		},
		{
			name: "before the price change", provider: "deepseek", model: "d-x", at: time.Date(2025, 9, 28, 23, 59, 59, 0, time.UTC),
			usage: genai.Usage{Input: 1_000_000, Output: 1_000_000},
			want:  genai.Cost{Input: 0.27, Output: 1.1, Total: 1.37}, wantPrice: "deepseek/d-x@2025-02-01",
		},
		{
			name: "on the day of the price change", provider: "deepseek", model: "d-x", at: time.Date(2025, 9, 29, 0, 0, 0, 0, time.UTC),
			usage: genai.Usage{Input: 1_000_000, Output: 1_000_000},
			want:  genai.Cost{Input: 0.28, Output: 0.42, Total: 0.7}, wantPrice: "deepseek/d-x@2025-09-29",
		},
		{
			name: "before the first price, the first price", provider: "deepseek", model: "d-x", at: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
			usage: genai.Usage{Input: 1_000_000},
			want:  genai.Cost{Input: 0.27, Total: 0.27},
		},
		{
			// raw Anthropic shape: cache counts not inside input; input is taken as the fresh part
			name: "cache above input is not clamped away", provider: "anthropic", model: "claude-x", at: day,
			usage: genai.Usage{Input: 10, CacheRead: 100_000},
			want:  genai.Cost{Input: 0.00003, CacheRead: 0.03, Total: 0.03003},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			row, ok := tab.Lookup(tc.provider, tc.model, tc.at)
			require.True(t, ok)
			if tc.wantPrice != "" {
				assert.Equal(t, tc.wantPrice, row.ID)
			}
			got := Compute(Split(tc.usage, tc.write1h), row)
			assert.InDelta(t, tc.want.Input, got.Input, 1e-12, "input")
			assert.InDelta(t, tc.want.CacheRead, got.CacheRead, 1e-12, "cache_read")
			assert.InDelta(t, tc.want.CacheCreation, got.CacheCreation, 1e-12, "cache_creation")
			assert.InDelta(t, tc.want.Output, got.Output, 1e-12, "output")
			assert.InDelta(t, tc.want.Reasoning, got.Reasoning, 1e-12, "reasoning")
			assert.InDelta(t, tc.want.Total, got.Total, 1e-12, "total")
			assert.InDelta(t, got.PartsSum(), got.Total, 1e-12, "total is the sum of the parts")
		})
	}
}

func TestUnknownModelHasNoPrice(t *testing.T) {
	tab := ruleTable(t)
	for _, m := range []string{"", "o-y", "claude", "o-x-but-longer"} {
		_, ok := tab.Lookup("openai", m, time.Now())
		assert.False(t, ok, m)
	}
}

func TestLookupMatching(t *testing.T) {
	tab, err := New(DefaultLayers()...)
	require.NoError(t, err)
	at := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	cases := []struct{ provider, model, wantID string }{
		{"anthropic", "claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"},
		{"anthropic", "claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5"},
		{"anthropic", "claude-opus-4-8", "anthropic/claude-opus-4-8"},
		{"gcp.vertex_ai", "claude-sonnet-4@20250514", "google/claude-4-sonnet"},                               // Vertex's own price
		{"aws.bedrock", "global.anthropic.claude-opus-4-8-v1:0", "aws/global.anthropic.claude-opus-4-8-v1:0"}, // Bedrock's own (overridden) price
		{"openrouter", "anthropic/claude-sonnet-4.5", "openrouter/anthropic/claude-sonnet-4.5"},               // OpenRouter's own price
		{"", "claude-3-7-sonnet-latest", "anthropic/claude-3-7-sonnet-latest"},                                // no provider: model_match
		{"openai", "gpt-4o-2024-11-20", "openai/gpt-4o@2024-10-02"},                                           // override, found by the dataset's match
		{"openai", "gpt-4o-2024-05-13", "openai/gpt-4o-2024-05-13"},                                           // its own model
		{"openai", "GPT-4.1-mini-2025-04-14", "openai/gpt-4.1-mini"},
		{"openai", "gpt-5.5", "openai/gpt-5.5"},
		{"gcp.gemini", "models/gemini-2.5-pro", "google/gemini-2.5-pro"},
		{"gcp.gemini", "gemini-3.5-flash", "google/gemini-3.5-flash"},
		{"mistral_ai", "mistral-medium-latest", "mistral/mistral-medium-latest@2026-06-16"},
		{"deepseek", "deepseek-chat", "deepseek/deepseek-chat"}, // 20:00 UTC: off-peak
		{"azure.ai.openai", "gpt-4.1", "openai/gpt-4.1"},        // Azure falls back to OpenAI's list
	}
	for _, c := range cases {
		r, ok := tab.Lookup(c.provider, c.model, at)
		if assert.True(t, ok, "%s %s", c.provider, c.model) {
			assert.Equal(t, c.wantID, r.ID, "%s %s", c.provider, c.model)
		}
	}
	r, ok := tab.Lookup("deepseek", "deepseek-chat", time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC))
	require.True(t, ok)
	assert.Equal(t, "deepseek/deepseek-chat~00:30:00Z-16:30:00Z", r.ID, "inside the time-of-day window")
	for _, m := range []string{"llama-3-70b", "made-up-model", "gpt"} {
		_, ok := tab.Lookup("", m, at)
		assert.False(t, ok, "%s must stay unknown, not take a neighbour's price", m)
	}
}

func TestOverrideReplacesTheModelsHistory(t *testing.T) {
	tab, err := New(append(DefaultLayers(),
		Layer{Name: "prices", Rows: []Row{{Provider: "deepseek", Model: "deepseek-chat", Rates: Rates{Input: F(1), Output: F(2)}}}})...)
	require.NoError(t, err)
	for _, at := range []time.Time{time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), time.Now()} {
		r, ok := tab.Lookup("deepseek", "deepseek-chat-v3-0324", at) // an alias of the dataset's match
		require.True(t, ok)
		assert.Equal(t, "deepseek/deepseek-chat", r.ID)
		assert.Equal(t, 1.0, r.Base.Input, "no time-of-day row of the dataset is left")
	}
	// a config row for a reseller is found first for its provider, the list price elsewhere
	tab, err = New(append(DefaultLayers(),
		Layer{Name: "prices", Rows: []Row{{Provider: "aws.bedrock", Model: "claude-3-5-haiku", Rates: Rates{Input: F(1), Output: F(5)}}}})...)
	require.NoError(t, err)
	r, _ := tab.Lookup("aws.bedrock", "anthropic.claude-3-5-haiku-20241022-v1:0", time.Now())
	assert.Equal(t, "aws.bedrock/claude-3-5-haiku", r.ID)
	r, _ = tab.Lookup("anthropic", "claude-3-5-haiku-20241022", time.Now())
	assert.Equal(t, 0.8, r.Base.Input)
}

func TestRowValidation(t *testing.T) {
	_, err := New(Layer{Name: "prices", Rows: []Row{
		{Model: "m", Rates: Rates{Input: F(1), Output: F(1)}},
		{Provider: "p", Model: "m", Effective: "2025-13-01", Rates: Rates{Input: F(-1)}},
		{Provider: "p", Model: "n", Rates: Rates{Input: F(1), Output: F(1)}, Tiers: []Tier{{AboveInputTokens: 10}, {AboveInputTokens: 5}}},
		{Provider: "p", Model: "o", Rates: Rates{Input: F(1), Output: F(1)}},
		{Provider: "p", Model: "o", Rates: Rates{Input: F(1), Output: F(1)}},
	}})
	require.Error(t, err)
	for _, want := range []string{
		"prices[0].provider must be set",
		"prices[1].output must be set",
		"prices[1].input must be a price between 0 and 1e6",
		`prices[1].effective must be a date YYYY-MM-DD, got "2025-13-01"`,
		"prices[2].tiers[1].above_input_tokens must be above the previous tier's (10), got 5",
		"prices[4]: a second row for p/o",
	} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestTierDefaults(t *testing.T) {
	r, err := Row{Provider: "p", Model: "m", Rates: Rates{Input: F(1), Output: F(4), CacheRead: F(0.1)},
		Tiers: []Tier{{AboveInputTokens: 100, Rates: Rates{Input: F(2), Output: F(6)}}}}.Resolve("r")
	require.NoError(t, err)
	assert.Equal(t, Price{Input: 1, Output: 4, CacheRead: 0.1, CacheWrite: 1, CacheWrite1h: 1, Reasoning: 4}, r.Base)
	// cache_read was set: it carries over; writes and reasoning were defaults: they follow the tier
	assert.Equal(t, Price{Input: 2, Output: 6, CacheRead: 0.1, CacheWrite: 2, CacheWrite1h: 2, Reasoning: 6}, r.Tiers[0].Price)
}

func TestCacheSavings(t *testing.T) {
	tab := ruleTable(t)
	at := time.Date(2025, 10, 1, 0, 0, 0, 0, time.UTC)
	row, _ := tab.Lookup("anthropic", "claude-x", at)
	// 50k reads at $3 instead of $0.3 per million
	assert.InDelta(t, 0.135, CacheSavings(Split(genai.Usage{Input: 100_000, CacheRead: 50_000}, 0), row), 1e-12)
	// above the tier: $6 instead of $0.6
	assert.InDelta(t, 1.35, CacheSavings(Split(genai.Usage{Input: 300_000, CacheRead: 250_000}, 0), row), 1e-12)
	assert.Zero(t, CacheSavings(Split(genai.Usage{Input: 100}, 0), row))
	row, _ = tab.Lookup("openai", "r-x", at) // no cache price: reads cost the input rate
	assert.Zero(t, CacheSavings(Split(genai.Usage{Input: 100, CacheRead: 50}, 0), row))
}
