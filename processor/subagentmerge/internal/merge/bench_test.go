package merge

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// benchTrace is a lead agent with 4 own calls and 3 task dispatches, each running a
// subagent with 5 calls and a plain tool: 42 spans, the shape of a DeerFlow run.
func benchTrace() ptrace.SpanSlice {
	ss := ptrace.NewSpanSlice()
	id := byte(1)
	next := func(parent byte, op string) ptrace.Span {
		sp := newSpan(ss, id, parent, op)
		id++
		return sp
	}
	lead := next(0, genai.OpInvokeAgent).SpanID()[0]
	for i := 0; i < 4; i++ {
		genai.PutUsage(next(lead, genai.OpChat).Attributes(), genai.Usage{Input: 100, Output: 10})
	}
	for task := 0; task < 3; task++ {
		d := next(lead, genai.OpChat)
		callID := string(rune('a' + task))
		genai.PutStrings(d.Attributes(), genai.AttrResponseToolCallIDs, []string{callID})
		tool := next(lead, genai.OpExecuteTool)
		tool.Attributes().PutStr(genai.AttrToolCallID, callID)
		tool.Attributes().PutStr(genai.AttrToolName, genai.TaskToolName)
		sub := next(tool.SpanID()[0], genai.OpInvokeAgent)
		sub.Attributes().PutStr(genai.AttrAgentName, "researcher")
		for i := 0; i < 5; i++ {
			genai.PutUsage(next(sub.SpanID()[0], genai.OpChat).Attributes(), genai.Usage{Input: 50, Output: 5})
		}
		next(sub.SpanID()[0], genai.OpExecuteTool).Attributes().PutStr(genai.AttrToolCallID, "s"+callID)
	}
	return ss
}

func BenchmarkApply(b *testing.B) {
	src := benchTrace()
	spans := make([]ptrace.Span, src.Len())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		work := ptrace.NewSpanSlice() // a fresh copy each round: Apply is idempotent
		src.CopyTo(work)
		for j := range spans {
			spans[j] = work.At(j)
		}
		b.StartTimer()
		Apply(spans)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*src.Len()), "ns/span")
}
