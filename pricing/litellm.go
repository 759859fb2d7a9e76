package pricing

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// litellmEntry is the part of one model_prices_and_context_window.json entry that prices
// tokens (USD per token). Other fields (context sizes, image and audio prices) are not read.
type litellmEntry struct {
	Provider     string   `json:"litellm_provider"`
	Mode         string   `json:"mode"`
	Input        *float64 `json:"input_cost_per_token"`
	Output       *float64 `json:"output_cost_per_token"`
	CacheRead    *float64 `json:"cache_read_input_token_cost"`
	CacheWrite   *float64 `json:"cache_creation_input_token_cost"`
	CacheWrite1h *float64 `json:"cache_creation_input_token_cost_above_1hr"`
	Reasoning    *float64 `json:"output_cost_per_reasoning_token"`
}

var litellmTierKey = regexp.MustCompile(`^(input_cost_per_token|output_cost_per_token|cache_read_input_token_cost|cache_creation_input_token_cost|output_cost_per_reasoning_token)_above_(\d+)k_tokens$`)

// ParseLiteLLM reads LiteLLM's model_prices_and_context_window.json into rows. Entries
// without both an input and an output token price (images, audio, embeddings priced per
// call) are skipped, and so is the "sample_spec" entry. A provider prefix in the key
// ("gemini/gemini-2.5-pro") is dropped from the model id; the provider comes from
// litellm_provider. When two keys name the same provider and model, the first in key
// order is kept. Prompt-size prices (`*_above_200k_tokens`) become tiers.
func ParseLiteLLM(data []byte, source string) ([]Row, error) {
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("litellm price file: %w", err)
	}
	keys := slices.Sorted(maps.Keys(entries))
	seen := map[string]bool{}
	var rows []Row
	for _, key := range keys {
		if key == "sample_spec" {
			continue
		}
		var e litellmEntry
		if err := json.Unmarshal(entries[key], &e); err != nil {
			return nil, fmt.Errorf("litellm price file: entry %q: %w", key, err)
		}
		if e.Input == nil || e.Output == nil {
			continue
		}
		if e.Mode != "" && e.Mode != "chat" && e.Mode != "completion" && e.Mode != "responses" {
			continue
		}
		model := key
		if i := strings.LastIndexByte(model, '/'); i >= 0 {
			model = model[i+1:]
		}
		provider := litellmFamily(e.Provider)
		if provider == "" || model == "" {
			continue
		}
		id := provider + "/" + strings.ToLower(model)
		if seen[id] {
			continue
		}
		seen[id] = true
		r := Row{Provider: provider, Model: model, Source: source + " (" + key + ")", Rates: Rates{
			Input: perMillion(e.Input), Output: perMillion(e.Output), CacheRead: perMillion(e.CacheRead),
			CacheWrite: perMillion(e.CacheWrite), CacheWrite1h: perMillion(e.CacheWrite1h), Reasoning: perMillion(e.Reasoning),
		}}
		var raw map[string]json.RawMessage
		_ = json.Unmarshal(entries[key], &raw) // decoded once above, cannot fail now
		tiers := map[int64]*Tier{}
		for k, v := range raw {
			m := litellmTierKey.FindStringSubmatch(k)
			if m == nil {
				continue
			}
			var price float64
			if err := json.Unmarshal(v, &price); err != nil {
				return nil, fmt.Errorf("litellm price file: entry %q: %s: %w", key, k, err)
			}
			n, _ := strconv.ParseInt(m[2], 10, 64)
			tr := tiers[n*1000]
			if tr == nil {
				tr = &Tier{AboveInputTokens: n * 1000}
				tiers[n*1000] = tr
			}
			p := perMillion(&price)
			switch m[1] {
			case "input_cost_per_token":
				tr.Input = p
			case "output_cost_per_token":
				tr.Output = p
			case "cache_read_input_token_cost":
				tr.CacheRead = p
			case "cache_creation_input_token_cost":
				tr.CacheWrite = p
			case "output_cost_per_reasoning_token":
				tr.Reasoning = p
			}
		}
		for _, tr := range tiers {
			r.Tiers = append(r.Tiers, *tr)
		}
		sort.Slice(r.Tiers, func(i, j int) bool { return r.Tiers[i].AboveInputTokens < r.Tiers[j].AboveInputTokens })
		rows = append(rows, r)
	}
	return rows, nil
}

// perMillion turns USD per token into USD per million tokens, rounded to 1e-9 so
// 3e-06 reads back as 3, not 2.9999999999999996.
func perMillion(perToken *float64) *float64 {
	if perToken == nil {
		return nil
	}
	v := float64(int64(*perToken*1e6*1e9+0.5)) / 1e9
	return &v
}

// litellmFamily maps litellm_provider values onto the table's provider families.
func litellmFamily(p string) string {
	switch {
	case p == "text-completion-openai" || p == "openai":
		return "openai"
	case p == "gemini" || strings.HasPrefix(p, "vertex_ai-language") || p == "vertex_ai":
		return "google"
	case p == "vertex_ai-anthropic_models":
		return "anthropic"
	case p == "text-completion-codestral" || p == "codestral":
		return "mistral"
	}
	return Family(p)
}
