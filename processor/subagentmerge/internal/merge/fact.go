package merge

import (
	"strings"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// Fact is everything the merge reads of one span, read once (FactOf). A trace's facts
// are enough to run the merge again (Run) without its spans: the stream mode keeps a
// live trace's facts and runs the merge over them each time more of the trace arrives.
type Fact struct {
	ID, Parent pcommon.SpanID
	Start      pcommon.Timestamp
	Agent      string // agent runs: the agent's name (genai.AgentRunName)
	ToolName   string // tool spans: gen_ai.tool.name
	CallID     string // tool spans: gen_ai.tool.call.id
	// Caller is the span's own agentmeter.caller, HasCaller whether it has one at all
	Caller string
	// model calls: their own usage and cost, and the tool calls their response asked for
	Usage genai.Usage
	Cost  genai.Cost
	Asks  []string
	// Prior holds the merge-written attributes (Written) the span arrived with, when it
	// has any: a dispatcher an earlier merge wrote on. Its zero value is "none".
	Prior pcommon.Map
	// the one-byte fields last, together: a live trace keeps a Fact per span, and
	// spread among the words each would be padded to eight bytes (248 bytes a Fact
	// instead of 224)
	Class     genai.SpanKind
	HasCaller bool
	HasUsage  bool
	Priced    bool
}

// Written names the attributes the merge writes: agentmeter.merge.status and the
// merged results (SubagentResult).
func Written(k string) bool { return k == genai.AttrMergeStatus || SubagentResult(k) }

// SubagentResult names the merged results on a dispatching span: agentmeter.subagent.*
// except agentmeter.subagent.status, which the runtime writes on a task span.
func SubagentResult(k string) bool {
	return strings.HasPrefix(k, "agentmeter.subagent.") && k != genai.AttrSubagentStatus
}

// FactOf reads sp's facts; class is its role (genai.Classify), read by the caller once.
func FactOf(sp ptrace.Span, class genai.SpanKind) Fact {
	attrs := sp.Attributes()
	f := Fact{ID: sp.SpanID(), Parent: sp.ParentSpanID(), Start: sp.StartTimestamp(), Class: class}
	attrs.Range(func(k string, v pcommon.Value) bool {
		switch {
		case k == genai.AttrCaller:
			f.Caller, f.HasCaller = v.AsString(), true
		case k == genai.AttrToolName:
			f.ToolName = v.AsString()
		case k == genai.AttrToolCallID:
			f.CallID = v.AsString()
		case Written(k):
			if f.Prior == (pcommon.Map{}) {
				f.Prior = pcommon.NewMap()
			}
			v.CopyTo(f.Prior.PutEmpty(k))
		}
		return true
	})
	switch class {
	case genai.SpanModelCall:
		f.Usage, f.HasUsage = genai.UsageFromMap(attrs)
		f.Cost, _, f.Priced = genai.CostFromMap(attrs)
		f.Asks = genai.DispatchedToolCallIDs(attrs)
	case genai.SpanAgentRun:
		f.Agent, _ = genai.AgentRunName(sp.Name(), attrs)
	}
	return f
}

// marked reports whether the span already carries agentmeter.merge.status: a tool span
// an earlier merge accounted for is skipped.
func (f *Fact) marked() bool {
	if f.Prior == (pcommon.Map{}) {
		return false
	}
	_, ok := f.Prior.Get(genai.AttrMergeStatus)
	return ok
}

// Size is about how many bytes f takes, for the stream mode's ledger bound.
func (f *Fact) Size() int64 {
	n := int64(factSize + len(f.Agent) + len(f.ToolName) + len(f.CallID) + len(f.Caller))
	for _, a := range f.Asks {
		n += int64(16 + len(a))
	}
	if f.Prior != (pcommon.Map{}) {
		n += int64(f.Prior.Len()) * 64
	}
	return n
}

const factSize = int(unsafe.Sizeof(Fact{}))
