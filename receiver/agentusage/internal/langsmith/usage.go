package langsmith

import (
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
)

// usageOf reads an llm run's usage. LangSmith's usage_metadata is inclusive like the
// contract (input_tokens counts cache, output_tokens counts reasoning; the details are
// parts), so it maps one to one. Looked up in order: outputs.usage_metadata,
// extra.metadata.usage_metadata, a usage_metadata anywhere in outputs (the AIMessage
// inside generations), then provider-native usage in outputs (OpenAI token_usage /
// usage with prompt_tokens, Anthropic usage with cache fields outside input_tokens).
// cache1h is the part of the cache writes made with a one-hour lifetime
// (input_token_details.ephemeral_1h_input_tokens, Anthropic's
// cache_creation.ephemeral_1h_input_tokens), priced at its own rate.
func usageOf(r *Run, out view) (u genai.Usage, cache1h int64, ok bool) {
	if um, ok := out.child("usage_metadata"); ok {
		return rawUsageMetadata(um.raw)
	}
	if um, ok := metadata(r).child("usage_metadata"); ok {
		return rawUsageMetadata(um.raw)
	}
	if um, ok := out.findMap("usage_metadata"); ok {
		return rawUsageMetadata(um.raw)
	}
	for _, k := range []string{"token_usage", "usage"} {
		if m, ok := out.findMap(k); ok {
			if u, ok := fromProviderUsage(m); ok {
				if cc, ok := m.child("cache_creation"); ok {
					cache1h, _ = cc.num("ephemeral_1h_input_tokens")
				}
				return u, min(cache1h, u.CacheCreation), true
			}
		}
	}
	return genai.Usage{}, 0, false
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

// rawUsageMetadata reads a usage_metadata object in one pass per object (the hot
// path: every llm run has one).
func rawUsageMetadata(um []byte) (genai.Usage, int64, bool) {
	var u genai.Usage
	var in, out, inD, outD []byte
	noDoc.Fields(um, func(k, v []byte) bool {
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
	u.Input, okIn = rawCount(in)
	u.Output, okOut = rawCount(out)
	if !okIn && !okOut {
		return genai.Usage{}, 0, false
	}
	var cache1h int64
	if rawjson.IsObject(inD) {
		var cr, cc, e5, e1 []byte
		hasCC := false
		noDoc.Fields(inD, func(k, v []byte) bool {
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
		u.CacheRead, _ = rawCount(cr)
		n1, _ := rawCount(e1)
		if n, ok := rawCount(cc); ok && hasCC {
			u.CacheCreation = n
		} else {
			n5, _ := rawCount(e5)
			u.CacheCreation = n5 + n1
		}
		cache1h = min(n1, u.CacheCreation) // a part of the cache writes
	}
	if rawjson.IsObject(outD) {
		var r []byte
		noDoc.Fields(outD, func(k, v []byte) bool {
			if string(k) == "reasoning" {
				r = v
			}
			return true
		})
		u.Reasoning, _ = rawCount(r)
	}
	return u, cache1h, true
}
