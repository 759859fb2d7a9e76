package langfuse

import (
	"unsafe"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

// usageFromDetails converts Langfuse usage details to the contract's inclusive usage.
// Langfuse buckets are exclusive (input excludes cache, output excludes reasoning) and
// each key is priced on its own; the contract counts input with cache and output with
// reasoning. OpenAI-shaped objects (prompt_tokens/completion_tokens, or the Responses
// input_tokens/output_tokens with *_details) are already inclusive, as Langfuse itself
// treats them. ok is false when no token count is present.
func usageFromDetails(ud map[string]any) (genai.Usage, bool) {
	n := func(k string) int64 { v, _ := record.Count(ud[k]); return v }
	has := func(k string) bool { _, ok := record.Count(ud[k]); return ok }
	var u genai.Usage
	if has("prompt_tokens") || has("completion_tokens") {
		u.Input, u.Output = n("prompt_tokens"), n("completion_tokens")
		if d, ok := ud["prompt_tokens_details"].(map[string]any); ok {
			u.CacheRead, _ = record.Count(d["cached_tokens"])
		}
		if d, ok := ud["completion_tokens_details"].(map[string]any); ok {
			u.Reasoning, _ = record.Count(d["reasoning_tokens"])
		}
		return u, true
	}
	if (has("input_tokens") || has("output_tokens")) && !has("input") && !has("output") {
		u.Input, u.Output = n("input_tokens"), n("output_tokens")
		if d, ok := ud["input_tokens_details"].(map[string]any); ok {
			u.CacheRead, _ = record.Count(d["cached_tokens"])
		}
		if d, ok := ud["output_tokens_details"].(map[string]any); ok {
			u.Reasoning, _ = record.Count(d["reasoning_tokens"])
		}
		return u, true
	}
	var acc bucketAcc
	for k, v := range ud {
		if c, ok := record.Count(v); ok {
			addCount(&acc, k, c)
		}
	}
	return acc.u, acc.found
}

// bucketAcc folds Langfuse's exclusive usage keys into the contract's inclusive usage.
type bucketAcc struct {
	u     genai.Usage
	found bool
}

// addCount folds the count c of key k into b. It reads k without converting it, so the
// flat walk passes its keys as the bytes of the body.
func addCount[T string | []byte](b *bucketAcc, k T, c int64) {
	b.found = true
	u := &b.u
	switch key := string(k); {
	case key == "total":
		// derived: the contract has no total attribute
	case key == "input_cached_tokens" || key == "input_cache_read" || key == "cache_read_input_tokens" || key == "input_cached":
		u.CacheRead += c
		u.Input += c
	case hasPrefix(k, "input_cache_creation") || key == "cache_creation_input_tokens" || key == "input_cache_write":
		u.CacheCreation += c
		u.Input += c
	case key == "output_reasoning_tokens" || key == "output_reasoning":
		u.Reasoning += c
		u.Output += c
	case key == "input" || hasPrefix(k, "input_"):
		u.Input += c
	case key == "output" || hasPrefix(k, "output_"):
		u.Output += c
	}
}

// hasPrefix is strings.HasPrefix for a key of either type.
func hasPrefix[T string | []byte](k T, prefix string) bool {
	return len(k) >= len(prefix) && string(k[:len(prefix)]) == prefix
}

// usageFromDetailsJSON is usageFromDetails for the JSON text of
// langfuse.observation.usage_details (OTLP face) or of an event's usageDetails
// (ingestion face). The SDKs send a flat object of counts; that common case is read
// in one checking walk without building a map (decoding it whole would be most of
// the OTLP face's cost), anything else is decoded whole.
func usageFromDetailsJSON[T string | []byte](s T) (genai.Usage, bool) {
	if u, ok, flat := flatCounts(readOnlyBytes(s)); flat {
		return u, ok
	}
	d, ok := rawjson.Parse([]byte(s))
	if !ok {
		return genai.Usage{}, false
	}
	ud, ok := rawjson.Value(d.Root()).(map[string]any)
	if !ok {
		return genai.Usage{}, false
	}
	return usageFromDetails(ud)
}

// readOnlyBytes is the text s as bytes, for flatCounts alone: an attribute's string is
// read in place rather than copied for every span (the walk only reads; nothing keeps
// the slice past the call).
func readOnlyBytes[T string | []byte](s T) []byte {
	switch v := any(s).(type) {
	case string:
		return unsafe.Slice(unsafe.StringData(v), len(v))
	case []byte:
		return v
	}
	return nil
}

// maxFlatKeys is the most keys flatCounts reads (the SDKs send a handful); an object
// with more is decoded whole.
const maxFlatKeys = 16

// flatCounts reads {"key": <non-negative integer>, ...} with rawjson.Counts (the
// receiver's one JSON grammar). flat is false for anything else (a nested value, a
// string, a float, a duplicate key, OpenAI-shaped keys, not JSON): the caller then
// decodes it whole, which gives every such case its meaning.
func flatCounts(b []byte) (u genai.Usage, ok, flat bool) {
	var acc bucketAcc
	var seen [maxFlatKeys][]byte
	n := 0
	flat = rawjson.Counts(b, func(key []byte, c int64) bool {
		switch string(key) {
		case "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens":
			return false // OpenAI shapes are inclusive: the full decoder knows them
		}
		if n == maxFlatKeys {
			return false
		}
		for _, s := range seen[:n] {
			if string(s) == string(key) { // a decoded object keeps only the last
				return false
			}
		}
		seen[n] = key // a slice of b, or a decoded copy of an escaped key
		n++
		addCount(&acc, key, c)
		return true
	})
	if !flat {
		return u, false, false
	}
	return acc.u, acc.found, true
}
