package genai

import (
	"encoding/json"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// StringsFromMap reads a string-array attribute. A plain string counts as a one-element
// array, and a JSON-encoded array string (what some SDKs send for lists) is decoded.
func StringsFromMap(m pcommon.Map, key string) []string {
	v, ok := m.Get(key)
	if !ok {
		return nil
	}
	switch v.Type() {
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		out := make([]string, 0, s.Len())
		for i := 0; i < s.Len(); i++ {
			if str := s.At(i).AsString(); str != "" {
				out = append(out, str)
			}
		}
		return out
	case pcommon.ValueTypeStr:
		str := v.Str()
		if len(str) > 0 && str[0] == '[' {
			var arr []string
			if json.Unmarshal([]byte(str), &arr) == nil {
				return arr
			}
		}
		if str == "" {
			return nil
		}
		return []string{str}
	}
	return nil
}

// PutStrings writes a string-array attribute.
func PutStrings(m pcommon.Map, key string, values []string) {
	s := m.PutEmptySlice(key)
	s.EnsureCapacity(len(values))
	for _, v := range values {
		s.AppendEmpty().SetStr(v)
	}
}

// outputMessage is the part of a semconv gen_ai.output.messages entry that names tool calls.
type outputMessage struct {
	Parts []struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"parts"`
}

// ToolCallIDsFromOutputMessages extracts the ids of tool_call parts from a semconv
// gen_ai.output.messages JSON value, in order. Malformed JSON yields nil: it is opt-in
// content from arbitrary emitters, never a reason to fail.
func ToolCallIDsFromOutputMessages(raw string) []string {
	if raw == "" {
		return nil
	}
	var msgs []outputMessage
	if err := json.Unmarshal([]byte(raw), &msgs); err != nil {
		return nil
	}
	var ids []string
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == "tool_call" && p.ID != "" {
				ids = append(ids, p.ID)
			}
		}
	}
	return ids
}

// DispatchedToolCallIDs returns the tool-call ids a chat span's response asked for:
// agentmeter.response.tool_call_ids, or, when absent, the tool_call parts of
// gen_ai.output.messages (docs/contract.md#merge).
func DispatchedToolCallIDs(m pcommon.Map) []string {
	if ids := StringsFromMap(m, AttrResponseToolCallIDs); len(ids) > 0 {
		return ids
	}
	if v, ok := m.Get(AttrOutputMessages); ok {
		return ToolCallIDsFromOutputMessages(v.AsString())
	}
	return nil
}
