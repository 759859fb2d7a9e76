package config

import (
	"fmt"

	"github.com/agentmeter/agentmeter/pricing"
)

// PriceTable is the price table the run journal prices calls with: the default table
// (pricing/prices.yaml, the collector's too) with each model's `pricing` block, when set,
// replacing the default rows of that model id. A cache_read of 0 means "not given" (the
// input rate applies).
func (c *Config) PriceTable() (*pricing.Table, error) {
	var rows []pricing.Row
	for i, m := range c.Models {
		if m.Pricing == nil || m.Model == "" {
			continue
		}
		r := pricing.Row{Provider: m.Provider, Model: m.Model, Source: fmt.Sprintf("config models[%d].pricing", i),
			Rates: pricing.Rates{Input: pricing.F(m.Pricing.Input), Output: pricing.F(m.Pricing.Output)}}
		if m.Pricing.CacheRead > 0 {
			r.CacheRead = pricing.F(m.Pricing.CacheRead)
		}
		rows = append(rows, r)
	}
	t, err := pricing.New(append(pricing.DefaultLayers(), pricing.Layer{Name: "models[].pricing", Rows: rows})...)
	if err != nil {
		return nil, fmt.Errorf("models[].pricing: %w", err)
	}
	return t, nil
}
