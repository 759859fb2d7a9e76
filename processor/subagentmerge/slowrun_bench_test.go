package subagentmerge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
)

// slowRun is a long lead-agent run as it is exported live, one span a request in the
// order its spans end: steps model calls, each asking for one tool call, every fourth a
// task with a subagent of two model calls; the lead's root comes last. With named, every
// model call names its caller, as the agentmeter runtime writes it; without, none does
// (OpenLLMetry), so each waits for the trace's shape until the root comes.
func slowRun(traceNo uint64, steps int, named bool) []ptrace.Traces {
	b := newTraceBuilder(traceNo)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName)
	var order []ptrace.Span
	for i := range steps {
		call := fmt.Sprintf("call_%d", i)
		chat := b.chat(lead.SpanID(), usage(1000, 100), call)
		if named {
			chat.Attributes().PutStr(genai.AttrCaller, genai.BucketLeadAgent)
		}
		order = append(order, chat)
		if i%4 != 3 {
			order = append(order, b.tool(lead.SpanID(), "web_search", call))
			continue
		}
		tool := b.tool(lead.SpanID(), genai.TaskToolName, call)
		tool.Attributes().PutStr(genai.AttrSubagentStatus, genai.SubagentCompleted)
		sub := b.agent(tool.SpanID(), "researcher")
		sub.Attributes().PutStr(genai.AttrToolCallID, call)
		c1, c2 := b.chat(sub.SpanID(), usage(300, 30)), b.chat(sub.SpanID(), usage(400, 40))
		if named {
			c1.Attributes().PutStr(genai.AttrCaller, genai.SubagentCaller("researcher"))
			c2.Attributes().PutStr(genai.AttrCaller, genai.SubagentCaller("researcher"))
		}
		order = append(order, c1, c2, sub, tool)
	}
	order = append(order, b.chat(lead.SpanID(), usage(2000, 500)), lead)
	out := make([]ptrace.Traces, len(order))
	rs := b.td.ResourceSpans().At(0)
	for i, sp := range order {
		out[i] = batchOf([]arrivalSpan{{rs: rs, ss: rs.ScopeSpans().At(0), sp: sp}})
	}
	return out
}

// BenchmarkSlowRun sends long runs whose spans come gap apart (a model call or a tool
// takes seconds), with callers named as the agentmeter runtime names them or not,
// sweeping before each span as the sweeper would: read ns/span, the merge's cost per
// span of such a run, freezes and thaws of its ledger included.
func BenchmarkSlowRun(b *testing.B) {
	for _, c := range []struct {
		steps int
		gap   time.Duration
		named bool
	}{
		{50, 500 * time.Millisecond, false}, {50, 3 * time.Second, false},
		{200, 500 * time.Millisecond, false}, {200, 3 * time.Second, false},
		{200, 3 * time.Second, true},
	} {
		steps := c.steps
		name := fmt.Sprintf("steps=%d/gap=%s", steps, c.gap)
		if c.named {
			name += "/callers_named"
		}
		b.Run(name, func(b *testing.B) {
			cfg := streamTestConfig()
			cfg.WaitDuration = 24 * time.Hour
			p, err := newProcessor(processortest.NewNopSettings(Type), cfg, consumertest.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
				b.Fatal(err)
			}
			stopSweeper(p) // swept below, on the benchmark's clock
			clock := int64(1_000_000_000)
			p.now = func() int64 { return clock }
			spans := 0
			traceNo := uint64(0)
			for b.Loop() {
				b.StopTimer()
				traceNo++
				batches := slowRun(traceNo, steps, c.named)
				b.StartTimer()
				for _, td := range batches {
					clock += int64(c.gap)
					if err := p.sweepStream(context.Background(), clock); err != nil {
						b.Fatal(err)
					}
					if err := p.ConsumeTraces(context.Background(), td); err != nil {
						b.Fatal(err)
					}
				}
				spans += len(batches)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(spans), "ns/span")
			if err := p.Shutdown(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}
