package pricing

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// genai-prices data.json: a list of providers, each with models; a model has a match
// expression and either one price set or a list of price sets gated by constraints.
type gpProvider struct {
	ID     string    `json:"id"`
	Models []gpModel `json:"models"`
}

type gpModel struct {
	ID     string          `json:"id"`
	Match  json.RawMessage `json:"match"`
	Prices json.RawMessage `json:"prices"`
}

type gpConditional struct {
	Constraint *struct {
		Type      string `json:"type"`
		StartDate string `json:"start_date"`
	} `json:"constraint"`
	Prices map[string]json.RawMessage `json:"prices"`
}

type gpTiered struct {
	Base  float64 `json:"base"`
	Tiers []struct {
		Start int64   `json:"start"`
		Price float64 `json:"price"`
	} `json:"tiers"`
}

// ParseGenAIPrices reads a pydantic genai-prices data file (the data.json list of
// providers) into rows. What maps: the token prices input_mtok, output_mtok,
// cache_read_mtok, cache_write_mtok, cache_write_1h_mtok (tiered prices become tiers);
// start_date constraints become effective dates; equals / starts_with / ends_with /
// contains matches become patterns. What is skipped, and why: models priced by time of
// day (off-peak discounts: a per-call clock rule the table does not model), regex and
// "and" matches (no pattern form; the model's own id and the dated-id rule still match),
// and models with no input or output token price.
func ParseGenAIPrices(data []byte, source string) ([]Row, error) {
	var providers []gpProvider
	if err := json.Unmarshal(data, &providers); err != nil {
		return nil, fmt.Errorf("genai-prices data file: %w", err)
	}
	var rows []Row
	for _, p := range providers {
		for _, m := range p.Models {
			sets, err := gpPriceSets(m.Prices)
			if err != nil {
				return nil, fmt.Errorf("genai-prices data file: %s/%s: %w", p.ID, m.ID, err)
			}
			var patterns []string
			var match any
			if len(m.Match) > 0 {
				if err := json.Unmarshal(m.Match, &match); err != nil {
					return nil, fmt.Errorf("genai-prices data file: %s/%s: match: %w", p.ID, m.ID, err)
				}
			}
			gpPatterns(match, &patterns)
			if gpTimeOfDay(sets) {
				continue
			}
			for _, s := range sets {
				if s.Constraint != nil && s.Constraint.Type != "start_date" {
					continue // no other constraint type is known; skip rather than misprice
				}
				r := Row{Provider: p.ID, Model: m.ID, Match: patterns, Source: source}
				if s.Constraint != nil {
					r.Effective = s.Constraint.StartDate
				}
				ok, err := gpRates(&r, s.Prices)
				if err != nil {
					return nil, fmt.Errorf("genai-prices data file: %s/%s: %w", p.ID, m.ID, err)
				}
				if ok {
					rows = append(rows, r)
				}
			}
		}
	}
	return rows, nil
}

// gpTimeOfDay reports whether a model has prices gated by time of day (DeepSeek's
// off-peak hours). Such a model is left out: priced without the clock it would be priced
// at one of its rates all day, which is wrong for part of every day.
func gpTimeOfDay(sets []gpConditional) bool {
	for _, s := range sets {
		if s.Constraint != nil && s.Constraint.Type == "time_of_date" {
			return true
		}
	}
	return false
}

func gpPriceSets(raw json.RawMessage) ([]gpConditional, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) > 0 && raw[0] == '[' {
		var sets []gpConditional
		if err := json.Unmarshal(raw, &sets); err != nil {
			return nil, fmt.Errorf("prices: %w", err)
		}
		return sets, nil
	}
	var one map[string]json.RawMessage
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	return []gpConditional{{Prices: one}}, nil
}

// gpRates fills r's rates and tiers from one price set; false when it has no input or
// output token price.
func gpRates(r *Row, prices map[string]json.RawMessage) (bool, error) {
	fields := map[string]func(*Rates) **float64{
		"input_mtok":          func(x *Rates) **float64 { return &x.Input },
		"output_mtok":         func(x *Rates) **float64 { return &x.Output },
		"cache_read_mtok":     func(x *Rates) **float64 { return &x.CacheRead },
		"cache_write_mtok":    func(x *Rates) **float64 { return &x.CacheWrite },
		"cache_write_1h_mtok": func(x *Rates) **float64 { return &x.CacheWrite1h },
	}
	tiers := map[int64]*Tier{}
	for key, field := range fields {
		raw, ok := prices[key]
		if !ok {
			continue
		}
		var flat float64
		if err := json.Unmarshal(raw, &flat); err == nil {
			*field(&r.Rates) = F(flat)
			continue
		}
		var t gpTiered
		if err := json.Unmarshal(raw, &t); err != nil {
			return false, fmt.Errorf("%s: %w", key, err)
		}
		*field(&r.Rates) = F(t.Base)
		for _, tp := range t.Tiers {
			tr := tiers[tp.Start]
			if tr == nil {
				tr = &Tier{AboveInputTokens: tp.Start}
				tiers[tp.Start] = tr
			}
			*field(&tr.Rates) = F(tp.Price)
		}
	}
	if r.Input == nil || r.Output == nil {
		return false, nil
	}
	for _, tr := range tiers {
		r.Tiers = append(r.Tiers, *tr)
	}
	sort.Slice(r.Tiers, func(i, j int) bool { return r.Tiers[i].AboveInputTokens < r.Tiers[j].AboveInputTokens })
	// A key tiered at fewer starts than another keeps its price of the tier below.
	for i := range r.Tiers {
		prev := r.Rates
		if i > 0 {
			prev = r.Tiers[i-1].Rates
		}
		for _, field := range fields {
			if *field(&r.Tiers[i].Rates) == nil {
				*field(&r.Tiers[i].Rates) = *field(&prev)
			}
		}
	}
	return true, nil
}

// gpPatterns collects the patterns of a match expression that have a glob form.
func gpPatterns(m any, out *[]string) {
	obj, ok := m.(map[string]any)
	if !ok {
		return
	}
	for k, v := range obj {
		switch k {
		case "or":
			list, _ := v.([]any)
			for _, e := range list {
				gpPatterns(e, out)
			}
		case "equals", "starts_with", "ends_with", "contains":
			s, _ := v.(string)
			if s == "" || strings.Contains(s, "*") {
				continue
			}
			switch k {
			case "starts_with":
				s += "*"
			case "ends_with":
				s = "*" + s
			case "contains":
				s = "*" + s + "*"
			}
			*out = append(*out, s)
		}
	}
}
