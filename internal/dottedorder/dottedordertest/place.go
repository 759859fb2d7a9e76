// Package dottedordertest places the spans of test and benchmark traces as the agentmeter
// runtime places its own when they start (runtime/telemetry): every span carries
// langsmith.span.dotted_order, the start times and run ids of its ancestors and itself.
package dottedordertest

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// Place sets the placement of every span of td from the start times td holds. A span
// whose parent is not in td gets none, nor do its descendants: the runtime gives none
// under a parent in another process. It returns td.
func Place(td ptrace.Traces) ptrace.Traces {
	byID := map[pcommon.SpanID]ptrace.Span{}
	for sp := range spaniter.All(td) {
		byID[sp.SpanID()] = sp
	}
	done := map[pcommon.SpanID]string{}
	var place func(sp ptrace.Span, depth int) string
	place = func(sp ptrace.Span, depth int) string {
		if d, ok := done[sp.SpanID()]; ok || depth > len(byID) {
			return d // placed already, or a parent cycle
		}
		start := int64(sp.StartTimestamp()) / 1000
		var d string
		if sp.ParentSpanID().IsEmpty() {
			d = dottedorder.Root(start, sp.TraceID())
		} else if parent, ok := byID[sp.ParentSpanID()]; ok {
			d = dottedorder.Child(place(parent, depth+1), start, sp.SpanID())
		}
		done[sp.SpanID()] = d
		if d != "" {
			sp.Attributes().PutStr(genai.AttrLSDottedOrder, d)
		}
		return d
	}
	for sp := range spaniter.All(td) {
		place(sp, 0)
	}
	return td
}
