package genainormalize

import (
	"encoding/json"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// decodeJSONAttr decodes a JSON object or array held in a string attribute; anything
// else (absent, plain text, malformed) is nil.
func decodeJSONAttr(attrs pcommon.Map, key string) any {
	v, ok := attrs.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		return nil
	}
	raw := strings.TrimSpace(v.Str())
	if raw == "" || (raw[0] != '{' && raw[0] != '[') {
		return nil
	}
	var out any
	if json.Unmarshal([]byte(raw), &out) != nil {
		return nil
	}
	return out
}

// tokenDetails are LangChain's input/output token details, decoded from JSON.
type tokenDetails struct{ in, out detailMap }

type detailMap map[string]any

func (d detailMap) count(key string) (int64, bool) {
	f, ok := d[key].(float64)
	if !ok || f < 0 {
		return 0, false
	}
	return int64(f), true
}

// details decodes a JSON-object attribute; nil when absent or not an object.
func (v *view) details(s slot) detailMap {
	if !v.set[s] || v.vals[s].Type() != pcommon.ValueTypeStr {
		return nil
	}
	raw := v.vals[s].Str()
	if raw == "" || raw[0] != '{' {
		return nil
	}
	var m map[string]any
	if json.Unmarshal([]byte(raw), &m) != nil {
		return nil
	}
	return m
}

// lcMetadata is the LangChain run metadata OpenInference's LangChain instrumentation
// puts, as one JSON object, in its metadata attribute.
type lcMetadata struct {
	Provider  string `json:"ls_provider"`
	ModelName string `json:"ls_model_name"`
}

func (v *view) langChainMetadata() lcMetadata {
	if !v.set[sOIMetadata] {
		return lcMetadata{}
	}
	raw := v.vals[sOIMetadata].AsString()
	// decode only what can hold the keys: metadata may be a large object
	if !strings.Contains(raw, `"ls_`) {
		return lcMetadata{}
	}
	return decodeLCMetadata(raw)
}

// decodeLCMetadata is apart from langChainMetadata so that only a span with metadata pays
// for the value json.Unmarshal makes escape to the heap.
func decodeLCMetadata(raw string) lcMetadata {
	var md lcMetadata
	_ = json.Unmarshal([]byte(raw), &md) // malformed metadata just yields nothing
	return md
}

// aiSDKToolCallIDs reads the ids of ai.response.toolCalls, the JSON array the AI SDK
// records on a provider call ({"toolCallId": ..., "toolName": ..., ...}).
func aiSDKToolCallIDs(raw string) []string {
	if raw == "" || raw[0] != '[' {
		return nil
	}
	var calls []struct {
		ID string `json:"toolCallId"`
	}
	if json.Unmarshal([]byte(raw), &calls) != nil {
		return nil
	}
	ids := make([]string, 0, len(calls))
	for _, c := range calls {
		if c.ID != "" {
			ids = append(ids, c.ID)
		}
	}
	return ids
}
