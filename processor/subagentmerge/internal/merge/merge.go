// Package merge applies docs/contract.md#merge to one trace: the subtree usage of every
// execute_tool span that has model calls under it is added onto the chat span whose
// response dispatched that tool call. Run is the rule over what it reads of each span
// (Fact); Apply runs it over pdata spans and writes its outcome on them.
package merge

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"
	"sync"

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
	f                     *Fact
	parent                int32 // index of the parent in the trace, -1 when absent
	model, tool, agentRun bool
	caller                string // agentmeter.caller of the calls in this run, once needed
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

// Dispatch is what one run adds onto one dispatching chat span.
type Dispatch struct {
	Usage    genai.Usage
	Cost     genai.Cost
	Priced   bool     // some call under the merged tools had a cost
	Unpriced int64    // calls under them with usage and no cost
	IDs      []string // tool call ids merged in this run, in the order the response asked for them
}

// Outcome is what one run writes on one span; its zero value is nothing.
type Outcome struct {
	Status   string    // tool spans: genai.MergeMerged or genai.MergeOrphan
	Caller   string    // model calls: agentmeter.caller from the trace's shape
	Dispatch *Dispatch // dispatching chat spans: the subagent usage added onto them
}

// Apply merges subagent usage over the spans of one trace (all spans must share a trace
// id; the caller groups them), after attributing model calls to the subagent whose run
// they are in (attribute.go). It mutates the spans' attributes in place and never
// touches a span's own gen_ai.usage.*. Spans already carrying agentmeter.merge.status
// are skipped, so applying it twice changes nothing the second time.
func Apply(spans []ptrace.Span) Result {
	if len(spans) == 0 {
		return Result{}
	}
	buf := factBufs.Get().(*[]Fact)
	facts := (*buf)[:0]
	for _, sp := range spans {
		facts = append(facts, FactOf(sp, genai.Classify(sp.Name(), sp.Attributes()).Kind))
	}
	out, _, res := Run(facts)
	for i := range out {
		out[i].WriteTo(spans[i].Attributes())
	}
	clear(facts) // lets go of the spans' strings
	*buf = facts[:0]
	factBufs.Put(buf)
	return res
}

// factBufs hold Apply's facts between calls: a released trace's facts are as many bytes
// of garbage as its spans' skeleton otherwise.
var factBufs = sync.Pool{New: func() any { return new([]Fact) }}

// nodeBufs hold Run's nodes between runs: a stream-mode ledger runs the merge over its
// whole trace each time it re-emits, and the nodes, a trace's worth, are dead after it.
var nodeBufs = sync.Pool{New: func() any { return new([]node) }}

// maxPooledNodes bounds the nodes kept for the next run (some 9 MiB).
const maxPooledNodes = 1 << 16

// Hash is a hash of everything o writes: two outcomes with the same hash write the same
// attributes onto the same span. It is never 0, and only comparable within the process.
func (o *Outcome) Hash() uint64 {
	var h maphash.Hash
	h.SetSeed(outcomeSeed)
	var b [8]byte
	put := func(u uint64) {
		binary.LittleEndian.PutUint64(b[:], u)
		_, _ = h.Write(b[:])
	}
	str := func(s string) { // its length first: no string can move a boundary
		put(uint64(len(s)))
		_, _ = h.WriteString(s)
	}
	str(o.Status)
	str(o.Caller)
	d := o.Dispatch
	if d == nil {
		_ = h.WriteByte(0)
		return max(h.Sum64(), 1)
	}
	_ = h.WriteByte(1)
	for _, n := range [...]int64{d.Usage.Input, d.Usage.Output, d.Usage.CacheRead, d.Usage.CacheCreation, d.Usage.Reasoning, d.Unpriced} {
		put(uint64(n))
	}
	for _, c := range [...]float64{d.Cost.Input, d.Cost.CacheRead, d.Cost.CacheCreation, d.Cost.Output, d.Cost.Reasoning, d.Cost.Total} {
		put(math.Float64bits(c))
	}
	priced := byte(0)
	if d.Priced {
		priced = 1
	}
	_ = h.WriteByte(priced)
	put(uint64(len(d.IDs)))
	for _, id := range d.IDs {
		str(id)
	}
	return max(h.Sum64(), 1)
}

var outcomeSeed = maphash.MakeSeed()

// WriteTo writes o onto the attributes m of its span: the caller and the merge status
// as they are, the dispatch on top of what an earlier run wrote.
func (o *Outcome) WriteTo(m pcommon.Map) {
	if o.Status != "" {
		m.PutStr(genai.AttrMergeStatus, o.Status)
	}
	if o.Caller != "" {
		m.PutStr(genai.AttrCaller, o.Caller)
	}
	if o.Dispatch != nil {
		writeDispatch(m, o.Dispatch)
	}
}

// Run is the merge over one trace's facts, given in parts (a growing trace keeps one
// part per batch, so it never copies the facts it has): what Apply would write on each
// span (out[i] for the i-th fact, counted across the parts; nil when it writes nothing
// at all), and where each span id's fact is in that count (the last one of an id). The
// facts are not changed.
func Run(parts ...[]Fact) ([]Outcome, map[pcommon.SpanID]int32, Result) {
	var res Result
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return nil, nil, res
	}
	nb := nodeBufs.Get().(*[]node)
	nodes := slices.Grow((*nb)[:0], n) // never grown below: n is every fact
	defer func() {
		if cap(nodes) > maxPooledNodes {
			return // a rare giant trace's are let go
		}
		clear(nodes) // the facts they point to are the caller's
		*nb = nodes[:0]
		nodeBufs.Put(nb)
	}()
	byID := make(map[pcommon.SpanID]int32, n)
	haveTool, haveModel := false, false
	for _, p := range parts {
		for j := range p {
			f := &p[j]
			nd := node{f: f, parent: -1}
			switch f.Class {
			case genai.SpanModelCall:
				nd.model, haveModel = true, true
			case genai.SpanToolCall:
				nd.tool, haveTool = true, true
			case genai.SpanAgentRun:
				nd.agentRun = true
			}
			byID[f.ID] = int32(len(nodes))
			nodes = append(nodes, nd)
		}
	}
	if !haveTool || !haveModel {
		return nil, byID, res // nothing can be merged: no dispatch, or no usage under one
	}
	for i := range nodes {
		if p := nodes[i].f.Parent; !p.IsEmpty() {
			if j, ok := byID[p]; ok {
				nodes[i].parent = j
			}
		}
	}
	out := make([]Outcome, n)

	// Who made each call, from the trace's shape, before anything reads callers.
	res.Attributed = attribute(nodes, out)

	// Roll each model call's usage up to every execute_tool ancestor, so nested
	// subagents count at every level. The walk is bounded by the span count, which
	// also stops it on malformed input whose parent links form a cycle.
	for i := range nodes {
		if !nodes[i].model {
			continue
		}
		f := nodes[i].f
		for j, steps := nodes[i].parent, 0; j >= 0 && steps < len(nodes); j, steps = nodes[j].parent, steps+1 {
			a := &nodes[j]
			if !a.tool {
				continue
			}
			a.subtree = a.subtree.Add(f.Usage)
			a.hasModel = true
			// cost rides along with the tokens (docs/contract.md#cost)
			if f.Priced {
				a.subtreeCost = a.subtreeCost.Add(f.Cost)
				a.subtreePriced = true
			} else if f.HasUsage {
				a.subtreeUnpriced++
			}
		}
	}

	var dispatchers map[string][]int32 // tool call id → chat spans whose response asked for it
	for i := range nodes {
		t := &nodes[i]
		if !t.tool || !t.hasModel || t.f.marked() {
			continue // a previous subagentmerge already accounted for it
		}
		if dispatchers == nil {
			dispatchers = indexDispatchers(nodes)
		}
		callID := t.f.CallID
		d := pickDispatcher(nodes, dispatchers[callID], t)
		if callID == "" || d < 0 {
			out[i].Status = genai.MergeOrphan
			res.Orphans++
			continue
		}
		a := out[d].Dispatch
		if a == nil {
			a = &Dispatch{}
			out[d].Dispatch = a
		}
		a.Usage = a.Usage.Add(t.subtree)
		a.Cost = a.Cost.Add(t.subtreeCost)
		a.Priced = a.Priced || t.subtreePriced
		a.Unpriced += t.subtreeUnpriced
		a.IDs = append(a.IDs, callID)
		out[i].Status = genai.MergeMerged
		res.Merged++
	}
	for i := range out {
		if a := out[i].Dispatch; a != nil {
			// ids in the order the response asked for them, whatever order the tool
			// spans arrived in, so the output does not depend on batching
			order := nodes[i].f.Asks
			pos := func(id string) int {
				if k := slices.Index(order, id); k >= 0 {
					return k
				}
				return len(order)
			}
			slices.SortStableFunc(a.IDs, func(x, y string) int { return pos(x) - pos(y) })
		}
	}
	return out, byID, res
}

// indexDispatchers maps every tool call id a model call's response asked for to the
// model-call spans that asked for it.
func indexDispatchers(nodes []node) map[string][]int32 {
	idx := map[string][]int32{}
	for i := range nodes {
		if !nodes[i].model {
			continue
		}
		for _, id := range nodes[i].f.Asks {
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
	tStart := t.f.Start
	for _, c := range cands {
		score := 0
		if nodes[c].parent == t.parent {
			score += 2
		}
		start := nodes[c].f.Start
		if start <= tStart {
			score++
		}
		if score > bestScore || (score == bestScore && start > bestStart) {
			best, bestScore, bestStart = c, score, start
		}
	}
	return best
}

// writeDispatch adds one run's merged usage onto a dispatching span, on top of what an
// earlier run wrote (that run's tool spans are marked and were skipped this time).
func writeDispatch(m pcommon.Map, a *Dispatch) {
	prev, _ := genai.SubagentUsageFromMap(m)
	genai.PutSubagentUsage(m, prev.Add(a.Usage))
	var dispatches int64
	if v, ok := m.Get(genai.AttrSubagentDispatches); ok && v.Type() == pcommon.ValueTypeInt {
		dispatches = v.Int()
	}
	m.PutInt(genai.AttrSubagentDispatches, dispatches+int64(len(a.IDs)))
	writeDispatchCost(m, a)
	ids := append(genai.StringsFromMap(m, genai.AttrSubagentToolCallIDs), a.IDs...)
	genai.PutStrings(m, genai.AttrSubagentToolCallIDs, ids)
}

// writeDispatchCost adds one pass's merged subagent cost (agentmeter.subagent.cost.*) on
// top of an earlier pass's, like the tokens. Cost keys appear only when some call under
// the tasks had a cost (no cost step upstream: nothing is claimed); the calls with usage
// and no cost are then counted, so a merged cost that misses an unknown model says so.
func writeDispatchCost(m pcommon.Map, a *Dispatch) {
	if !a.Priced {
		return
	}
	prev, _ := genai.SubagentCostFromMap(m)
	genai.PutSubagentCost(m, prev.Add(a.Cost))
	if a.Unpriced > 0 {
		var prev int64
		if v, ok := m.Get(genai.AttrSubagentCostUnpriced); ok && v.Type() == pcommon.ValueTypeInt {
			prev = v.Int()
		}
		m.PutInt(genai.AttrSubagentCostUnpriced, prev+a.Unpriced)
	}
}
