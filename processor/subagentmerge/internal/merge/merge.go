// Package merge applies docs/contract.md#merge to the spans of one complete trace: the subtree usage
// of every execute_tool span that has model calls under it is added onto the chat span
// whose response dispatched that tool call.
package merge

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// Result counts what one Apply did, for the processor's telemetry.
type Result struct {
	// Merged is the number of execute_tool spans whose subtree usage was added onto
	// their dispatching chat span (and that are now marked "merged").
	Merged int
	// Orphans is the number of execute_tool spans with model calls under them whose
	// dispatching chat span is not in the trace (now marked "orphan").
	Orphans int
	// Attributed is the number of model calls that got agentmeter.caller from the
	// trace's shape (a subagent's run under a tool span; see attribute.go).
	Attributed int
}

type node struct {
	span   ptrace.Span
	parent int32 // index of the parent in the trace, -1 when absent
	// kind of span, by the genai rules every reader shares: genai.IsModelCallSpan,
	// genai.IsToolCallSpan, genai.AgentRunName (agent is the run's agent name)
	model, tool, agentRun bool
	agent                 string
	caller                string // agentmeter.caller of the calls in this run, once needed
	usage                 genai.Usage
	// subtree is the own usage of every model call strictly under this node; only
	// accumulated for execute_tool nodes, the only ones that need it.
	subtree  genai.Usage
	hasModel bool // a model-call span is somewhere under this node
	// for execute_tool nodes: the summed own cost of the model calls under it, whether
	// any had one, and how many had usage but no cost
	subtreeCost     genai.Cost
	subtreePriced   bool
	subtreeUnpriced int64
}

// dispatch is what is added onto one dispatching chat span.
type dispatch struct {
	usage    genai.Usage
	cost     genai.Cost
	priced   bool     // some call under the merged tools had a cost
	unpriced int64    // calls under them with usage and no cost
	ids      []string // tool call ids merged in this pass
}

// Apply merges subagent usage over the spans of one trace (all spans must share a trace
// id; the caller groups them), after attributing model calls to the subagent whose run
// they are in (attribute.go). It mutates the spans' attributes in place and never
// touches a span's own gen_ai.usage.*. Spans already carrying agentmeter.merge.status
// are skipped, so applying it twice changes nothing the second time.
func Apply(spans []ptrace.Span) Result {
	var res Result
	if len(spans) == 0 {
		return res
	}
	nodes := make([]node, len(spans))
	byID := make(map[pcommon.SpanID]int32, len(spans))
	haveTool, haveModel := false, false
	for i, sp := range spans {
		n := &nodes[i]
		n.span, n.parent = sp, -1
		switch attrs := sp.Attributes(); {
		case genai.IsModelCallSpan(sp.Name(), attrs):
			n.model, haveModel = true, true // usage is read below, only for calls under a tool span
		case genai.IsToolCallSpan(sp.Name(), attrs):
			n.tool, haveTool = true, true
		default:
			n.agent, n.agentRun = genai.AgentRunName(sp.Name(), attrs)
		}
		byID[sp.SpanID()] = int32(i)
	}
	if !haveTool || !haveModel {
		return res // nothing can be merged: no dispatch, or no usage under one
	}
	for i := range nodes {
		if p := nodes[i].span.ParentSpanID(); !p.IsEmpty() {
			if j, ok := byID[p]; ok {
				nodes[i].parent = j
			}
		}
	}

	// Who made each call, from the trace's shape, before anything reads callers.
	res.Attributed = attribute(nodes)

	// Roll each model call's usage up to every execute_tool ancestor, so nested
	// subagents count at every level. The walk is bounded by the span count, which
	// also stops it on malformed input whose parent links form a cycle.
	for i := range nodes {
		if !nodes[i].model {
			continue
		}
		read := false
		var cost genai.Cost
		var priced, hasUsage bool
		for j, steps := nodes[i].parent, 0; j >= 0 && steps < len(nodes); j, steps = nodes[j].parent, steps+1 {
			a := &nodes[j]
			if !a.tool {
				continue
			}
			if !read { // most model calls (the lead agent's) sit under no tool span
				attrs := nodes[i].span.Attributes()
				nodes[i].usage, hasUsage = genai.UsageFromMap(attrs)
				cost, _, priced = genai.CostFromMap(attrs)
				read = true
			}
			a.subtree = a.subtree.Add(nodes[i].usage)
			a.hasModel = true
			// cost rides along with the tokens (docs/contract.md#cost)
			if priced {
				a.subtreeCost = a.subtreeCost.Add(cost)
				a.subtreePriced = true
			} else if hasUsage {
				a.subtreeUnpriced++
			}
		}
	}

	var dispatchers map[string][]int32 // tool call id → chat spans whose response asked for it
	acc := map[int32]*dispatch{}
	for i := range nodes {
		t := &nodes[i]
		if !t.tool || !t.hasModel {
			continue
		}
		if _, marked := t.span.Attributes().Get(genai.AttrMergeStatus); marked {
			continue // a previous subagentmerge already accounted for it
		}
		if dispatchers == nil {
			dispatchers = indexDispatchers(nodes)
		}
		callID := genai.StringAttr(t.span.Attributes(), genai.AttrToolCallID)
		d := pickDispatcher(nodes, dispatchers[callID], t)
		if callID == "" || d < 0 {
			t.span.Attributes().PutStr(genai.AttrMergeStatus, genai.MergeOrphan)
			res.Orphans++
			continue
		}
		a := acc[d]
		if a == nil {
			a = &dispatch{}
			acc[d] = a
		}
		a.usage = a.usage.Add(t.subtree)
		a.cost = a.cost.Add(t.subtreeCost)
		a.priced = a.priced || t.subtreePriced
		a.unpriced += t.subtreeUnpriced
		a.ids = append(a.ids, callID)
		t.span.Attributes().PutStr(genai.AttrMergeStatus, genai.MergeMerged)
		res.Merged++
	}

	for d, a := range acc {
		writeDispatch(nodes[d].span.Attributes(), a)
	}
	return res
}

// indexDispatchers maps every tool call id a model call's response asked for to the
// model-call spans that asked for it.
func indexDispatchers(nodes []node) map[string][]int32 {
	idx := map[string][]int32{}
	for i := range nodes {
		if !nodes[i].model {
			continue
		}
		for _, id := range genai.DispatchedToolCallIDs(nodes[i].span.Attributes()) {
			idx[id] = append(idx[id], int32(i))
		}
	}
	return idx
}

// pickDispatcher chooses the chat span that dispatched tool span t among the candidates
// that list its call id. Provider tool-call ids can repeat (DeerFlow's merge onto the dispatching AIMessage keeps
// usage scoped to its own history), so a candidate under the same agent run (same parent)
// wins, and among several the latest one that started no later than the tool did: the
// response that immediately preceded the call. Returns -1 when there is none.
func pickDispatcher(nodes []node, cands []int32, t *node) int32 {
	best, bestScore := int32(-1), -1
	var bestStart pcommon.Timestamp
	tStart := t.span.StartTimestamp()
	for _, c := range cands {
		score := 0
		if nodes[c].parent == t.parent {
			score += 2
		}
		start := nodes[c].span.StartTimestamp()
		if start <= tStart {
			score++
		}
		if score > bestScore || (score == bestScore && start > bestStart) {
			best, bestScore, bestStart = c, score, start
		}
	}
	return best
}

// writeDispatch adds one pass's merged usage onto a dispatching span, on top of what an
// earlier pass wrote (that pass's tool spans are marked and were skipped this time).
func writeDispatch(m pcommon.Map, a *dispatch) {
	prev, _ := genai.SubagentUsageFromMap(m)
	genai.PutSubagentUsage(m, prev.Add(a.usage))
	var dispatches int64
	if v, ok := m.Get(genai.AttrSubagentDispatches); ok && v.Type() == pcommon.ValueTypeInt {
		dispatches = v.Int()
	}
	m.PutInt(genai.AttrSubagentDispatches, dispatches+int64(len(a.ids)))
	writeDispatchCost(m, a)

	// Record ids in the order the response asked for them, whatever order the tool
	// spans arrived in, so the output does not depend on batching.
	order := genai.DispatchedToolCallIDs(m)
	pos := func(id string) int {
		if i := slices.Index(order, id); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(a.ids, func(x, y string) int { return pos(x) - pos(y) })
	ids := append(genai.StringsFromMap(m, genai.AttrSubagentToolCallIDs), a.ids...)
	genai.PutStrings(m, genai.AttrSubagentToolCallIDs, ids)
}

// writeDispatchCost adds one pass's merged subagent cost (agentmeter.subagent.cost.*) on
// top of an earlier pass's, like the tokens. Cost keys appear only when some call under
// the tasks had a cost (no cost step upstream: nothing is claimed); the calls with usage
// and no cost are then counted, so a merged cost that misses an unknown model says so.
func writeDispatchCost(m pcommon.Map, a *dispatch) {
	if !a.priced {
		return
	}
	prev, _ := genai.SubagentCostFromMap(m)
	genai.PutSubagentCost(m, prev.Add(a.cost))
	if a.unpriced > 0 {
		var prev int64
		if v, ok := m.Get(genai.AttrSubagentCostUnpriced); ok && v.Type() == pcommon.ValueTypeInt {
			prev = v.Int()
		}
		m.PutInt(genai.AttrSubagentCostUnpriced, prev+a.unpriced)
	}
}
