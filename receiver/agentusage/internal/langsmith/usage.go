package langsmith

import (
	"maps"
	"slices"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

// usageOf reads an llm run's usage. LangSmith's usage_metadata is inclusive like the
// contract (input_tokens counts cache, output_tokens counts reasoning; the details are
// parts), so it maps one to one. Looked up in order: outputs.usage_metadata,
// extra.metadata.usage_metadata, a usage_metadata anywhere in outputs (the AIMessage
// inside generations), then provider-native usage in outputs (OpenAI token_usage /
// usage with prompt_tokens, Anthropic usage with cache fields outside input_tokens).
func usageOf(r Run, out view) (genai.Usage, bool) {
	if um, ok := out.child("usage_metadata"); ok {
		return fromUsageMetadata(um)
	}
	if um, ok := metadata(r).child("usage_metadata"); ok {
		return fromUsageMetadata(um)
	}
	if um, ok := out.findMap("usage_metadata"); ok {
		return fromUsageMetadata(um)
	}
	for _, k := range []string{"token_usage", "usage"} {
		if m, ok := out.findMap(k); ok {
			if u, ok := fromProviderUsage(m); ok {
				return u, true
			}
		}
	}
	return genai.Usage{}, false
}

func fromUsageMetadata(um view) (genai.Usage, bool) {
	if um.raw != nil {
		return rawUsageMetadata(um.raw)
	}
	var u genai.Usage
	in, okIn := um.num("input_tokens")
	out, okOut := um.num("output_tokens")
	if !okIn && !okOut {
		return u, false
	}
	u.Input, u.Output = in, out
	if d, ok := um.child("input_token_details"); ok {
		u.CacheRead, _ = d.num("cache_read")
		if cc, ok := d.num("cache_creation"); ok {
			u.CacheCreation = cc
		} else {
			e5, _ := d.num("ephemeral_5m_input_tokens")
			e1, _ := d.num("ephemeral_1h_input_tokens")
			u.CacheCreation = e5 + e1
		}
	}
	if d, ok := um.child("output_token_details"); ok {
		u.Reasoning, _ = d.num("reasoning")
	}
	return u, true
}

// fromProviderUsage reads OpenAI (prompt_tokens include cached_tokens) and Anthropic
// (input_tokens exclude cache_read_input_tokens and cache_creation_input_tokens) usage.
func fromProviderUsage(m view) (genai.Usage, bool) {
	var u genai.Usage
	if p, ok := m.num("prompt_tokens"); ok {
		u.Input = p
		u.Output, _ = m.num("completion_tokens")
		if d, ok := m.child("prompt_tokens_details"); ok {
			u.CacheRead, _ = d.num("cached_tokens")
		}
		if d, ok := m.child("completion_tokens_details"); ok {
			u.Reasoning, _ = d.num("reasoning_tokens")
		}
		return u, true
	}
	in, okIn := m.num("input_tokens")
	out, okOut := m.num("output_tokens")
	if !okIn && !okOut {
		return u, false
	}
	u.CacheRead, _ = m.num("cache_read_input_tokens")
	u.CacheCreation, _ = m.num("cache_creation_input_tokens")
	if m.has("cache_read_input_tokens") || m.has("cache_creation_input_tokens") {
		in += u.CacheRead + u.CacheCreation
	} else if d, ok := m.child("input_tokens_details"); ok { // OpenAI Responses
		u.CacheRead, _ = d.num("cached_tokens")
	}
	if d, ok := m.child("output_tokens_details"); ok {
		u.Reasoning, _ = d.num("reasoning_tokens")
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
		for _, k := range slices.Sorted(maps.Keys(t)) {
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

// rawUsageMetadata is fromUsageMetadata over a raw object, in one pass per object
// (the hot path: every llm run has one).
func rawUsageMetadata(um []byte) (genai.Usage, bool) {
	var u genai.Usage
	var in, out, inD, outD []byte
	eachField(um, func(k, v []byte) bool {
		switch string(k) { // the last duplicate wins, as in a decoded map
		case "input_tokens":
			in = v
		case "output_tokens":
			out = v
		case "input_token_details":
			inD = v
		case "output_token_details":
			outD = v
		}
		return true
	})
	var okIn, okOut bool
	u.Input, okIn = record.Count(rawScalar(in))
	u.Output, okOut = record.Count(rawScalar(out))
	if !okIn && !okOut {
		return genai.Usage{}, false
	}
	if isObj(inD) {
		var cr, cc, e5, e1 []byte
		hasCC := false
		eachField(inD, func(k, v []byte) bool {
			switch string(k) {
			case "cache_read":
				cr = v
			case "cache_creation":
				cc, hasCC = v, true
			case "ephemeral_5m_input_tokens":
				e5 = v
			case "ephemeral_1h_input_tokens":
				e1 = v
			}
			return true
		})
		u.CacheRead, _ = record.Count(rawScalar(cr))
		if n, ok := record.Count(rawScalar(cc)); ok && hasCC {
			u.CacheCreation = n
		} else {
			n5, _ := record.Count(rawScalar(e5))
			n1, _ := record.Count(rawScalar(e1))
			u.CacheCreation = n5 + n1
		}
	}
	if isObj(outD) {
		var r []byte
		eachField(outD, func(k, v []byte) bool {
			if string(k) == "reasoning" {
				r = v
			}
			return true
		})
		u.Reasoning, _ = record.Count(rawScalar(r))
	}
	return u, true
}
