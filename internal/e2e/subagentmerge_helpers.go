//go:build e2e

package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// AgentRun builds one DeerFlow-shaped run (docs/contract.md#spans) as OTLP spans: the
// lead agent dispatches a web search, then two parallel `task` calls (subagents using
// 10/5 and 20/7 tokens, DeerFlow's pinned case "reused tool_call_id keeps usage scoped"),
// and the second subagent dispatches a nested task (3/1 tokens). The spans come back in
// two batches as an SDK exports them, by end time: everything but the root first, then
// the root.
func AgentRun(traceNo uint64) (early, root ptrace.Traces) {
	b := &runBuilder{traceNo: traceNo}
	early, root = newBatch(), newBatch()
	b.spans = root.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	lead := b.span(pcommon.SpanID{}, genai.OpInvokeAgent, genai.LeadAgentName, nil)
	b.spans = early.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	b.chat(lead, 40, 4, "search_"+b.suffix())
	b.tool(lead, "web_search", "search_"+b.suffix())
	a, bb := "task_a_"+b.suffix(), "task_b_"+b.suffix()
	b.chat(lead, 60, 9, a, bb)
	subA := b.task(lead, a)
	b.chat(subA, 10, 5)
	subB := b.task(lead, bb)
	inner := "task_inner_" + b.suffix()
	b.chat(subB, 12, 3, inner)
	subC := b.task(subB, inner)
	b.chat(subC, 3, 1)
	b.chat(subB, 5, 3)
	b.chat(lead, 90, 30)
	return early, root
}

// AgentRunDispatch is what docs/contract.md#merge says AgentRun's dispatching spans carry, by the
// tool call ids they dispatched (joined with ","): the lead's 10/5 + (12/3 + 3/1 + 5/3).
func AgentRunDispatch(traceNo uint64) map[string]genai.Usage {
	s := fmt.Sprint(traceNo)
	return map[string]genai.Usage{
		"task_a_" + s + ",task_b_" + s: {Input: 30, Output: 12},
		"task_inner_" + s:              {Input: 3, Output: 1},
	}
}

type runBuilder struct {
	traceNo uint64
	n       uint64
	spans   ptrace.SpanSlice
}

func newBatch() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(genai.AttrServiceName, "deer-flow")
	rs.ScopeSpans().AppendEmpty().Scope().SetName("agentmeter/runtime")
	return td
}

func (b *runBuilder) suffix() string { return fmt.Sprint(b.traceNo) }

func (b *runBuilder) span(parent pcommon.SpanID, op, target string, attrs map[string]string) pcommon.SpanID {
	b.n++
	sp := b.spans.AppendEmpty()
	var tid pcommon.TraceID
	binary.BigEndian.PutUint64(tid[:8], 0xe2e)
	binary.BigEndian.PutUint64(tid[8:], b.traceNo)
	sp.SetTraceID(tid)
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], b.traceNo<<16|b.n)
	sp.SetSpanID(id)
	sp.SetParentSpanID(parent)
	sp.SetName(genai.SpanName(op, target))
	sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + b.n*1000))
	sp.SetEndTimestamp(sp.StartTimestamp() + 500)
	sp.Attributes().PutStr(genai.AttrOperationName, op)
	for k, v := range attrs {
		sp.Attributes().PutStr(k, v)
	}
	return id
}

func (b *runBuilder) chat(parent pcommon.SpanID, in, out int64, calls ...string) {
	b.span(parent, genai.OpChat, "gpt-4o", nil)
	sp := b.spans.At(b.spans.Len() - 1)
	genai.PutUsage(sp.Attributes(), genai.Usage{Input: in, Output: out})
	if len(calls) > 0 {
		genai.PutStrings(sp.Attributes(), genai.AttrResponseToolCallIDs, calls)
	}
}

func (b *runBuilder) tool(parent pcommon.SpanID, name, callID string) pcommon.SpanID {
	return b.span(parent, genai.OpExecuteTool, name, map[string]string{genai.AttrToolName: name, genai.AttrToolCallID: callID})
}

func (b *runBuilder) task(parent pcommon.SpanID, callID string) pcommon.SpanID {
	t := b.tool(parent, genai.TaskToolName, callID)
	return b.span(t, genai.OpInvokeAgent, "subagent", map[string]string{genai.AttrToolCallID: callID})
}

// MergedDispatches reads, from exported spans, every dispatching span's merged usage
// keyed like AgentRunDispatch.
func MergedDispatches(spans []ptrace.Span) map[string]genai.Usage {
	out := map[string]genai.Usage{}
	for _, sp := range spans {
		if u, ok := genai.SubagentUsageFromMap(sp.Attributes()); ok {
			key := ""
			for i, id := range genai.StringsFromMap(sp.Attributes(), genai.AttrSubagentToolCallIDs) {
				if i > 0 {
					key += ","
				}
				key += id
			}
			out[key] = u
		}
	}
	return out
}

// CanonicalSpans renders the last version of each span as sorted "traceid/spanid name
// attrs" lines, without the marks of a re-emission (its revision, "corrected"), so two
// outputs that differ only in batching, order and when corrections went out compare
// equal.
func CanonicalSpans(spans []ptrace.Span) []string {
	spans = LastVersions(spans)
	out := make([]string, 0, len(spans))
	for _, sp := range spans {
		tid, sid := sp.TraceID(), sp.SpanID()
		attrs := sp.Attributes().AsRaw()
		delete(attrs, genai.AttrMergeRevision)
		delete(attrs, genai.AttrCallerSettled)
		if attrs[genai.AttrMergeStatus] == genai.MergeCorrected {
			delete(attrs, genai.AttrMergeStatus)
		}
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "%x/%x %s parent=%x %v", tid[:], sid[:], sp.Name(), sp.ParentSpanID(), attrs)
		out = append(out, buf.String())
	}
	sort.Strings(out)
	return out
}

// LastVersions keeps the newest version of each span (by trace and span id), in the
// order the spans first appeared: what the vendor exporters leave at their sinks.
func LastVersions(spans []ptrace.Span) []ptrace.Span {
	type id struct {
		t pcommon.TraceID
		s pcommon.SpanID
	}
	at := map[id]int{}
	var out []ptrace.Span
	for _, sp := range spans {
		k := id{sp.TraceID(), sp.SpanID()}
		if i, ok := at[k]; ok {
			if Supersedes(sp, out[i]) {
				out[i] = sp
			}
			continue
		}
		at[k] = len(out)
		out = append(out, sp)
	}
	return out
}

// Supersedes reports whether version sp of a span, written after old, replaces it: its
// agentmeter.merge.revision (none on a first emission) is not lower. Two requests of a
// trace in flight at once can reach the next component, such as a test's file
// exporter, in either order; the vendor exporters drop an older version that comes after
// a newer one, and a sink that keeps whatever came last would show the older.
func Supersedes(sp, old ptrace.Span) bool {
	return genai.MergeRevision(sp.Attributes()) >= genai.MergeRevision(old.Attributes())
}

// FirstEmissions leaves out the re-emissions (genai.IsReemission): what the token
// metrics count.
func FirstEmissions(spans []ptrace.Span) []ptrace.Span {
	var out []ptrace.Span
	for _, sp := range spans {
		if !genai.IsReemission(sp.Attributes()) {
			out = append(out, sp)
		}
	}
	return out
}

// CountedVersions keeps the version of each span that counters count
// (genai.IsCountedVersion): one per span.
func CountedVersions(spans []ptrace.Span) []ptrace.Span {
	var out []ptrace.Span
	for _, sp := range spans {
		if genai.IsCountedVersion(sp.Attributes()) {
			out = append(out, sp)
		}
	}
	return out
}

// WaitForMergedSpans waits until path holds n first emissions and then until nothing
// more lands for quiet (the re-emissions of a streamed merge come a little later), and
// returns every span, re-emissions included.
func WaitForMergedSpans(t testing.TB, path string, n int, quiet, timeout time.Duration) []ptrace.Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last, lastChange := -1, time.Now()
	for {
		tds, err := ReadTraces(path)
		var spans []ptrace.Span
		if err == nil {
			spans = Spans(tds)
		}
		if len(spans) != last {
			last, lastChange = len(spans), time.Now()
		}
		if len(FirstEmissions(spans)) >= n && time.Since(lastChange) >= quiet {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %d spans in %s, have %d first emissions of %d (last error: %v)", timeout, n, path, len(FirstEmissions(spans)), len(spans), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
