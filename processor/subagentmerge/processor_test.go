package subagentmerge

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/metrictest"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

func TestFactoryLifecycle(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, Type, f.Type())
	assert.Equal(t, stability, f.TracesStability())
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(Type), f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	assert.True(t, p.Capabilities().MutatesData)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.Shutdown(context.Background()))
	require.NoError(t, p.Shutdown(context.Background()), "second shutdown is a no-op")

	bad := createDefaultConfig()
	bad.NumTraces = 0
	_, err = f.CreateTraces(context.Background(), processortest.NewNopSettings(Type), bad, consumertest.NewNop())
	require.ErrorContains(t, err, "num_traces must be positive")

	// shut down without start: nothing to stop, nothing leaks
	p, err = f.CreateTraces(context.Background(), processortest.NewNopSettings(Type), f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, p.Shutdown(context.Background()))
}

// withoutRoot returns td minus its local roots: a run still in progress.
func withoutRoot(td ptrace.Traces) ptrace.Traces {
	c := clone(td)
	for i := 0; i < c.ResourceSpans().Len(); i++ {
		ss := c.ResourceSpans().At(i).ScopeSpans()
		for j := 0; j < ss.Len(); j++ {
			ss.At(j).Spans().RemoveIf(isLocalRoot)
		}
	}
	return c
}

func TestCompleteTraceIsReleasedInTheSameCall(t *testing.T) {
	p, sink, tel := newTestProcessor(t, defaultTestConfig())
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	require.NoError(t, p.ConsumeTraces(context.Background(), buildParallel()))
	require.Equal(t, buildParallel().SpanCount(), sink.SpanCount(), "complete traces are not held")
	assert.Equal(t, int64(1), releasedBy(t, tel, "complete"))
	assert.Equal(t, int64(2), counterValue(t, tel, "otelcol_processor_subagentmerge_spans_merged"))
}

func TestIncompleteTraceWaitsForItsRoot(t *testing.T) {
	p, sink, tel := newTestProcessor(t, defaultTestConfig())
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	full := buildParallel()
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(full)))
	assert.Zero(t, sink.SpanCount())
	tr, sp := p.nTraces.Load(), p.nSpans.Load()
	assert.Equal(t, int64(1), tr)
	assert.Equal(t, int64(full.SpanCount()-1), sp)
	assertGauge(t, tel, "otelcol_processor_subagentmerge_traces_buffered", 1)

	// the root arrives: the whole trace goes on, merged
	root := clone(full)
	root.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(s ptrace.Span) bool { return !isLocalRoot(s) })
	require.NoError(t, p.ConsumeTraces(context.Background(), root))
	require.Equal(t, full.SpanCount(), sink.SpanCount())
	out := canonical(sink.AllTraces()...)
	assertSubagent(t, spanByCalls(t, out, "call_a", "call_b"), genai.Usage{Input: 30, Output: 12}, 2, "call_a", "call_b")
	assert.Zero(t, p.nTraces.Load())
	assert.Zero(t, p.nSpans.Load())
}

func TestIdleTraceIsReleasedAfterWaitDuration(t *testing.T) {
	cfg := defaultTestConfig()
	cfg.WaitDuration = 50 * time.Millisecond
	p, sink, tel := newTestProcessor(t, cfg)
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	in := withoutRoot(buildOneTask())
	n := in.SpanCount() // in is ours no more once consumed
	start := time.Now()
	require.NoError(t, p.ConsumeTraces(context.Background(), in))
	require.Eventually(t, func() bool { return sink.SpanCount() == n }, 5*time.Second, 5*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), cfg.WaitDuration)
	assert.Equal(t, int64(1), releasedBy(t, tel, "idle"))
	// merged even though the root never came: the dispatcher and the task are there
	assertSubagent(t, spanByCalls(t, canonical(sink.AllTraces()...), "call_task_1"), genai.Usage{Input: 10, Output: 5}, 1, "call_task_1")
}

func TestLateSpansAreMergedAndTheDispatcherCorrected(t *testing.T) {
	cfg := defaultTestConfig()
	cfg.WaitDuration = 20 * time.Millisecond
	p, sink, tel := newTestProcessor(t, cfg)
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()

	// The lead's spans are released idle; then the task and its subagent arrive late.
	b := newTraceBuilder(40)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(1, 1), "call_late")
	early := clone(b.td)
	b.td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(ptrace.Span) bool { return true })
	_, sub := b.task(lead, "call_late", "coder", genai.SubagentCompleted)
	b.chat(sub, usage(5, 5))
	late := b.td
	// early holds the root, but its chat asked for call_late, which is missing: it is
	// held, then released idle
	require.NoError(t, p.ConsumeTraces(context.Background(), early))
	assert.Zero(t, sink.SpanCount(), "an announced tool call is missing")
	require.Eventually(t, func() bool { return sink.SpanCount() == 2 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, p.ConsumeTraces(context.Background(), clone(late)))
	// the 3 late spans go on at once, merged, with the dispatching chat span re-emitted
	require.Equal(t, 6, sink.SpanCount(), "late spans and one correction go on at once")
	assert.Equal(t, int64(3), counterValue(t, tel, "otelcol_processor_subagentmerge_late_spans"))
	assert.Equal(t, int64(1), counterValue(t, tel, "otelcol_processor_subagentmerge_corrections"))
	lateOut := canonical(sink.AllTraces()[1])
	assert.Equal(t, genai.MergeMerged, status(t, lateOut, "call_late"), "the late task is merged, not just marked")
	fix := spanByCalls(t, lateOut, "call_late")
	assertSubagent(t, fix, genai.Usage{Input: 5, Output: 5}, 1, "call_late")
	assertOwn(t, fix, genai.Usage{Input: 1, Output: 1})
	st, _ := fix.Attributes().Get(genai.AttrMergeStatus)
	assert.Equal(t, genai.MergeCorrected, st.Str(), "re-emitted under the same span id, marked so counting skips it")
	first := spanByCalls(t, canonical(sink.AllTraces()[0]), "call_late")
	assert.Equal(t, first.SpanID(), fix.SpanID())
	_, had := first.Attributes().Get(genai.AttrSubagentInput)
	assert.False(t, had, "its first emission had nothing to merge")

	// a retry of the late batch is dropped, and corrects nothing again
	require.NoError(t, p.ConsumeTraces(context.Background(), clone(late)))
	assert.Equal(t, 6, sink.SpanCount())
	assert.Equal(t, int64(3), counterValue(t, tel, "otelcol_processor_subagentmerge_duplicates_dropped"))
}

func TestCapacityReleasesOldestFirstAndDropsNothing(t *testing.T) {
	cfg := defaultTestConfig()
	cfg.NumTraces = 1
	p, sink, tel := newTestProcessor(t, cfg)
	total := 0
	var firstOut int
	for i := uint64(0); i < 200; i++ {
		in := withoutRoot(buildOneTask())
		// a distinct trace id per trace
		for sp := range spaniter.All(in) {
			id := sp.TraceID()
			id[0] = byte(i)
			id[1] = byte(i >> 8)
			sp.SetTraceID(id)
		}
		total += in.SpanCount()
		require.NoError(t, p.ConsumeTraces(context.Background(), in))
		if i == 0 {
			firstOut = sink.SpanCount()
		}
	}
	assert.Zero(t, firstOut)
	assert.Positive(t, releasedBy(t, tel, "capacity"))
	assert.Equal(t, int64(1), p.nTraces.Load(), "num_traces is exact")
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Equal(t, total, sink.SpanCount(), "nothing dropped")
	assert.Equal(t, int64(200), releasedBy(t, tel, "capacity")+releasedBy(t, tel, "shutdown"))
}

func TestShutdownReleasesEverything(t *testing.T) {
	p, sink, tel := newTestProcessor(t, defaultTestConfig())
	want := 0
	for _, tc := range goldenCases {
		in := withoutRoot(tc.build())
		want += in.SpanCount()
		require.NoError(t, p.ConsumeTraces(context.Background(), in))
	}
	assert.Zero(t, sink.SpanCount())
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Equal(t, want, sink.SpanCount())
	assert.Equal(t, int64(len(goldenCases)), releasedBy(t, tel, "shutdown"))
	assert.Zero(t, p.nTraces.Load())
}

func TestSpansWithoutTraceIDPassThrough(t *testing.T) {
	p, sink, _ := newTestProcessor(t, defaultTestConfig())
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("no trace id")
	sp.SetParentSpanID(pcommon.SpanID{9})
	require.NoError(t, p.ConsumeTraces(context.Background(), td))
	assert.Equal(t, 1, sink.SpanCount())
}

// A permanent refusal can never be delivered: it goes back to the caller.
func TestNextConsumerPermanentErrorIsReturned(t *testing.T) {
	set := processortest.NewNopSettings(Type)
	boom := consumererror.NewPermanent(errors.New("malformed"))
	p, err := newProcessor(set, defaultTestConfig(), consumertest.NewErr(boom))
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	require.ErrorIs(t, p.ConsumeTraces(context.Background(), buildOneTask()), boom)
}

func TestShutdownReportsDownstreamError(t *testing.T) {
	boom := errors.New("downstream gone")
	p, err := newProcessor(processortest.NewNopSettings(Type), defaultTestConfig(), consumertest.NewErr(boom))
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(buildOneTask())))
	require.ErrorIs(t, p.Shutdown(context.Background()), boom)
}

// Many goroutines send interleaved pieces of many traces; run with -race.
func TestConcurrentConsumers(t *testing.T) {
	cfg := defaultTestConfig()
	cfg.WaitDuration = 30 * time.Millisecond // idle sweeps run while batches arrive
	p, sink, _ := newTestProcessor(t, cfg)
	const traces = 300
	var wantSpans int
	inputs := make([][]ptrace.Traces, traces)
	for i := range traces {
		r := rand.New(rand.NewPCG(uint64(i), 11))
		tr := randomAgentTrace(r, uint64(1000+i))
		wantSpans += tr.SpanCount()
		inputs[i] = shuffleIntoBatches(r, tr, 1+r.IntN(5))
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < traces; i += 8 {
				for _, b := range inputs[i] {
					assert.NoError(t, p.ConsumeTraces(context.Background(), b))
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, p.Shutdown(context.Background()))
	// traces split by the short wait_duration come with re-emitted corrections: every
	// span once besides them
	_, counted := upserted(sink.AllTraces())
	assert.Len(t, counted, wantSpans)
}

func releasedBy(t *testing.T, tel *componenttest.Telemetry, reason string) int64 {
	t.Helper()
	m, err := tel.GetMetric("otelcol_processor_subagentmerge_traces_released")
	require.NoError(t, err, "traces_released was never recorded")
	return metrictest.SumInt64Where(t, m, "reason", reason)
}

func assertGauge(t *testing.T, tel *componenttest.Telemetry, name string, want int64) {
	t.Helper()
	m, err := tel.GetMetric(name)
	require.NoError(t, err)
	assert.Equal(t, want, metrictest.GaugeInt64(t, m))
}

// Hot spans are encoded once they have been held compact_after; release decodes them
// and the result is the same as without compaction.
func TestCompactionKeepsTheResult(t *testing.T) {
	cfg := defaultTestConfig()
	cfg.CompactAfter = 10 * time.Millisecond
	p, sink, _ := newTestProcessor(t, cfg)
	full := buildNested()
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(full)))
	s := &p.shards[shardIndex(full.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID())]
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.hot.head == nil
	}, 5*time.Second, 5*time.Millisecond, "the sweeper compacts hot spans")
	s.mu.Lock()
	for _, e := range s.traces {
		assert.NotEmpty(t, e.chunks)
		assert.Zero(t, e.hotSince)
	}
	s.mu.Unlock()
	// more spans make the trace hot again; the root completes it
	root := clone(full)
	root.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(sp ptrace.Span) bool { return !isLocalRoot(sp) })
	require.NoError(t, p.ConsumeTraces(context.Background(), root))
	require.NoError(t, p.Shutdown(context.Background()))
	want := run(t, defaultTestConfig(), buildNested())
	require.NoError(t, ptracetest.CompareTraces(want, canonical(sink.AllTraces()...)))
}
