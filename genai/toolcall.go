package genai

import (
	"maps"
	"slices"
)

// MaxJSONDepth bounds every walk over vendor JSON (decoded or raw): payloads are
// arbitrary, and walkers of raw JSON must stop where these stop to agree with them.
const MaxJSONDepth = 48

// ToolCallIDOf finds the provider tool-call id a tool run answered, from what the run
// returned (output) or was given (input), both decoded JSON, without knowing the
// framework's exact shape:
//   - a result naming the call it answers: LangChain's ToolMessage (tool_call_id, also
//     serialised as {"lc":1,"kwargs":{"tool_call_id":...}}), an OpenAI tool message
//     (tool_call_id), an Anthropic tool_result block (tool_use_id), an OpenAI Responses
//     function_call_output (call_id);
//   - an input that is the call itself, at the top or one level down (OpenLLMetry records
//     a tool function's input as {"args":[...],"kwargs":{...}}): LangChain's ToolCall
//     ({"id","name","args"}, alone or under "tool_call"), an OpenAI tool call
//     ({"id","type":"function","function"}), an Anthropic tool_use block.
//
// The output is asked first: it is the framework's own record of which call was
// answered. "" when neither says.
func ToolCallIDOf(output, input any) string {
	for _, v := range []any{output, input} {
		for _, key := range []string{"tool_call_id", "tool_use_id"} {
			if id := FindString(v, key); id != "" {
				return id
			}
		}
		if id := callIDOf(v); id != "" {
			return id
		}
		// one level down: the values of an object, the elements of an array
		switch t := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				if id := callIDOf(t[k]); id != "" {
					return id
				}
				if arr, ok := t[k].([]any); ok {
					for _, e := range arr {
						if id := callIDOf(e); id != "" {
							return id
						}
					}
				}
			}
		case []any:
			for _, e := range t {
				if id := callIDOf(e); id != "" {
					return id
				}
			}
		}
	}
	return ""
}

// callIDOf is the id of v when v is one tool call (or an OpenAI Responses call output).
func callIDOf(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if typ, _ := m["type"].(string); typ == "function_call_output" || typ == "function_call" {
		if id, _ := m["call_id"].(string); id != "" {
			return id
		}
	}
	if tc, ok := m["tool_call"].(map[string]any); ok {
		m = tc
	}
	id, _ := m["id"].(string)
	if id == "" {
		return ""
	}
	typ, _ := m["type"].(string)
	_, hasFunction := m["function"].(map[string]any)
	_, hasArgs := m["args"]
	_, hasName := m["name"].(string)
	switch {
	case typ == "tool_use", typ == "function" && hasFunction, typ == "tool_call" && hasName:
		return id
	case typ == "" && hasName && hasArgs:
		return id
	}
	return ""
}

// FindString returns the first non-empty string stored under key anywhere in decoded
// JSON v (depth first, object keys in sorted order so the answer is deterministic).
func FindString(v any, key string) string {
	var walk func(v any, depth int) string
	walk = func(v any, depth int) string {
		if depth > MaxJSONDepth {
			return ""
		}
		switch t := v.(type) {
		case map[string]any:
			if s, ok := t[key].(string); ok && s != "" {
				return s
			}
			for _, k := range slices.Sorted(maps.Keys(t)) {
				if s := walk(t[k], depth+1); s != "" {
					return s
				}
			}
		case []any:
			for _, e := range t {
				if s := walk(e, depth+1); s != "" {
					return s
				}
			}
		}
		return ""
	}
	return walk(v, 0)
}

// ResponseToolCallIDs finds the ids of the tool calls a model response asked for, in order,
// without knowing the vendor's exact shape: every element of a "tool_calls" array
// (LangChain AIMessage, OpenAI choices) contributes its "id", and content blocks of type
// "tool_use" (Anthropic) or "function_call" (OpenAI Responses) contribute "id"/"call_id".
// Duplicates (the same message serialised twice, e.g. in kwargs and additional_kwargs)
// are dropped.
func ResponseToolCallIDs(v any) []string {
	var out []string
	seen := map[string]bool{}
	add := func(id any) {
		if s, ok := id.(string); ok && s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > MaxJSONDepth {
			return
		}
		switch t := v.(type) {
		case map[string]any:
			if typ, _ := t["type"].(string); typ == "tool_use" || typ == "function_call" {
				if id, ok := t["call_id"]; ok {
					add(id)
				} else {
					add(t["id"])
				}
			}
			if calls, ok := t["tool_calls"].([]any); ok {
				for _, c := range calls {
					if m, ok := c.(map[string]any); ok {
						add(m["id"])
					}
				}
			}
			for _, k := range slices.Sorted(maps.Keys(t)) {
				if k == "tool_calls" {
					continue
				}
				walk(t[k], depth+1)
			}
		case []any:
			for _, e := range t {
				walk(e, depth+1)
			}
		}
	}
	walk(v, 0)
	return out
}
