// Package agentrun generates the agent runs the benchmarks send: DeerFlow-shaped runs (a
// lead agent with model calls and tools, parallel `task` calls each running a subagent,
// some nested; about 34 spans a run) and runs whose `task` is never traced
// (OpenLLMetry-shaped: a workflow root and model-client spans only, the subagent's calls
// under a parent span that never arrives). Spans come in the order they end: children
// before parents, the root last.
//
// bench/subagentmerge_loadgen sends them as fast as the collector acks; the sidecar
// latency benchmark (internal/e2e) replays them in real time with Retime.
package agentrun

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder/dottedordertest"
)

// Run is one generated agent run.
type Run struct {
	Traces ptrace.Traces // every span of the run, in one resource and scope
	// Spans are the run's spans in the order they end; the root is last.
	Spans []ptrace.Span
	// first[i] is the index in Spans of the first span to end in Spans[i]'s subtree (its
	// own index for a leaf): the subtree of Spans[i] is Spans[first[i] : i+1].
	first []int
}

// TraceID is the run's trace id.
func (r Run) TraceID() pcommon.TraceID { return r.Spans[len(r.Spans)-1].TraceID() }

// Root is the run's root span (it ends last).
func (r Run) Root() ptrace.Span { return r.Spans[len(r.Spans)-1] }

// Retime lays the run out over d from start, as a live run would: span i ends at
// start + (i+1)·d/n and starts when the first span of its subtree starts, so parents
// enclose their children. It returns each span's end offset from start, in Spans order.
func (r Run) Retime(start time.Time, d time.Duration) []time.Duration {
	n := len(r.Spans)
	step := d / time.Duration(n)
	ends := make([]time.Duration, n)
	for i, sp := range r.Spans {
		ends[i] = time.Duration(i+1) * step
		begin := time.Duration(r.first[i])*step + step/2
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(begin)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(ends[i])))
	}
	return ends
}

// New builds one DeerFlow-shaped run; traceNo makes its trace id unique.
func New(r *rand.Rand, traceNo uint64) Run {
	b := newBuilder(r, traceNo)
	lead := b.id()
	first := len(b.order)
	b.agentLoop(lead, 0, genai.BucketLeadAgent)
	b.finish(lead, pcommon.SpanID{}, first, genai.OpInvokeAgent, genai.LeadAgentName)
	return b.run()
}

// Untraced builds one run whose `task` tool is never traced, as OpenLLMetry, OpenInference
// and single-agent AI SDK apps emit it: a workflow root, the lead's model calls under it,
// and each subagent's model calls under the task's span id, which never arrives. No
// execute_tool or invoke_agent spans; attributes in OpenLLMetry's older names.
func Untraced(r *rand.Rand, traceNo uint64) Run {
	b := newBuilder(r, traceNo)
	root := b.id()
	first := len(b.order)
	for range 2 + b.r.IntN(2) {
		b.llmCall(root)
		for range b.r.IntN(3) {
			task := b.id() // the untraced task: its span is never sent
			for range 1 + b.r.IntN(3) {
				b.llmCall(task)
			}
		}
	}
	b.llmCall(root)
	sp := b.finishRaw(root, pcommon.SpanID{}, first, "lead.workflow")
	sp.Attributes().PutStr(genai.AttrTraceloopSpanKind, "workflow")
	sp.Attributes().PutStr(genai.AttrTraceloopEntityName, "lead")
	return b.run()
}

type builder struct {
	r     *rand.Rand
	td    ptrace.Traces
	spans ptrace.SpanSlice
	tid   pcommon.TraceID
	n     uint64
	calls int
	start time.Time
	order []ptrace.Span
	first []int
}

func newBuilder(r *rand.Rand, traceNo uint64) *builder {
	b := &builder{r: r, td: ptrace.NewTraces(), start: time.Now()}
	b.spans = b.td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	binary.BigEndian.PutUint64(b.tid[:8], r.Uint64())
	binary.BigEndian.PutUint64(b.tid[8:], traceNo)
	return b
}

func (b *builder) run() Run { return Run{Traces: b.td, Spans: b.order, first: b.first} }

func (b *builder) id() pcommon.SpanID {
	b.n++
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], uint64(b.tid[15])<<56|b.n)
	return id
}

// finishRaw appends a span when it ends (after all of its children, which start at
// index first of the order), with a 1 ms placeholder duration that Retime replaces.
func (b *builder) finishRaw(id, parent pcommon.SpanID, first int, name string) ptrace.Span {
	sp := b.spans.AppendEmpty()
	sp.SetTraceID(b.tid)
	sp.SetSpanID(id)
	sp.SetParentSpanID(parent)
	sp.SetName(name)
	ts := pcommon.NewTimestampFromTime(b.start.Add(time.Duration(b.n) * time.Millisecond))
	sp.SetStartTimestamp(ts)
	sp.SetEndTimestamp(ts + 1_000_000)
	b.order = append(b.order, sp)
	b.first = append(b.first, first)
	return sp
}

// finish is finishRaw for a contract span of the agentmeter runtime.
func (b *builder) finish(id, parent pcommon.SpanID, first int, op, target string) ptrace.Span {
	sp := b.finishRaw(id, parent, first, genai.SpanName(op, target))
	a := sp.Attributes()
	a.PutStr(genai.AttrOperationName, op)
	a.PutStr(genai.AttrConversationID, "thread-"+strconv.FormatUint(uint64(b.tid[15]), 10))
	a.PutStr(genai.AttrRunID, "run-"+strconv.FormatUint(b.n, 10))
	return sp
}

// leaf is finish for a span without children.
func (b *builder) leaf(parent pcommon.SpanID, op, target string) ptrace.Span {
	return b.finish(b.id(), parent, len(b.order), op, target)
}

// agentLoop adds an agent's steps under agent; every model call names its caller, as the
// agentmeter runtime writes it on every span of a run.
func (b *builder) agentLoop(agent pcommon.SpanID, depth int, caller string) {
	for range 1 + b.r.IntN(3) {
		var calls []string
		var tasks []bool
		for range b.r.IntN(4) {
			b.calls++
			calls = append(calls, "call_"+strconv.Itoa(b.calls))
			tasks = append(tasks, depth < 2 && b.r.IntN(2) == 0)
		}
		chat := b.leaf(agent, genai.OpChat, "gpt-4o")
		chat.SetKind(ptrace.SpanKindClient)
		chat.Attributes().PutStr(genai.AttrRequestModel, "gpt-4o")
		chat.Attributes().PutStr(genai.AttrProviderName, "openai")
		chat.Attributes().PutStr(genai.AttrCaller, caller)
		genai.PutUsage(chat.Attributes(), genai.Usage{Input: 200 + b.r.Int64N(4000), Output: 20 + b.r.Int64N(600)})
		// finish reasons on every model call, as the runtime records them: with them the
		// trace says when each run has answered, so subagentmerge releases it at its root
		finish := "stop"
		if len(calls) > 0 {
			genai.PutStrings(chat.Attributes(), genai.AttrResponseToolCallIDs, calls)
			finish = "tool_calls"
		}
		genai.PutStrings(chat.Attributes(), genai.AttrFinishReasons, []string{finish})
		for i, call := range calls {
			tool := b.id()
			toolFirst := len(b.order)
			name := "web_search"
			if tasks[i] {
				name = genai.TaskToolName
				sub := b.id()
				b.agentLoop(sub, depth+1, genai.SubagentCaller("researcher"))
				a := b.finish(sub, tool, toolFirst, genai.OpInvokeAgent, "researcher")
				a.Attributes().PutStr(genai.AttrToolCallID, call)
			}
			t := b.finish(tool, agent, toolFirst, genai.OpExecuteTool, name)
			t.Attributes().PutStr(genai.AttrToolName, name)
			t.Attributes().PutStr(genai.AttrToolCallID, call)
		}
	}
	final := b.leaf(agent, genai.OpChat, "gpt-4o")
	genai.PutUsage(final.Attributes(), genai.Usage{Input: 500 + b.r.Int64N(4000), Output: 50 + b.r.Int64N(800)})
	final.Attributes().PutStr(genai.AttrCaller, caller)
	genai.PutStrings(final.Attributes(), genai.AttrFinishReasons, []string{"stop"})
}

// llmCall is one model call as OpenLLMetry's OpenAI instrumentation records it.
func (b *builder) llmCall(parent pcommon.SpanID) {
	sp := b.finishRaw(b.id(), parent, len(b.order), "openai.chat")
	sp.SetKind(ptrace.SpanKindClient)
	a := sp.Attributes()
	a.PutStr(genai.AttrLLMRequestType, "chat")
	a.PutStr(genai.AttrSystem, "openai")
	a.PutStr(genai.AttrRequestModel, "gpt-4o-mini")
	a.PutInt(genai.AttrUsagePrompt, 200+b.r.Int64N(3000))
	a.PutInt(genai.AttrUsageCompletion, 20+b.r.Int64N(400))
}

// Place puts on every span the LangSmith placement the agentmeter runtime gives it when
// it starts (langsmith.span.dotted_order, runtime/telemetry): the start times and run
// ids of its ancestors and itself. Call it after Retime, which sets the start times. A
// span whose parent is not in the run (a subagent's calls under an untraced task) gets
// none, as the runtime gives none under a remote parent.
func (r Run) Place() { dottedordertest.Place(r.Traces) }
