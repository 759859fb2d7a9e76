package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Dataset is a pydantic genai-prices data file: its providers (with the aliases that name
// them and the model ids they claim) and every model's prices, as rows. The rows keep the
// dataset's match expressions and order, so a model is found exactly as the dataset's own
// calculator finds it.
type Dataset struct {
	// Name, Version and Date identify the data ("@pydantic/genai-prices", "0.1.8",
	// "2026-09-23"); a bare data.json carries none of them, and the loader that fetched it
	// fills them in.
	Name, Version, Date string
	Providers           []ProviderInfo
	Rows                []Row
}

// ProviderInfo is one dataset provider's routing: the provider names it answers to
// (provider_match), the model ids it claims when no provider is named (model_match), and
// the providers whose models it also serves (fallback_model_providers).
type ProviderInfo struct {
	ID            string
	Fallback      []string
	providerMatch *matchExpr
	modelMatch    *matchExpr
}

// Layer is the dataset as a table layer.
func (d *Dataset) Layer(name string) Layer {
	return Layer{Name: name, Rows: d.Rows, Providers: d.Providers}
}

// snapshot is the embedded snapshot's shape: the data file's providers with where they
// come from. A bare data.json is the providers list alone.
type snapshot struct {
	Dataset   string            `json:"dataset"`
	Version   string            `json:"version"`
	Date      string            `json:"date"`
	Providers []json.RawMessage `json:"providers"`
}

type gpProvider struct {
	ID            string          `json:"id"`
	ProviderMatch json.RawMessage `json:"provider_match"`
	ModelMatch    json.RawMessage `json:"model_match"`
	Fallback      []string        `json:"fallback_model_providers"`
	Models        []gpModel       `json:"models"`
}

type gpModel struct {
	ID     string          `json:"id"`
	Match  json.RawMessage `json:"match"`
	Prices json.RawMessage `json:"prices"`
}

type gpConditional struct {
	Constraint map[string]string          `json:"constraint"`
	Prices     map[string]json.RawMessage `json:"prices"`
}

type gpTiered struct {
	Base  *float64 `json:"base"`
	Tiers []struct {
		Start *int64   `json:"start"`
		Price *float64 `json:"price"`
	} `json:"tiers"`
}

// gpTokenKeys are the dataset's token price keys and the rate each one sets. Other keys
// (audio, images, per-request and per-search fees) price usage a model-call span does not
// carry and are not read.
var gpTokenKeys = []struct {
	key   string
	field func(*Rates) **float64
}{
	{"input_mtok", func(x *Rates) **float64 { return &x.Input }},
	{"output_mtok", func(x *Rates) **float64 { return &x.Output }},
	{"cache_read_mtok", func(x *Rates) **float64 { return &x.CacheRead }},
	{"cache_write_mtok", func(x *Rates) **float64 { return &x.CacheWrite }},
	{"cache_write_1h_mtok", func(x *Rates) **float64 { return &x.CacheWrite1h }},
	{"output_reasoning_mtok", func(x *Rates) **float64 { return &x.Reasoning }},
}

// ParseDataset reads a genai-prices data file: the data.json list of providers, or the
// embedded snapshot's object around it. Everything is checked before anything is used: a
// price that is not a finite non-negative number (or a valid tiered price), an unknown
// constraint, a bad date or time, or a match expression that cannot be evaluated is an
// error naming the provider, model and key. Models without any token price (OCR, audio by
// the hour) get no rows.
func ParseDataset(data []byte, source string) (*Dataset, error) {
	data = bytes.TrimSpace(data)
	var raws []json.RawMessage
	ds := &Dataset{}
	if len(data) > 0 && data[0] == '{' {
		var s snapshot
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("genai-prices data: %w", err)
		}
		ds.Name, ds.Version, ds.Date, raws = s.Dataset, s.Version, s.Date, s.Providers
	} else if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("genai-prices data: %w", err)
	}
	if len(raws) == 0 {
		return nil, errors.New("genai-prices data: no providers")
	}
	seen := map[string]bool{}
	for i, raw := range raws {
		var p gpProvider
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("genai-prices data: providers[%d]: %w", i, err)
		}
		if p.ID == "" {
			return nil, fmt.Errorf("genai-prices data: providers[%d].id must be set", i)
		}
		if seen[p.ID] {
			return nil, fmt.Errorf("genai-prices data: provider %s listed twice", p.ID)
		}
		seen[p.ID] = true
		info := ProviderInfo{ID: p.ID, Fallback: p.Fallback}
		var err error
		if info.providerMatch, err = optionalMatch(p.ProviderMatch); err != nil {
			return nil, fmt.Errorf("genai-prices data: %s.provider_match: %w", p.ID, err)
		}
		if info.modelMatch, err = optionalMatch(p.ModelMatch); err != nil {
			return nil, fmt.Errorf("genai-prices data: %s.model_match: %w", p.ID, err)
		}
		ds.Providers = append(ds.Providers, info)
		for j, m := range p.Models {
			rows, err := gpModelRows(p.ID, m, source)
			if err != nil {
				return nil, fmt.Errorf("genai-prices data: %s/%s (models[%d]): %w", p.ID, m.ID, j, err)
			}
			for k := range rows {
				rows[k].order = j + 1
			}
			ds.Rows = append(ds.Rows, rows...)
		}
	}
	return ds, nil
}

// ParseGenAIPrices reads a genai-prices data file into rows (see ParseDataset).
func ParseGenAIPrices(data []byte, source string) ([]Row, error) {
	ds, err := ParseDataset(data, source)
	if err != nil {
		return nil, err
	}
	return ds.Rows, nil
}

func optionalMatch(raw json.RawMessage) (*matchExpr, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	return parseMatch(raw)
}

func gpModelRows(provider string, m gpModel, source string) ([]Row, error) {
	if m.ID == "" {
		return nil, errors.New("id must be set")
	}
	if len(m.Match) == 0 {
		return nil, errors.New("match must be set")
	}
	expr, err := parseMatch(m.Match)
	if err != nil {
		return nil, fmt.Errorf("match: %w", err)
	}
	sets, err := gpPriceSets(m.Prices)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, s := range sets {
		r := Row{Provider: provider, Model: m.ID, Source: source, expr: expr}
		if err := gpConstraint(&r, s.Constraint); err != nil {
			return nil, fmt.Errorf("prices[%d].constraint: %w", i, err)
		}
		ok, err := gpRates(&r, s.Prices)
		if err != nil {
			return nil, fmt.Errorf("prices[%d].%w", i, err)
		}
		if ok {
			rows = append(rows, r)
		}
	}
	return rows, nil
}

func gpPriceSets(raw json.RawMessage) ([]gpConditional, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var sets []gpConditional
		if err := json.Unmarshal(raw, &sets); err != nil {
			return nil, fmt.Errorf("prices: %w", err)
		}
		if len(sets) == 0 {
			return nil, errors.New("prices: empty list")
		}
		return sets, nil
	}
	var one map[string]json.RawMessage
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	return []gpConditional{{Prices: one}}, nil
}

func gpConstraint(r *Row, c map[string]string) error {
	if c == nil {
		return nil
	}
	typ := c["type"]
	if typ == "" { // the older shape names no type: the keys say which it is
		if _, ok := c["start_date"]; ok {
			typ = "start_date"
		} else {
			typ = "time_of_date"
		}
	}
	switch typ {
	case "start_date":
		d := c["start_date"]
		if _, err := time.Parse(time.DateOnly, d); err != nil {
			return fmt.Errorf("start_date must be YYYY-MM-DD, got %q", d)
		}
		r.Effective = d
	case "time_of_date":
		for _, k := range []string{"start_time", "end_time"} {
			if _, err := secondsOfDay(c[k]); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		r.TimeOfDay = &TimeOfDay{Start: c["start_time"], End: c["end_time"]}
	default:
		return fmt.Errorf("unknown type %q", typ)
	}
	return nil
}

// gpRates fills r's rates and tiers from one price set; false when it has no token price.
// A token kind the set does not price costs nothing in the dataset's calculator; input and
// output are set to 0 then, so the row prices exactly as the dataset does.
func gpRates(r *Row, prices map[string]json.RawMessage) (bool, error) {
	tiers := map[int64]*Tier{}
	any := false
	for _, k := range gpTokenKeys {
		raw, ok := prices[k.key]
		if !ok || string(raw) == "null" {
			continue
		}
		any = true
		var flat float64
		if err := json.Unmarshal(raw, &flat); err == nil {
			if !validPrice(flat) {
				return false, fmt.Errorf("%s must be a finite non-negative number, got %v", k.key, flat)
			}
			*k.field(&r.Rates) = F(flat)
			continue
		}
		var t gpTiered
		if err := json.Unmarshal(raw, &t); err != nil || t.Base == nil || !validPrice(*t.Base) {
			return false, fmt.Errorf("%s must be a finite non-negative number or {base, tiers}, got %s", k.key, truncate(raw))
		}
		*k.field(&r.Rates) = F(*t.Base)
		for i, tp := range t.Tiers {
			if tp.Start == nil || *tp.Start < 0 || tp.Price == nil || !validPrice(*tp.Price) {
				return false, fmt.Errorf("%s.tiers[%d] must have a non-negative start and price", k.key, i)
			}
			tr := tiers[*tp.Start]
			if tr == nil {
				tr = &Tier{AboveInputTokens: *tp.Start}
				tiers[*tp.Start] = tr
			}
			*k.field(&tr.Rates) = F(*tp.Price)
		}
	}
	if !any {
		return false, nil
	}
	if r.Input == nil {
		r.Input = F(0)
	}
	if r.Output == nil {
		r.Output = F(0)
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
		for _, k := range gpTokenKeys {
			if *k.field(&r.Tiers[i].Rates) == nil {
				*k.field(&r.Tiers[i].Rates) = *k.field(&prev)
			}
		}
	}
	return true, nil
}

func validPrice(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

func truncate(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if len(s) > 60 {
		s = strings.ToValidUTF8(s[:60], "") + "…" // no character cut in two
	}
	return s
}
