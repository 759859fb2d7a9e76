package langsmith

import (
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/spanutil"
)

// usageOf reads an llm run's usage. LangSmith's usage_metadata is inclusive like the
// contract (input_tokens counts cache, output_tokens counts reasoning; the details are
// parts), so it maps one to one. Looked up in order: outputs.usage_metadata,
// extra.metadata.usage_metadata, a usage_metadata anywhere in outputs (the AIMessage
// inside generations), then provider-native usage in outputs (OpenAI token_usage /
// usage with prompt_tokens, Anthropic usage with cache fields outside input_tokens).
func usageOf(r Run) (genai.Usage, bool) {
	if um, ok := r.Outputs["usage_metadata"].(map[string]any); ok {
		return fromUsageMetadata(um)
	}
	if um, ok := metadata(r)["usage_metadata"].(map[string]any); ok {
		return fromUsageMetadata(um)
	}
	if um := findMap(r.Outputs, "usage_metadata", 0); um != nil {
		return fromUsageMetadata(um)
	}
	for _, k := range []string{"token_usage", "usage"} {
		if m := findMap(r.Outputs, k, 0); m != nil {
			if u, ok := fromProviderUsage(m); ok {
				return u, true
			}
		}
	}
	return genai.Usage{}, false
}

func num(m map[string]any, key string) (int64, bool) {
	return spanutil.ToInt64(m[key])
}

func fromUsageMetadata(um map[string]any) (genai.Usage, bool) {
	var u genai.Usage
	in, okIn := num(um, "input_tokens")
	out, okOut := num(um, "output_tokens")
	if !okIn && !okOut {
		return u, false
	}
	u.Input, u.Output = in, out
	if d, ok := um["input_token_details"].(map[string]any); ok {
		u.CacheRead, _ = num(d, "cache_read")
		if cc, ok := num(d, "cache_creation"); ok {
			u.CacheCreation = cc
		} else {
			e5, _ := num(d, "ephemeral_5m_input_tokens")
			e1, _ := num(d, "ephemeral_1h_input_tokens")
			u.CacheCreation = e5 + e1
		}
	}
	if d, ok := um["output_token_details"].(map[string]any); ok {
		u.Reasoning, _ = num(d, "reasoning")
	}
	return u, true
}

// fromProviderUsage reads OpenAI (prompt_tokens include cached_tokens) and Anthropic
// (input_tokens exclude cache_read_input_tokens and cache_creation_input_tokens) usage.
func fromProviderUsage(m map[string]any) (genai.Usage, bool) {
	var u genai.Usage
	if p, ok := num(m, "prompt_tokens"); ok {
		u.Input = p
		u.Output, _ = num(m, "completion_tokens")
		if d, ok := m["prompt_tokens_details"].(map[string]any); ok {
			u.CacheRead, _ = num(d, "cached_tokens")
		}
		if d, ok := m["completion_tokens_details"].(map[string]any); ok {
			u.Reasoning, _ = num(d, "reasoning_tokens")
		}
		return u, true
	}
	in, okIn := num(m, "input_tokens")
	out, okOut := num(m, "output_tokens")
	if !okIn && !okOut {
		return u, false
	}
	u.CacheRead, _ = num(m, "cache_read_input_tokens")
	u.CacheCreation, _ = num(m, "cache_creation_input_tokens")
	_, anthropic := m["cache_read_input_tokens"]
	_, anthropic2 := m["cache_creation_input_tokens"]
	if anthropic || anthropic2 {
		in += u.CacheRead + u.CacheCreation
	} else if d, ok := m["input_tokens_details"].(map[string]any); ok { // OpenAI Responses
		u.CacheRead, _ = num(d, "cached_tokens")
	}
	if d, ok := m["output_tokens_details"].(map[string]any); ok {
		u.Reasoning, _ = num(d, "reasoning_tokens")
	}
	u.Input, u.Output = in, out
	return u, true
}

func findMap(v any, key string, depth int) map[string]any {
	if depth > 16 {
		return nil
	}
	switch t := v.(type) {
	case map[string]any:
		if m, ok := t[key].(map[string]any); ok {
			return m
		}
		for _, k := range sortedKeys(t) {
			if m := findMap(t[k], key, depth+1); m != nil {
				return m
			}
		}
	case []any:
		for _, e := range t {
			if m := findMap(e, key, depth+1); m != nil {
				return m
			}
		}
	}
	return nil
}
