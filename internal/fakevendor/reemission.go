package fakevendor

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// Reemission is what a streaming subagentmerge sends when a dispatcher's merged subagent
// usage changed after it went out: the whole span id of td again (same trace id, span id
// and start time, every attribute, its resource and scope), alone in a batch, with
// agentmeter.merge.revision rev, the new agentmeter.subagent.* usage sub, and status
// corrected when it is a model call (a tool call keeps its own status).
func Reemission(td ptrace.Traces, id pcommon.SpanID, rev int64, sub genai.Usage) ptrace.Traces {
	out := ptrace.NewTraces()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				if spans.At(k).SpanID() != id {
					continue
				}
				rs := out.ResourceSpans().AppendEmpty()
				rss.At(i).Resource().CopyTo(rs.Resource())
				ss := rs.ScopeSpans().AppendEmpty()
				sss.At(j).Scope().CopyTo(ss.Scope())
				sp := ss.Spans().AppendEmpty()
				spans.At(k).CopyTo(sp)
				attrs := sp.Attributes()
				genai.PutSubagentUsage(attrs, sub)
				attrs.PutInt(genai.AttrMergeRevision, rev)
				if op, _ := attrs.Get(genai.AttrOperationName); op.AsString() == genai.OpChat {
					attrs.PutStr(genai.AttrMergeStatus, genai.MergeCorrected)
				}
				return out
			}
		}
	}
	panic("fakevendor.Reemission: no span " + id.String())
}
