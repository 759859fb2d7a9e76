package genaicost

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"

	"github.com/agentmeter/agentmeter/internal/configtest"
	"github.com/agentmeter/agentmeter/pricing"
)

func TestLoadConfig(t *testing.T) {
	sections := []configtest.Section{
		{ID: component.NewID(Type), Want: createDefaultConfig()},
		{ID: component.NewIDWithName(Type, "custom"), Want: &Config{
			PriceFiles: []PriceFile{{Path: "testdata/prices.yaml"}, {Path: "../../pricing/testdata/litellm_prices.json", Format: FormatLiteLLM}},
			Prices: []pricing.Row{{Provider: "openai", Model: "my-finetune", Match: []string{"ft:gpt-4o-mini:acme:*"}, Effective: "2025-06-01",
				Rates: pricing.Rates{Input: pricing.F(0.3), Output: pricing.F(1.2), CacheRead: pricing.F(0.15)}, Source: "our contract with OpenAI"}},
		}},
		{ID: component.NewIDWithName(Type, "unquoted_date"), Want: &Config{DefaultPrices: true, PriceFiles: []PriceFile{},
			Prices: []pricing.Row{{Provider: "openai", Model: "m", Effective: "2025-06-01", Rates: pricing.Rates{Input: pricing.F(1), Output: pricing.F(2)}}}}},
		{ID: component.NewIDWithName(Type, "refresh"), Want: &Config{DefaultPrices: true, PriceFiles: []PriceFile{}, Prices: []pricing.Row{},
			PriceRefresh: &PriceRefresh{URL: "https://raw.githubusercontent.com/pydantic/genai-prices/main/prices/new_data/v2/data.json", Interval: 12 * time.Hour}}},
	}
	configtest.Loads(t, NewFactory(), sections)
	for _, s := range sections {
		tab, err := s.Want.(*Config).buildTable()
		require.NoError(t, err, s.ID)
		assert.Positive(t, tab.Rows(), s.ID)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"nothing to price with", Config{}, []string{"no prices: default_prices is false"}},
		{"file problems", Config{DefaultPrices: true, PriceFiles: []PriceFile{{}, {Path: "testdata/none.json"}, {Path: "x", Format: "csv"}}}, []string{
			"price_files[0].path must be set",
			"price_files[1].path: open testdata/none.json",
			`price_files[2].format must be agentmeter, litellm or genai_prices, got "csv"`,
		}},
		{"bad rows", Config{Prices: []pricing.Row{{Provider: "p", Model: "m", Rates: pricing.Rates{Input: pricing.F(1)}}}}, []string{
			"prices[0].output must be set",
		}},
		{"bad file content", Config{PriceFiles: []PriceFile{{Path: "testdata/config.yaml", Format: FormatLiteLLM}}}, []string{
			"price_files[0]: litellm price file",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			configtest.ErrorHas(t, tt.cfg.Validate(), tt.want...)
		})
	}
}
