package langsmith

import (
	"sort"
	"strings"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/timestamps"
)

// runKeys are the run fields the scanning decoder reads. A key that differs from one
// of them only in case would be matched by encoding/json's struct decoding (the
// typed path), so the scanner leaves such bodies to it.
var runKeys = []string{"id", "trace_id", "dotted_order", "parent_run_id", "name", "run_type", "session_name",
	"start_time", "end_time", "inputs", "outputs", "extra", "error", "tags"}

func foldsToKnown(key []byte, known []string) bool {
	for _, k := range known {
		if len(k) == len(key) && strings.EqualFold(k, string(key)) {
			return true
		}
	}
	return false
}

// runScanner fills a Run from the members of a run object.
type runScanner struct {
	r      *Run
	idSeen bool // "id" was present (even null)
}

// scanRun decodes one run object (with optional surrounding space) the way the
// typed fast path (typedRun) does: ok is false for anything that path would refuse
// or decode differently, and for anything this scanner is unsure of.
func scanRun(b []byte, patch bool) (r Run, idSeen, ok bool) {
	end, idSeen, ok := scanRunInto(&r, b, skipWS(b, 0), patch)
	return r, idSeen, ok && skipWS(b, end) == len(b)
}

// scanRunInto scans the run object at b[i] into r, validating it, and returns the
// index after it.
func scanRunInto(r *Run, b []byte, i int, patch bool) (int, bool, bool) {
	sr := runScanner{r: r}
	if i >= len(b) || b[i] != '{' {
		return 0, false, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, false, false
			}
			kend, plain, ok := scanString(b, i)
			if !ok || !plain {
				return 0, false, false
			}
			key := b[i+1 : kend-1]
			i = skipWS(b, kend)
			if i >= len(b) || b[i] != ':' {
				return 0, false, false
			}
			i = skipWS(b, i+1)
			vend, ok := scanValue(b, i, 1)
			if !ok {
				return 0, false, false
			}
			if !sr.field(key, b[i:vend]) {
				return 0, false, false
			}
			i = skipWS(b, vend)
			if i >= len(b) {
				return 0, false, false
			}
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return 0, false, false
			}
			i = skipWS(b, i+1)
		}
	}
	r.Posted = !patch
	return i, sr.idSeen, true
}

// field sets one member; the last of duplicate keys wins, as in encoding/json.
func (sr *runScanner) field(key, val []byte) bool {
	r := sr.r
	null := string(val) == "null"
	str := func(dst *string) bool {
		if null {
			*dst = ""
			return true
		}
		s, ok := rawStr(val)
		*dst = s
		return ok
	}
	// obj keeps a free-form JSON object as a slice of the body; null clears it.
	obj := func() ([]byte, bool) {
		if null {
			return nil, true
		}
		if !isObj(val) {
			return nil, false
		}
		return val, true
	}
	switch string(key) {
	case "id":
		sr.idSeen = true
		return str(&r.ID)
	case "trace_id":
		return str(&r.TraceID)
	case "dotted_order":
		return str(&r.DottedOrder)
	case "parent_run_id":
		return str(&r.ParentRunID)
	case "name":
		return str(&r.Name)
	case "run_type":
		return str(&r.RunType)
	case "session_name":
		return str(&r.SessionName)
	case "start_time":
		t, err := timestamps.ParseRawTime(val)
		r.Start = t
		return err == nil
	case "end_time":
		t, err := timestamps.ParseRawTime(val)
		r.End = t
		return err == nil
	case "inputs":
		v, ok := obj()
		r.RawInputs = v
		return ok
	case "outputs":
		v, ok := obj()
		r.rawOutputs = v
		return ok
	case "extra":
		v, ok := obj()
		r.rawExtra = v
		return ok
	case "error":
		r.Error = ""
		if !null {
			if val[0] != '"' {
				return false // the typed path keeps the raw text; leave it to that path
			}
			s, ok := rawStr(val)
			r.Error = s
			return ok
		}
	case "tags":
		r.Tags = nil
		if null {
			return true
		}
		if !isArr(val) {
			return false
		}
		ok := true
		tags := make([]string, 0, 4)
		eachElem(val, func(e []byte) bool {
			s, isStr := rawStr(e)
			ok = isStr
			tags = append(tags, s)
			return ok
		})
		r.Tags = tags
		return ok
	default:
		return !foldsToKnown(key, runKeys)
	}
	return true
}

// validRun reports whether the run passes the typed path's id checks.
func validRun(r *Run) bool {
	return ids.IsUUIDOrHex(r.ID) && (r.TraceID == "" || ids.IsUUIDOrHex(r.TraceID))
}

// decodeBatchScan is the scanning decoder for /runs/batch. It accepts only bodies the
// typed path (decodeBatchFast) accepts and returns the same runs; anything else
// returns errSlowPath.
func decodeBatchScan(body []byte) ([]Op, error) {
	b := body
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, errSlowPath
	}
	ops := make([]Op, 0, len(b)/512+8)
	seen := [2]bool{}
	reorder := false // a patch group before the post group
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return nil, errSlowPath
			}
			kend, plain, ok := scanString(b, i)
			if !ok || !plain {
				return nil, errSlowPath
			}
			key := b[i+1 : kend-1]
			i = skipWS(b, kend)
			if i >= len(b) || b[i] != ':' {
				return nil, errSlowPath
			}
			i = skipWS(b, i+1)
			g := -1
			switch string(key) {
			case "post":
				g = 0
			case "patch":
				g = 1
			default:
				if foldsToKnown(key, []string{"post", "patch"}) {
					return nil, errSlowPath
				}
			}
			var vend int
			if g >= 0 {
				if seen[g] {
					return nil, errSlowPath // a repeated key replaces the first: left to encoding/json
				}
				seen[g] = true
				reorder = reorder || (g == 0 && seen[1])
				ops, vend, ok = scanRuns(ops, b, i, g == 1)
			} else {
				vend, ok = scanValue(b, i, 0)
			}
			if !ok {
				return nil, errSlowPath
			}
			i = skipWS(b, vend)
			if i >= len(b) {
				return nil, errSlowPath
			}
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return nil, errSlowPath
			}
			i = skipWS(b, i+1)
		}
	}
	if skipWS(b, i) != len(b) {
		return nil, errSlowPath
	}
	if reorder { // posts first, as the typed path returns them
		sort.SliceStable(ops, func(i, j int) bool { return !ops[i].Patch && ops[j].Patch })
	}
	return ops, nil
}

// scanRuns scans an array of runs (or null) at b[i], appending them to ops.
func scanRuns(ops []Op, b []byte, i int, patch bool) ([]Op, int, bool) {
	if end, ok := lit(b, i, "null"); ok {
		return ops, end, true
	}
	if i >= len(b) || b[i] != '[' {
		return nil, 0, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return ops, i + 1, true
	}
	for {
		ops = append(ops, Op{Patch: patch})
		sr := &ops[len(ops)-1]
		end, _, ok := scanRunInto(&sr.Run, b, i, patch)
		if !ok || !validRun(&sr.Run) {
			return nil, 0, false
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return nil, 0, false
		}
		if b[i] == ']' {
			return ops, i + 1, true
		}
		if b[i] != ',' {
			return nil, 0, false
		}
		i = skipWS(b, i+1)
	}
}
