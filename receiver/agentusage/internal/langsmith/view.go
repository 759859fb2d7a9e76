package langsmith

import (
	"encoding/json"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/spanutil"
)

// view reads a JSON object that is either decoded (m) or still raw (a validated
// slice of the request body). The raw readers mirror the map readers exactly: same
// key order (sorted, as spanutil walks maps), same depth limits, last duplicate key
// wins, numbers read as float64.
type view struct {
	m   map[string]any
	raw []byte
}

func mapView(m map[string]any) view { return view{m: m} }

// child is the object under key (ok false when absent or not an object).
func (v view) child(key string) (view, bool) {
	if v.raw != nil {
		c, ok := rawGet(v.raw, key)
		if !ok || !isObj(c) {
			return view{}, false
		}
		return view{raw: c}, true
	}
	m, ok := v.m[key].(map[string]any)
	return view{m: m}, ok
}

// has reports whether key is present, whatever its value.
func (v view) has(key string) bool {
	if v.raw != nil {
		_, ok := rawGet(v.raw, key)
		return ok
	}
	_, ok := v.m[key]
	return ok
}

func (v view) num(key string) (int64, bool) {
	if v.raw != nil {
		c, _ := rawGet(v.raw, key)
		return spanutil.ToInt64(rawScalar(c))
	}
	return spanutil.ToInt64(v.m[key])
}

// firstString is the first non-empty string among keys.
func (v view) firstString(keys ...string) string {
	if v.raw == nil {
		return firstString(v.m, keys...)
	}
	for _, k := range keys {
		if c, ok := rawGet(v.raw, k); ok {
			if s, ok := rawStr(c); ok && s != "" {
				return s
			}
		}
	}
	return ""
}

// findString is spanutil.FindString.
func (v view) findString(key string) string {
	if v.raw == nil {
		return spanutil.FindString(v.m, key)
	}
	if !mayHold(v.raw, `"`+key+`"`) {
		return ""
	}
	var found string
	var walk func(raw []byte, depth int) bool
	walk = func(raw []byte, depth int) bool {
		if depth > spanutil.MaxWalkDepth {
			return false
		}
		switch {
		case isObj(raw):
			if c, ok := rawGet(raw, key); ok {
				if s, ok := rawStr(c); ok && s != "" {
					found = s
					return true
				}
			}
			for _, f := range sortedFields(raw) {
				if walk(f.val, depth+1) {
					return true
				}
			}
		case isArr(raw):
			done := false
			eachElem(raw, func(e []byte) bool {
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

// findMap is findMap: the first object under key, depth first in sorted key order.
func (v view) findMap(key string) (view, bool) {
	if v.raw == nil {
		m := findMap(v.m, key, 0)
		return view{m: m}, m != nil
	}
	if !mayHold(v.raw, `"`+key+`"`) {
		return view{}, false
	}
	var walk func(raw []byte, depth int) []byte
	walk = func(raw []byte, depth int) []byte {
		if depth > 16 {
			return nil
		}
		switch {
		case isObj(raw):
			if c, ok := rawGet(raw, key); ok && isObj(c) {
				return c
			}
			for _, f := range sortedFields(raw) {
				if m := walk(f.val, depth+1); m != nil {
					return m
				}
			}
		case isArr(raw):
			var found []byte
			eachElem(raw, func(e []byte) bool {
				found = walk(e, depth+1)
				return found == nil
			})
			return found
		}
		return nil
	}
	m := walk(v.raw, 0)
	return view{raw: m}, m != nil
}

// toolCallIDs is spanutil.ToolCallIDs.
func (v view) toolCallIDs() []string {
	if v.raw == nil {
		return spanutil.ToolCallIDs(v.m)
	}
	if !mayHold(v.raw, `"tool_calls"`) && !mayHold(v.raw, `"tool_use"`) && !mayHold(v.raw, `"function_call"`) {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	add := func(raw []byte) {
		if s, ok := rawStr(raw); ok && s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	var walk func(raw []byte, depth int)
	walk = func(raw []byte, depth int) {
		if depth > spanutil.MaxWalkDepth {
			return
		}
		switch {
		case isObj(raw):
			typ, _ := rawGet(raw, "type")
			if s, _ := rawStr(typ); s == "tool_use" || s == "function_call" {
				if id, ok := rawGet(raw, "call_id"); ok {
					add(id)
				} else {
					id, _ := rawGet(raw, "id")
					add(id)
				}
			}
			if calls, ok := rawGet(raw, "tool_calls"); ok && isArr(calls) {
				eachElem(calls, func(c []byte) bool {
					if isObj(c) {
						id, _ := rawGet(c, "id")
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
		case isArr(raw):
			eachElem(raw, func(e []byte) bool {
				walk(e, depth+1)
				return true
			})
		}
	}
	walk(v.raw, 0)
	return out
}

// decode turns a raw view into a map (for merging); a decoded view is returned as is.
func (v view) decode() map[string]any {
	if v.raw == nil {
		return v.m
	}
	var m map[string]any
	_ = json.Unmarshal(v.raw, &m)
	return m
}
