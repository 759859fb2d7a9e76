package langsmith

import (
	"bytes"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
)

// view reads a checked JSON object kept as a slice of the request body. It answers
// what the mapping asks the way a decoded map would: keys walked in sorted order (as
// genai.FindString walks maps), the same depth limits, the last of duplicate keys
// wins, numbers read as float64. A zero view is an absent object.
type view struct {
	raw []byte
	// fields indexes raw's members for objects read key by key (metadata, usage)
	fields []idxField
	// noEscU: raw holds no \u escape, so a key is in it only if spelled literally
	noEscU bool
	// probed: present says which of the probe keys occur in raw (quoted, at any
	// depth), found in one pass for all of them (see probe)
	probed  bool
	present uint16
}

// The keys the mapping looks for at any depth of outputs; probe finds which occur.
const (
	probeModelName uint16 = 1 << iota
	probeToolCalls
	probeToolUse
	probeFunctionCall
	probeUsageMetadata
	probeTokenUsage
	probeUsage
	probeToolCallID
	probeSubagentStatus
)

// probeBit is the bit of a quoted probe key, 0 for any other.
func probeBit(quoted string) uint16 {
	switch quoted {
	case `"model_name"`:
		return probeModelName
	case `"tool_calls"`:
		return probeToolCalls
	case `"tool_use"`:
		return probeToolUse
	case `"function_call"`:
		return probeFunctionCall
	case `"usage_metadata"`:
		return probeUsageMetadata
	case `"token_usage"`:
		return probeTokenUsage
	case `"usage"`:
		return probeUsage
	case `"tool_call_id"`:
		return probeToolCallID
	case `"subagent_status"`:
		return probeSubagentStatus
	}
	return 0
}

// probe returns v knowing which probe keys its bytes hold, found in one pass over
// its quotes: an llm run's outputs are searched for several keys at depth, and a
// search is skipped outright when its key is not there. Views read from v (child,
// findMap) inherit what was found: their bytes are part of v's.
func (v view) probe() view {
	if !v.noEscU || v.probed {
		return v
	}
	b := v.raw
	for {
		i := bytes.IndexByte(b, '"')
		if i < 0 || i+1 >= len(b) {
			break
		}
		b = b[i:]
		var cands []string
		switch b[1] {
		case 'm':
			cands = probeM
		case 't':
			cands = probeT
		case 'f':
			cands = probeF
		case 'u':
			cands = probeU
		case 's':
			cands = probeS
		}
		for _, q := range cands {
			if len(b) >= len(q) && string(b[:len(q)]) == q {
				v.present |= probeBit(q)
			}
		}
		b = b[1:]
	}
	v.probed = true
	return v
}

var (
	probeM = []string{`"model_name"`}
	probeT = []string{`"tool_calls"`, `"tool_use"`, `"token_usage"`, `"tool_call_id"`}
	probeF = []string{`"function_call"`}
	probeU = []string{`"usage_metadata"`, `"usage"`}
	probeS = []string{`"subagent_status"`}
)

// idxField is one indexed member: key (decoded) and raw value, both slices (of the
// body, or of a decoded key).
type idxField struct {
	key, val []byte
}

// rawView reads a validated raw object.
func rawView(raw []byte) view {
	return view{raw: raw, noEscU: !bytes.Contains(raw, []byte(`\u`))}
}

// mayHold reports whether raw can contain one of the quoted keys (see noEscU): it is
// answered from probe, which knows every key the mapping searches for; any other
// key may be there.
func (v view) mayHold(quoted ...string) bool {
	if !v.noEscU {
		return true
	}
	var bits uint16
	for _, q := range quoted {
		bit := probeBit(q)
		if bit == 0 {
			return true
		}
		bits |= bit
	}
	return v.probe().present&bits != 0
}

// indexed returns a raw view with its members indexed, the index appended to
// *arena (one buffer for all runs of a request instead of one per object).
func indexed(raw []byte, noEscU bool, arena *[]idxField) view {
	start := len(*arena)
	noDoc.Fields(raw, func(k, val []byte) bool {
		*arena = append(*arena, idxField{k, val})
		return true
	})
	return view{raw: raw, fields: (*arena)[start:len(*arena):len(*arena)], noEscU: noEscU}
}

// get is rawGet, through the index when there is one.
func (v view) get(key string) ([]byte, bool) {
	if v.fields == nil {
		return noDoc.Get(v.raw, key)
	}
	for i := len(v.fields) - 1; i >= 0; i-- { // the last duplicate wins
		if string(v.fields[i].key) == key {
			return v.fields[i].val, true
		}
	}
	return nil, false
}

// child is the object under key (ok false when absent or not an object).
func (v view) child(key string) (view, bool) {
	c, ok := v.get(key)
	if !ok || !rawjson.IsObject(c) {
		return view{}, false
	}
	return view{raw: c, noEscU: v.noEscU, probed: v.probed, present: v.present}, true
}

// has reports whether key is present, whatever its value.
func (v view) has(key string) bool {
	_, ok := v.get(key)
	return ok
}

func (v view) num(key string) (int64, bool) {
	c, _ := v.get(key)
	return rawCount(c)
}

// firstString is the first non-empty string among keys.
func (v view) firstString(keys ...string) string {
	for _, k := range keys {
		if c, ok := v.get(k); ok {
			if s, ok := rawjson.String(c); ok && s != "" {
				return s
			}
		}
	}
	return ""
}

// findString is genai.FindString over the raw object.
func (v view) findString(key string) string {
	if !v.mayHold(`"` + key + `"`) {
		return ""
	}
	var found string
	var walk func(raw []byte, depth int) bool
	walk = func(raw []byte, depth int) bool {
		if depth > genai.MaxJSONDepth {
			return false
		}
		switch {
		case rawjson.IsObject(raw):
			if c, ok := noDoc.Get(raw, key); ok {
				if s, ok := rawjson.String(c); ok && s != "" {
					found = s
					return true
				}
			}
			for _, f := range sortedFields(raw) {
				if walk(f.val, depth+1) {
					return true
				}
			}
		case rawjson.IsArray(raw):
			done := false
			noDoc.Elems(raw, func(e []byte) bool {
				done = walk(e, depth+1)
				return !done
			})
			return done
		}
		return false
	}
	walk(v.raw, 0)
	return found
}

// findMap is the first object under key, depth first in sorted key order (at most
// 16 levels down).
func (v view) findMap(key string) (view, bool) {
	if !v.mayHold(`"` + key + `"`) {
		return view{}, false
	}
	var walk func(raw []byte, depth int) []byte
	walk = func(raw []byte, depth int) []byte {
		if depth > 16 {
			return nil
		}
		switch {
		case rawjson.IsObject(raw):
			if c, ok := noDoc.Get(raw, key); ok && rawjson.IsObject(c) {
				return c
			}
			for _, f := range sortedFields(raw) {
				if m := walk(f.val, depth+1); m != nil {
					return m
				}
			}
		case rawjson.IsArray(raw):
			var found []byte
			noDoc.Elems(raw, func(e []byte) bool {
				found = walk(e, depth+1)
				return found == nil
			})
			return found
		}
		return nil
	}
	m := walk(v.raw, 0)
	return view{raw: m, noEscU: v.noEscU, probed: v.probed, present: v.present}, m != nil
}

// toolCallIDs is genai.ResponseToolCallIDs over the raw object.
func (v view) toolCallIDs() []string {
	if !v.mayHold(`"tool_calls"`, `"tool_use"`, `"function_call"`) {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	add := func(raw []byte) {
		if s, ok := rawjson.String(raw); ok && s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	var walk func(raw []byte, depth int)
	walk = func(raw []byte, depth int) {
		if depth > genai.MaxJSONDepth {
			return
		}
		switch {
		case rawjson.IsObject(raw):
			typ, _ := noDoc.Get(raw, "type")
			if s, _ := rawjson.String(typ); s == "tool_use" || s == "function_call" {
				if id, ok := noDoc.Get(raw, "call_id"); ok {
					add(id)
				} else {
					id, _ := noDoc.Get(raw, "id")
					add(id)
				}
			}
			if calls, ok := noDoc.Get(raw, "tool_calls"); ok && rawjson.IsArray(calls) {
				noDoc.Elems(calls, func(c []byte) bool {
					if rawjson.IsObject(c) {
						id, _ := noDoc.Get(c, "id")
						add(id)
					}
					return true
				})
			}
			for _, f := range sortedFields(raw) {
				if f.key == "tool_calls" {
					continue
				}
				walk(f.val, depth+1)
			}
		case rawjson.IsArray(raw):
			noDoc.Elems(raw, func(e []byte) bool {
				walk(e, depth+1)
				return true
			})
		}
	}
	walk(v.raw, 0)
	return out
}
