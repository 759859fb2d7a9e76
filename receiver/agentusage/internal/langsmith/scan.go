package langsmith

import (
	"strings"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/spanutil"
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

// scannedRun is one run object as the scanner saw it.
type scannedRun struct {
	run    Run
	idSeen bool
	// split fields present in the object (for multipart's precedence rules)
	inputs, outputs, extra, errv []byte
}

// scanRun decodes one run object (raw, validated by the caller or not) the way the
// typed fast path (typedRun) does: ok is false for anything that path would refuse
// or decode differently, and for anything this scanner is unsure of.
func scanRun(b []byte, patch bool) (scannedRun, bool) {
	var sr scannedRun
	r := &sr.run
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return sr, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return sr, false
			}
			kend, plain, ok := scanString(b, i)
			if !ok || !plain {
				return sr, false
			}
			key := b[i+1 : kend-1]
			i = skipWS(b, kend)
			if i >= len(b) || b[i] != ':' {
				return sr, false
			}
			i = skipWS(b, i+1)
			vend, ok := scanValue(b, i, 1)
			if !ok {
				return sr, false
			}
			val := b[i:vend]
			if !sr.field(key, val) {
				return sr, false
			}
			i = skipWS(b, vend)
			if i >= len(b) {
				return sr, false
			}
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return sr, false
			}
			i = skipWS(b, i+1)
		}
	}
	if skipWS(b, i) != len(b) {
		return sr, false
	}
	r.Posted = !patch
	return sr, true
}

// field sets one member; the last of duplicate keys wins, as in encoding/json.
func (sr *scannedRun) field(key, val []byte) bool {
	r := &sr.run
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
		t, err := spanutil.ParseRawTime(val)
		r.Start = t
		return err == nil
	case "end_time":
		t, err := spanutil.ParseRawTime(val)
		r.End = t
		return err == nil
	case "inputs":
		sr.inputs = val
		r.RawInputs = nil
		if !null {
			if !isObj(val) {
				return false
			}
			r.RawInputs = val
		}
	case "outputs":
		sr.outputs = val
		r.rawOutputs = nil
		if !null {
			if !isObj(val) {
				return false
			}
			r.rawOutputs = val
		}
	case "extra":
		sr.extra = val
		r.rawExtra = nil
		if !null {
			if !isObj(val) {
				return false
			}
			r.rawExtra = val
		}
	case "error":
		sr.errv = val
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

// valid reports whether the run passes the typed path's checks.
func (sr *scannedRun) valid() bool {
	r := &sr.run
	return spanutil.IsUUIDOrHex(r.ID) && (r.TraceID == "" || spanutil.IsUUIDOrHex(r.TraceID))
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
	var post, patch []byte
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
			vend, ok := scanValue(b, i, 0)
			if !ok {
				return nil, errSlowPath
			}
			val := b[i:vend]
			switch string(key) {
			case "post":
				post = val
			case "patch":
				patch = val
			default:
				if foldsToKnown(key, []string{"post", "patch"}) {
					return nil, errSlowPath
				}
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
	var ops []Op
	for _, g := range []struct {
		raw   []byte
		patch bool
	}{{post, false}, {patch, true}} {
		if g.raw == nil || string(g.raw) == "null" {
			continue
		}
		if !isArr(g.raw) {
			return nil, errSlowPath
		}
		if ops == nil {
			ops = make([]Op, 0, 2*len(g.raw)/1024+8)
		}
		ok := true
		eachElem(g.raw, func(e []byte) bool {
			var sr scannedRun
			if sr, ok = scanRun(e, g.patch); ok {
				ok = sr.valid()
			}
			if ok {
				ops = append(ops, Op{Patch: g.patch, Run: sr.run})
			}
			return ok
		})
		if !ok {
			return nil, errSlowPath
		}
	}
	if ops == nil {
		ops = []Op{}
	}
	return ops, nil
}
