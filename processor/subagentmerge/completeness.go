package subagentmerge

import (
	"hash/fnv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// What a span tells the completeness rule about its trace (spanKey.kind bits). Each is
// read once, when the span arrives, so deciding completeness never touches the spans.
const (
	kindModel     uint8 = 1 << iota // a model call (genai.IsModelCallSpan)
	kindFinal                       // a model call that asked for no tool call: its run's answer
	kindTool                        // an execute_tool span
	kindDispatch                    // a tool span that dispatches a subagent (task, or a subagent status)
	kindStopped                     // a dispatch whose subagent failed, was cancelled or timed out
	kindAgent                       // an agent run (invoke_agent)
	kindAnnounces                   // a model call that says what it asked for (tool-call ids, output messages, finish reasons)
)

// What the completeness rule decides for a trace.
const (
	stWait     = iota // something the trace names is missing (a parent, a tool call, a subagent run)
	stSettle          // nothing named is missing, but the trace does not say that every run has ended
	stComplete        // nothing is missing: release now
)

// callHash is the 32-bit FNV-1a of a tool-call id: the buffer matches announced calls
// with tool spans of the same trace by hash (4 bytes a span instead of the id string;
// a collision among one trace's few tool calls could at worst release it early, and
// what arrives after release is corrected).
func callHash(id string) uint32 {
	if id == "" {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	if v := h.Sum32(); v != 0 {
		return v
	}
	return 1
}

// spanFacts are the attributes the completeness rule reads, gathered in one pass over a
// span's attributes (shared with the skeleton writer, so a released span's attributes
// are read once for both).
type spanFacts struct {
	op, toolName, callID, status string
	ids, outMsgs                 pcommon.Value
	hasIDs, hasOut, hasFinish    bool
	class                        genai.SpanKind // set by classify: the span's role, read once
	version                      genai.Version  // its revision and merge status (gather mode's rank)
}

func (f *spanFacts) see(k string, v pcommon.Value) {
	switch k {
	case genai.AttrOperationName:
		f.op = v.AsString()
	case genai.AttrToolName:
		f.toolName = v.AsString()
	case genai.AttrToolCallID:
		f.callID = v.AsString()
	case genai.AttrSubagentStatus:
		f.status = v.AsString()
	case genai.AttrResponseToolCallIDs:
		f.ids, f.hasIDs = v, true
	case genai.AttrOutputMessages:
		f.outMsgs, f.hasOut = v, true
	case genai.AttrFinishReasons:
		f.hasFinish = true
	case genai.AttrMergeRevision, genai.AttrMergeStatus:
		f.version.Offer(k, v)
	}
}

// classify reads what sp announces, its attributes already read into f: its kind bits,
// the hash of its tool-call id (tool spans), and appends the hashes of the tool calls it
// asked for (model calls) to asks; f.class gets the span's role.
func (f *spanFacts) classify(sp ptrace.Span, asks []uint32) (kind uint8, call uint32, _ []uint32) {
	attrs := sp.Attributes()
	op, toolName, callID, status := f.op, f.toolName, f.callID, f.status
	ids, outMsgs := f.ids, f.outMsgs
	hasIDs, hasOut, hasFinish := f.hasIDs, f.hasOut, f.hasFinish
	cls := genai.ClassifyRead(op, sp.Name(), attrs)
	f.class = cls.Kind
	op = cls.Operation
	switch {
	case op == genai.OpExecuteTool:
		kind = kindTool
		call = callHash(callID)
		if toolName == genai.TaskToolName || status != "" {
			kind |= kindDispatch
			switch status {
			case genai.SubagentFailed, genai.SubagentCancelled, genai.SubagentTimedOut, genai.SubagentPollingTimeout:
				kind |= kindStopped
			}
		}
	case op == genai.OpInvokeAgent:
		kind = kindAgent
	case cls.Kind == genai.SpanModelCall:
		kind = kindModel
		n := len(asks)
		if hasIDs && ids.Type() == pcommon.ValueTypeSlice {
			s := ids.Slice()
			for i := 0; i < s.Len(); i++ {
				if h := callHash(s.At(i).AsString()); h != 0 {
					asks = append(asks, h)
				}
			}
		} else if hasIDs {
			for _, id := range genai.StringsFromMap(attrs, genai.AttrResponseToolCallIDs) {
				if h := callHash(id); h != 0 {
					asks = append(asks, h)
				}
			}
		}
		if len(asks) == n && hasOut {
			for _, id := range genai.ToolCallIDsFromOutputMessages(outMsgs.AsString()) {
				if h := callHash(id); h != 0 {
					asks = append(asks, h)
				}
			}
		}
		if hasIDs || hasOut || hasFinish {
			kind |= kindAnnounces
		}
		if len(asks) == n {
			kind |= kindFinal
		}
	}
	return kind, call, asks
}

// stateWith is set's state (state) with settle_time applied: a trace that would settle
// is complete when settle_time is 0, there being no window to wait for the rest in.
func (p *subagentMerge) stateWith(set *spanSet) uint8 {
	st := set.state()
	if st == stSettle && p.settle == 0 {
		return stComplete
	}
	return st
}

// state applies the completeness rule (docs/subagentmerge.md, "When a trace is
// complete") to the spans held for one trace. It never trusts arrival order: a trace is
// complete only when nothing it names is missing.
//
//  1. its root has arrived and every span's parent is present;
//  2. every tool call a model call asked for has its execute_tool span;
//  3. every dispatching tool span has its subagent's run (an agent span under it);
//  4. every agent run has answered: a model call under it (nearest run) asked for no
//     tool call, unless its dispatch says the subagent stopped early.
//
// 1–3 failing: stWait (held up to wait_duration). Only 4 failing, or a trace whose model
// calls announce nothing at all (an emitter that records no tool-call ids, output
// messages or finish reasons, so 2 and 4 cannot be checked): stSettle (held settle_time
// after the root arrived).
func (s *spanSet) state() uint8 {
	hasRoot, announces := false, false
	for i := range s.keys {
		k := &s.keys[i]
		announces = announces || k.kind&(kindAnnounces|kindDispatch) != 0
		if k.root() {
			hasRoot = true
			continue
		}
		if !s.has(k.parent) {
			return stWait
		}
	}
	if !hasRoot {
		return stWait
	}
	var calls map[uint32]struct{}
	if len(s.asks) > 0 && len(s.keys) > linearLimit {
		calls = make(map[uint32]struct{}, len(s.keys))
		for i := range s.keys {
			if s.keys[i].kind&kindTool != 0 {
				calls[s.keys[i].call] = struct{}{}
			}
		}
	}
	for _, a := range s.asks {
		if calls != nil {
			if _, ok := calls[a]; !ok {
				return stWait
			}
		} else if !s.hasCall(a) {
			return stWait
		}
	}
	agents := 0
	for i := range s.keys {
		k := &s.keys[i]
		if k.kind&kindAgent != 0 {
			agents++
			if p := s.find(k.parent); p >= 0 && s.keys[p].kind&kindTool != 0 {
				s.keys[p].kind |= kindHasRun
			}
		}
	}
	waiting := false
	for i := range s.keys {
		if k := &s.keys[i]; k.kind&kindDispatch != 0 && k.kind&kindHasRun == 0 {
			waiting = true
		}
		s.keys[i].kind &^= kindHasRun
	}
	if waiting {
		return stWait
	}
	if !announces {
		return stSettle
	}
	if agents == 0 {
		return stComplete
	}
	// Rule 4: mark each run that has its answer, walking up from every final model call
	// to its nearest agent span (bounded by the span count: malformed cyclic links stop).
	for i := range s.keys {
		if s.keys[i].kind&kindFinal == 0 {
			continue
		}
		for j, steps := s.find(s.keys[i].parent), 0; j >= 0 && steps < len(s.keys); j, steps = s.find(s.keys[j].parent), steps+1 {
			if s.keys[j].kind&kindAgent != 0 {
				s.keys[j].kind |= kindHasRun
				break
			}
			if s.keys[j].root() {
				break
			}
		}
	}
	st := uint8(stComplete)
	for i := range s.keys {
		k := &s.keys[i]
		if k.kind&kindAgent != 0 && k.kind&kindHasRun == 0 {
			if p := s.find(k.parent); p < 0 || s.keys[p].kind&kindStopped == 0 {
				st = stSettle
			}
		}
		k.kind &^= kindHasRun
	}
	return st
}

// kindHasRun is scratch for state(): set and cleared within one call (a dispatch that
// has its run; an agent run that has its answer).
const kindHasRun uint8 = 1 << 7

func (s *spanSet) hasCall(h uint32) bool {
	for i := range s.keys {
		if s.keys[i].kind&kindTool != 0 && s.keys[i].call == h {
			return true
		}
	}
	return false
}
