package subagentmerge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// traceBuilder writes agent traces the way docs/contract.md#spans describes them, with
// deterministic ids and timestamps so golden files are stable.
type traceBuilder struct {
	td    ptrace.Traces
	spans ptrace.SpanSlice
	tid   pcommon.TraceID
	n     uint64
	clock uint64
}

func newTraceBuilder(traceNo uint64) *traceBuilder {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(genai.AttrServiceName, "deer-flow")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("agentmeter/runtime")
	var tid pcommon.TraceID
	binary.BigEndian.PutUint64(tid[:8], 0xa9e47)
	binary.BigEndian.PutUint64(tid[8:], traceNo)
	return &traceBuilder{td: td, spans: ss.Spans(), tid: tid, n: traceNo << 16}
}

func (b *traceBuilder) span(name, op string, parent pcommon.SpanID, kind ptrace.SpanKind) ptrace.Span {
	b.n++
	b.clock++
	sp := b.spans.AppendEmpty()
	sp.SetTraceID(b.tid)
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], b.n)
	sp.SetSpanID(id)
	sp.SetParentSpanID(parent)
	sp.SetName(name)
	sp.SetKind(kind)
	sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + b.clock*1_000_000))
	sp.SetEndTimestamp(sp.StartTimestamp() + 500_000)
	sp.Attributes().PutStr(genai.AttrOperationName, op)
	return sp
}

func (b *traceBuilder) agent(parent pcommon.SpanID, name string) ptrace.Span {
	sp := b.span(genai.SpanName(genai.OpInvokeAgent, name), genai.OpInvokeAgent, parent, ptrace.SpanKindInternal)
	sp.Attributes().PutStr(genai.AttrAgentName, name)
	return sp
}

// chat adds a model call with usage u (nil: none reported) that asked for the given tool calls.
func (b *traceBuilder) chat(parent pcommon.SpanID, u *genai.Usage, calls ...string) ptrace.Span {
	sp := b.span(genai.SpanName(genai.OpChat, "gpt-4o"), genai.OpChat, parent, ptrace.SpanKindClient)
	sp.Attributes().PutStr(genai.AttrRequestModel, "gpt-4o")
	if u != nil {
		genai.PutUsage(sp.Attributes(), *u)
	}
	if len(calls) > 0 {
		genai.PutStrings(sp.Attributes(), genai.AttrResponseToolCallIDs, calls)
	}
	return sp
}

func (b *traceBuilder) tool(parent pcommon.SpanID, name, callID string) ptrace.Span {
	sp := b.span(genai.SpanName(genai.OpExecuteTool, name), genai.OpExecuteTool, parent, ptrace.SpanKindInternal)
	sp.Attributes().PutStr(genai.AttrToolName, name)
	sp.Attributes().PutStr(genai.AttrToolCallID, callID)
	sp.Attributes().PutStr(genai.AttrToolType, genai.ToolTypeFunction)
	return sp
}

// task adds a task tool call with a subagent run under it; it returns the subagent's
// invoke_agent span id, under which the caller adds the subagent's model calls.
func (b *traceBuilder) task(parent pcommon.SpanID, callID, subagent, status string) (tool ptrace.Span, sub pcommon.SpanID) {
	tool = b.tool(parent, genai.TaskToolName, callID)
	tool.Attributes().PutStr(genai.AttrSubagentStatus, status)
	a := b.agent(tool.SpanID(), subagent)
	a.Attributes().PutStr(genai.AttrToolCallID, callID)
	return tool, a.SpanID()
}

func usage(in, out int64) *genai.Usage { return &genai.Usage{Input: in, Output: out} }

// canonical regroups spans under one ResourceSpans/ScopeSpans per distinct resource and
// scope and sorts spans by trace and span id, so outputs that differ only in batching
// compare equal.
// lastVersions folds re-emissions the way a sink that upserts by span id does: each
// span's last version wins, in the position of its first, without the marks a
// re-emission carries (agentmeter.merge.revision, "corrected"), so a streamed run reads
// like the same run merged whole.
func lastVersions(tds ...ptrace.Traces) []ptrace.Traces {
	type id struct {
		t pcommon.TraceID
		s pcommon.SpanID
	}
	last := map[id]ptrace.Span{}
	for _, td := range tds {
		for sp := range spaniter.All(td) {
			last[id{sp.TraceID(), sp.SpanID()}] = sp
		}
	}
	seen := map[id]bool{}
	var out []ptrace.Traces
	for _, td := range tds {
		c := ptrace.NewTraces()
		td.CopyTo(c)
		c.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
				ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
					k := id{sp.TraceID(), sp.SpanID()}
					if seen[k] {
						return true
					}
					seen[k] = true
					last[k].CopyTo(sp)
					attrs := sp.Attributes()
					attrs.Remove(genai.AttrMergeRevision)
					attrs.Remove(genai.AttrCallerSettled)
					if v, ok := attrs.Get(genai.AttrMergeStatus); ok && v.Str() == genai.MergeCorrected {
						attrs.Remove(genai.AttrMergeStatus)
					}
					return false
				})
				return ss.Spans().Len() == 0
			})
			return rs.ScopeSpans().Len() == 0
		})
		out = append(out, c)
	}
	return out
}

func canonical(tds ...ptrace.Traces) ptrace.Traces {
	out := ptrace.NewTraces()
	type key struct{ res, scope string }
	type bucket struct {
		rs    pcommon.Resource
		scope pcommon.InstrumentationScope
		spans []ptrace.Span
	}
	buckets := map[key]*bucket{}
	var order []key
	for _, td := range tds {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			res := fmt.Sprint(rs.Resource().Attributes().AsRaw())
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				k := key{res, ss.Scope().Name() + "|" + ss.Scope().Version()}
				bk := buckets[k]
				if bk == nil {
					bk = &bucket{rs: rs.Resource(), scope: ss.Scope()}
					buckets[k] = bk
					order = append(order, k)
				}
				for s := 0; s < ss.Spans().Len(); s++ {
					bk.spans = append(bk.spans, ss.Spans().At(s))
				}
			}
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].res+order[i].scope < order[j].res+order[j].scope })
	for _, k := range order {
		bk := buckets[k]
		rs := out.ResourceSpans().AppendEmpty()
		bk.rs.CopyTo(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		bk.scope.CopyTo(ss.Scope())
		sort.Slice(bk.spans, func(i, j int) bool {
			a, b := bk.spans[i], bk.spans[j]
			at, bt := a.TraceID(), b.TraceID()
			if c := bytes.Compare(at[:], bt[:]); c != 0 {
				return c < 0
			}
			as, bs := a.SpanID(), b.SpanID()
			return bytes.Compare(as[:], bs[:]) < 0
		})
		for _, sp := range bk.spans {
			sp.CopyTo(ss.Spans().AppendEmpty())
		}
	}
	return out
}
