package agent

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/model/scripted"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// benchScript: one final answer for the 1-call run; a 3-call conversation with a tool.
const benchScript = `
conversations:
  - name: one
    caller: lead_agent
    first_human_contains: one
    turns:
      - content: "the answer"
        usage: {input: 100, output: 10}
  - name: three
    caller: lead_agent
    first_human_contains: three
    turns:
      - tool_calls: [{id: c1, name: echo, args: {text: a}}, {id: c2, name: echo, args: {text: b}}]
        usage: {input: 100, output: 10}
      - tool_calls: [{id: c3, name: echo, args: {text: c}}]
        usage: {input: 120, output: 10}
      - content: "done"
        usage: {input: 140, output: 10}
`

func benchProvider(b *testing.B) *scripted.Model {
	s, err := scripted.Parse([]byte(benchScript))
	if err != nil {
		b.Fatal(err)
	}
	return scripted.New(s, "bench")
}

// BenchmarkProviderDirect is the scripted provider alone: the floor every loop number is
// compared with.
func BenchmarkProviderDirect(b *testing.B) {
	p := benchProvider(b)
	req := &model.Request{Messages: []message.Message{message.Human("one")}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Generate(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRun(b *testing.B, ctx context.Context, prompt string, withJournal bool) {
	a, err := New(Config{Model: model.Wrap(benchProvider(b), model.Info{Provider: "scripted", Model: "bench"}),
		Tools: []tool.Tool{echoTool{name: "echo"}}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		in := Input{ThreadID: "t", RunID: "r", Messages: []message.Message{message.Human(prompt)}}
		if withJournal {
			in.Journal = journal.New(journal.Options{})
		}
		if _, err := a.Run(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// One model call per run, no middlewares, global (no-op) tracer: the loop's own cost.
func BenchmarkLoopOneCallNoopTracer(b *testing.B) { benchRun(b, context.Background(), "one", false) }

// Same with a recording SDK tracer (spans built and handed to an in-memory exporter) and
// the journal: the cost a real run pays per model call.
func BenchmarkLoopOneCallSDKTracerJournal(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx := telemetry.WithTracerProvider(context.Background(), tp)
	benchRun(b, ctx, "one", true)
}

// Three model calls and two tool batches (three tool calls) per run.
func BenchmarkLoopThreeCallsTwoToolBatches(b *testing.B) {
	benchRun(b, context.Background(), "three", false)
}
