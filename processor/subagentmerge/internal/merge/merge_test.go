package merge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

func newSpan(ss ptrace.SpanSlice, id, parent byte, op string) ptrace.Span {
	sp := ss.AppendEmpty()
	sp.SetSpanID(pcommon.SpanID{id})
	if parent != 0 {
		sp.SetParentSpanID(pcommon.SpanID{parent})
	}
	sp.SetName(op)
	sp.Attributes().PutStr(genai.AttrOperationName, op)
	return sp
}

// leadDispatch starts ss with the lead agent (span 1), its chat (2) dispatching the task
// call c1, and the task tool (3) that runs it; it returns the dispatching chat.
func leadDispatch(ss ptrace.SpanSlice) ptrace.Span {
	newSpan(ss, 1, 0, genai.OpInvokeAgent)
	d := newSpan(ss, 2, 1, genai.OpChat)
	genai.PutStrings(d.Attributes(), genai.AttrResponseToolCallIDs, []string{"c1"})
	tool := newSpan(ss, 3, 1, genai.OpExecuteTool)
	tool.Attributes().PutStr(genai.AttrToolCallID, "c1")
	return d
}

func TestApplyMergesAndIsIdempotent(t *testing.T) {
	ss := ptrace.NewSpanSlice()
	d := leadDispatch(ss)
	newSpan(ss, 4, 3, genai.OpInvokeAgent)
	sub := newSpan(ss, 5, 4, genai.OpChat)
	genai.PutUsage(sub.Attributes(), genai.Usage{Input: 7, Output: 3, Reasoning: 1})

	spans := make([]ptrace.Span, ss.Len())
	for i := range spans {
		spans[i] = ss.At(i)
	}
	assert.Equal(t, Result{Merged: 1, Attributed: 1}, Apply(spans))
	got, _ := genai.SubagentUsageFromMap(d.Attributes())
	assert.Equal(t, genai.Usage{Input: 7, Output: 3, Reasoning: 1}, got)
	before := ptrace.NewSpanSlice()
	ss.CopyTo(before)
	assert.Equal(t, Result{}, Apply(spans), "second pass changes nothing")
	for i := range spans {
		assert.Equal(t, before.At(i).Attributes().AsRaw(), spans[i].Attributes().AsRaw())
	}
}

func TestApplySurvivesParentCycles(t *testing.T) {
	ss := ptrace.NewSpanSlice()
	a := newSpan(ss, 1, 2, genai.OpExecuteTool)
	a.Attributes().PutStr(genai.AttrToolCallID, "x")
	c := newSpan(ss, 2, 1, genai.OpChat) // 1 → 2 → 1
	genai.PutUsage(c.Attributes(), genai.Usage{Input: 1, Output: 1})
	r := Apply([]ptrace.Span{ss.At(0), ss.At(1)})
	assert.Equal(t, Result{Orphans: 1}, r)
}

func TestApplyWithoutToolsOrModels(t *testing.T) {
	assert.Equal(t, Result{}, Apply(nil))
	ss := ptrace.NewSpanSlice()
	newSpan(ss, 1, 0, genai.OpChat)
	assert.Equal(t, Result{}, Apply([]ptrace.Span{ss.At(0)}))
}
