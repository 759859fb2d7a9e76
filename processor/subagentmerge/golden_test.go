package subagentmerge

import (
	"context"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/metrictest"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

var update = flag.Bool("update", false, "rewrite testdata/<case>/{input,expected}.yaml from the builders and the processor")

// goldenCase is one agent trace and the numbers a reader can check by hand.
type goldenCase struct {
	name  string
	build func() ptrace.Traces
	check func(t *testing.T, out ptrace.Traces)
}

var goldenCases = []goldenCase{
	{"one_task", buildOneTask, func(t *testing.T, out ptrace.Traces) {
		d := spanByCalls(t, out, "call_task_1")
		assertSubagent(t, d, genai.Usage{Input: 10, Output: 5}, 1, "call_task_1")
		assertOwn(t, d, genai.Usage{Input: 100, Output: 20})
		assert.Equal(t, genai.MergeMerged, status(t, out, "call_task_1"))
	}},
	{"parallel_tasks", buildParallel, func(t *testing.T, out ptrace.Traces) {
		// DeerFlow's fixture (its pinned case "reused tool_call_id keeps usage scoped"):
		// 10/5/15 + 20/7/27 → 30/12/42 on dispatch2 only.
		d := spanByCalls(t, out, "call_a", "call_b")
		assertSubagent(t, d, genai.Usage{Input: 30, Output: 12}, 2, "call_a", "call_b")
		tot, _ := d.Attributes().Get(genai.AttrSubagentTotal)
		assert.Equal(t, int64(42), tot.Int())
		_, has := spanByCalls(t, out, "call_search").Attributes().Get(genai.AttrSubagentInput)
		assert.False(t, has, "a dispatch of a plain tool gets no subagent usage")
		assert.Equal(t, "", status(t, out, "call_search"), "a tool without model calls under it is not considered")
	}},
	{"nested", buildNested, func(t *testing.T, out ptrace.Traces) {
		assertSubagent(t, spanByCalls(t, out, "call_outer"), genai.Usage{Input: 18, Output: 6}, 1, "call_outer")
		assertSubagent(t, spanByCalls(t, out, "call_inner"), genai.Usage{Input: 4, Output: 1}, 1, "call_inner")
		assert.Equal(t, genai.MergeMerged, status(t, out, "call_outer"))
		assert.Equal(t, genai.MergeMerged, status(t, out, "call_inner"))
	}},
	{"failed_subagent", buildFailed, func(t *testing.T, out ptrace.Traces) {
		assertSubagent(t, spanByCalls(t, out, "call_fail"),
			genai.Usage{Input: 70, Output: 30, CacheRead: 40, CacheCreation: 5, Reasoning: 12}, 1, "call_fail")
	}},
	{"output_messages_only", buildOutputMessages, func(t *testing.T, out ptrace.Traces) {
		d := spanWithAttr(t, out, genai.AttrOutputMessages)
		assertSubagent(t, d, genai.Usage{Input: 3, Output: 2}, 1, "call_om")
	}},
	{"orphan", buildOrphan, func(t *testing.T, out ptrace.Traces) {
		assert.Equal(t, genai.MergeOrphan, status(t, out, "call_lost"))
		assertNoSubagentUsage(t, out)
	}},
	{"reused_call_id", buildReusedCallID, func(t *testing.T, out ptrace.Traces) {
		// DeerFlow's pinned case "reused tool_call_id keeps usage scoped": each
		// dispatcher gets its own.
		var got []int64
		for sp := range spaniter.All(out) {
			if u, ok := genai.SubagentUsageFromMap(sp.Attributes()); ok {
				got = append(got, u.Total())
			}
		}
		// the lead's dispatcher gets both planners' subtrees: 6+12 + 6+98
		assert.ElementsMatch(t, []int64{122, 12, 98}, got)
	}},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", tc.name)
			if *update {
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, golden.WriteTracesToFile(filepath.Join(dir, "input.yaml"), tc.build()))
			}
			in, err := golden.ReadTraces(filepath.Join(dir, "input.yaml"))
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(canonical(tc.build()), canonical(in)), "builder and input.yaml disagree: run with -update")
			for _, mode := range bufferModes {
				out := run(t, mode.cfg(), clone(in))
				if *update && mode.name == "hot" {
					require.NoError(t, golden.WriteTracesToFile(filepath.Join(dir, "expected.yaml"), out))
				}
				want, err := golden.ReadTraces(filepath.Join(dir, "expected.yaml"))
				require.NoError(t, err)
				require.NoError(t, ptracetest.CompareTraces(want, out), mode.name)
				tc.check(t, out)
				assert.Equal(t, ownUsageSum(in), ownUsageSum(out), "own usage never changes")
			}
		})
	}
}

// Spans split over many batches in random order give the same result as one batch.
// The root comes in the last batch: SDKs export spans as they end and a run's root ends
// last; a root that overtakes its descendants makes the trace look complete early (see
// docs/subagentmerge.md, "Completeness").
func TestGoldenRandomBatches(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := golden.ReadTraces(filepath.Join("testdata", tc.name, "expected.yaml"))
			require.NoError(t, err)
			for seed := uint64(1); seed <= 20; seed++ {
				r := rand.New(rand.NewPCG(seed, 7))
				mode := bufferModes[seed%uint64(len(bufferModes))]
				out := run(t, mode.cfg(), shuffleIntoBatches(r, tc.build(), 2+r.IntN(7))...)
				require.NoError(t, ptracetest.CompareTraces(want, out), "seed %d, %s", seed, mode.name)
			}
		})
	}
}

// Exact duplicates (a client retry, before and after release) are passed on once.
func TestGoldenDuplicates(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := golden.ReadTraces(filepath.Join("testdata", tc.name, "expected.yaml"))
			require.NoError(t, err)
			r := rand.New(rand.NewPCG(3, 3))
			batches := shuffleIntoBatches(r, tc.build(), 3)
			var in []ptrace.Traces
			for _, b := range batches {
				in = append(in, b, clone(b)) // each batch retried at once
			}
			in = append(in, tc.build()) // and the whole trace again after its release
			for _, mode := range bufferModes {
				p, sink, tel := newTestProcessor(t, mode.cfg())
				for _, b := range in {
					require.NoError(t, p.ConsumeTraces(context.Background(), clone(b)))
				}
				require.NoError(t, p.Shutdown(context.Background()))
				require.NoError(t, ptracetest.CompareTraces(want, canonical(lastVersions(sink.AllTraces()...)...)), mode.name)
				n := want.SpanCount()
				assert.Equal(t, int64(2*n), counterValue(t, tel, "otelcol_processor_subagentmerge_duplicates_dropped"), mode.name)
			}
		})
	}
}

// A second subagentmerge (two collectors in a row) changes nothing.
func TestGoldenSecondPass(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := golden.ReadTraces(filepath.Join("testdata", tc.name, "expected.yaml"))
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(want, run(t, defaultTestConfig(), clone(want))))
		})
	}
}

// defaultTestConfig is hold mode with its defaults: the tests of buffering and release.
func defaultTestConfig() *Config { c := createDefaultConfig(); c.Mode = ModeHold; return c }

// streamTestConfig is the default config (stream mode).
func streamTestConfig() *Config { return createDefaultConfig() }

// bufferModes are the ways spans go through: held hot (pdata) or compact (encoded on
// arrival, compact_after 0) in hold mode, and streamed. Every golden and property test
// runs each.
var bufferModes = []struct {
	name string
	cfg  func() *Config
}{
	{"hot", defaultTestConfig},
	{"compact", func() *Config { c := defaultTestConfig(); c.CompactAfter = 0; return c }},
	{"stream", streamTestConfig},
	// stream mode with every ledger frozen between batches (run does it), so each batch
	// finds its ledgers packed
	{"stream_frozen", func() *Config { c := streamTestConfig(); c.CompactAfter = 0; return c }},
}

// freezeAll freezes every ledger the sweeper may freeze, whatever its age.
func freezeAll(p *subagentMerge) {
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		p.freezeIdle(s, math.MaxInt64)
		s.mu.Unlock()
	}
}

func newTestProcessor(t testing.TB, cfg *Config) (*subagentMerge, *consumertest.TracesSink, *componenttest.Telemetry) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	sink := new(consumertest.TracesSink)
	p, err := newProcessor(set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	return p, sink, tel
}

// run sends the batches through a fresh processor, shuts it down and returns the
// canonical form of everything it passed on.
func run(t *testing.T, cfg *Config, batches ...ptrace.Traces) ptrace.Traces {
	t.Helper()
	p, sink, _ := newTestProcessor(t, cfg)
	for _, b := range batches {
		require.NoError(t, p.ConsumeTraces(context.Background(), b))
		if p.stream && cfg.CompactAfter == 0 {
			freezeAll(p)
		}
	}
	require.NoError(t, p.Shutdown(context.Background()))
	return canonical(lastVersions(sink.AllTraces()...)...)
}

// counterValue is the total of counter name; a counter never recorded fails the test
// (a renamed or unregistered metric must not read as zero).
func counterValue(t *testing.T, tel *componenttest.Telemetry, name string) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	require.NoError(t, err, "metric %s was never recorded", name)
	return metrictest.SumInt64(t, m)
}

// countedSoFar is counterValue for a counter that may rightly not have counted
// anything yet (a sum over runs that is only logged).
func countedSoFar(t *testing.T, tel *componenttest.Telemetry, name string) int64 {
	t.Helper()
	if _, err := tel.GetMetric(name); err != nil {
		return 0
	}
	return counterValue(t, tel, name)
}

// shuffleIntoBatches spreads td's spans over n batches in random order, roots last,
// each span keeping its resource and scope.
func shuffleIntoBatches(r *rand.Rand, td ptrace.Traces, n int) []ptrace.Traces {
	type item struct {
		rs ptrace.ResourceSpans
		ss ptrace.ScopeSpans
		sp ptrace.Span
	}
	var items []item
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				items = append(items, item{rs, ss, ss.Spans().At(k)})
			}
		}
	}
	r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	// keep local roots at the end, so they land in the last batch
	sort.SliceStable(items, func(i, j int) bool { return !isLocalRoot(items[i].sp) && isLocalRoot(items[j].sp) })
	out := make([]ptrace.Traces, n)
	for i := range out {
		out[i] = ptrace.NewTraces()
	}
	per := (len(items) + n - 1) / n
	for i, it := range items {
		b := out[min(i/per, n-1)]
		rs := b.ResourceSpans().AppendEmpty()
		it.rs.Resource().CopyTo(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		it.ss.Scope().CopyTo(ss.Scope())
		it.sp.CopyTo(ss.Spans().AppendEmpty())
	}
	return out
}

func clone(td ptrace.Traces) ptrace.Traces {
	c := ptrace.NewTraces()
	td.CopyTo(c)
	return c
}

func ownUsageSum(td ptrace.Traces) genai.Usage {
	var sum genai.Usage
	for sp := range spaniter.All(td) {
		if u, ok := genai.UsageFromMap(sp.Attributes()); ok {
			sum = sum.Add(u)
		}
	}
	return sum
}

// spanByCalls finds the chat span whose response asked for exactly these tool calls.
func spanByCalls(t *testing.T, td ptrace.Traces, calls ...string) ptrace.Span {
	t.Helper()
	var found []ptrace.Span
	for sp := range spaniter.All(td) {
		if assert.ObjectsAreEqual(calls, genai.StringsFromMap(sp.Attributes(), genai.AttrResponseToolCallIDs)) {
			found = append(found, sp)
		}
	}
	require.Len(t, found, 1, "chat span dispatching %v", calls)
	return found[0]
}

func spanWithAttr(t *testing.T, td ptrace.Traces, key string) ptrace.Span {
	t.Helper()
	var found []ptrace.Span
	for sp := range spaniter.All(td) {
		if _, ok := sp.Attributes().Get(key); ok {
			found = append(found, sp)
		}
	}
	require.Len(t, found, 1, "span with %s", key)
	return found[0]
}

// status is the merge status of the execute_tool span with that call id.
func status(t *testing.T, td ptrace.Traces, callID string) string {
	t.Helper()
	st, n := "", 0
	for sp := range spaniter.All(td) {
		if genai.SpanOperation(sp.Name(), sp.Attributes()) != genai.OpExecuteTool {
			continue
		}
		if v, ok := sp.Attributes().Get(genai.AttrToolCallID); ok && v.Str() == callID {
			n++
			if s, ok := sp.Attributes().Get(genai.AttrMergeStatus); ok {
				st = s.Str()
			}
		}
	}
	require.Equal(t, 1, n, "execute_tool spans with call id %s", callID)
	return st
}

func assertSubagent(t *testing.T, sp ptrace.Span, want genai.Usage, dispatches int64, ids ...string) {
	t.Helper()
	got, ok := genai.SubagentUsageFromMap(sp.Attributes())
	require.True(t, ok, "span %s has no agentmeter.subagent.* usage", sp.Name())
	assert.Equal(t, want, got)
	tot, _ := sp.Attributes().Get(genai.AttrSubagentTotal)
	assert.Equal(t, want.Total(), tot.Int())
	d, _ := sp.Attributes().Get(genai.AttrSubagentDispatches)
	assert.Equal(t, dispatches, d.Int())
	assert.Equal(t, ids, genai.StringsFromMap(sp.Attributes(), genai.AttrSubagentToolCallIDs))
}

func assertOwn(t *testing.T, sp ptrace.Span, want genai.Usage) {
	t.Helper()
	got, _ := genai.UsageFromMap(sp.Attributes())
	assert.Equal(t, want, got)
}

func assertNoSubagentUsage(t *testing.T, td ptrace.Traces) {
	t.Helper()
	for sp := range spaniter.All(td) {
		_, has := genai.SubagentUsageFromMap(sp.Attributes())
		assert.False(t, has, "span %s", sp.Name())
	}
}

// --- the cases ---

func buildOneTask() ptrace.Traces { return oneTaskOn(newTraceBuilder(1)) }

// oneTaskOn builds on b a lead agent that calls one task, whose subagent makes one call.
func oneTaskOn(b *traceBuilder) ptrace.Traces {
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(100, 20), "call_task_1")
	_, sub := b.task(lead, "call_task_1", "general-purpose", genai.SubagentCompleted)
	b.chat(sub, usage(10, 5))
	b.chat(lead, usage(50, 10))
	return b.td
}

func buildParallel() ptrace.Traces {
	b := newTraceBuilder(2)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(40, 4), "call_search")
	b.tool(lead, "web_search", "call_search")
	b.chat(lead, usage(60, 9), "call_a", "call_b")
	_, subA := b.task(lead, "call_a", "researcher", genai.SubagentCompleted)
	_, subB := b.task(lead, "call_b", "coder", genai.SubagentCompleted)
	b.chat(subA, usage(10, 5))
	b.chat(subB, usage(20, 7))
	b.chat(lead, usage(90, 30))
	return b.td
}

func buildNested() ptrace.Traces {
	b := newTraceBuilder(3)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(100, 10), "call_outer")
	_, s1 := b.task(lead, "call_outer", "planner", genai.SubagentCompleted)
	b.chat(s1, usage(8, 2), "call_inner")
	_, s2 := b.task(s1, "call_inner", "coder", genai.SubagentCompleted)
	b.chat(s2, usage(4, 1))
	b.chat(s1, usage(6, 3))
	b.chat(lead, usage(30, 5))
	return b.td
}

func buildFailed() ptrace.Traces {
	b := newTraceBuilder(4)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(20, 2), "call_fail")
	tool, sub := b.task(lead, "call_fail", "coder", genai.SubagentFailed)
	tool.Status().SetCode(ptrace.StatusCodeError)
	tool.Attributes().PutStr(genai.AttrErrorType, "SubagentError")
	b.chat(sub, &genai.Usage{Input: 50, Output: 20, CacheRead: 40, Reasoning: 12})
	b.chat(sub, &genai.Usage{Input: 20, Output: 10, CacheCreation: 5})
	b.chat(sub, nil) // the call that failed reported no usage
	b.chat(lead, usage(25, 4))
	return b.td
}

func buildOutputMessages() ptrace.Traces {
	b := newTraceBuilder(5)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	d := b.chat(lead, usage(9, 1))
	d.Attributes().PutStr(genai.AttrOutputMessages,
		`[{"role":"assistant","parts":[{"type":"text","content":"delegating"},{"type":"tool_call","id":"call_om","name":"task","arguments":{}}]}]`)
	_, sub := b.task(lead, "call_om", "general-purpose", genai.SubagentCompleted)
	b.chat(sub, usage(3, 2))
	return b.td
}

func buildOrphan() ptrace.Traces {
	b := newTraceBuilder(6)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(11, 1), "call_other")
	_, sub := b.task(lead, "call_lost", "general-purpose", genai.SubagentCancelled)
	b.chat(sub, usage(5, 5))
	return b.td
}

func buildReusedCallID() ptrace.Traces {
	b := newTraceBuilder(7)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(1, 1), "call_p1", "call_p2")
	_, p1 := b.task(lead, "call_p1", "planner", genai.SubagentCompleted)
	_, p2 := b.task(lead, "call_p2", "planner", genai.SubagentCompleted)
	// Both planners' providers issued the same tool-call id "call_x".
	b.chat(p1, usage(5, 1), "call_x")
	_, x1 := b.task(p1, "call_x", "coder", genai.SubagentCompleted)
	b.chat(x1, usage(10, 2))
	b.chat(p2, usage(5, 1), "call_x")
	_, x2 := b.task(p2, "call_x", "coder", genai.SubagentCompleted)
	b.chat(x2, usage(90, 8))
	return b.td
}
