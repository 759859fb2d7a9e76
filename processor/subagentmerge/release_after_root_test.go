package subagentmerge

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// untracedTask is an OpenLLMetry-shaped run whose `task` tool is never traced: the lead
// asks for the tool call, the subagent's model call sits under a span that never comes.
func untracedTask() ptrace.Traces {
	b := newTraceBuilder(120)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(30, 3), "call_untraced")
	b.chat(pcommon.SpanID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4}, usage(7, 2)) // its parent is never sent
	b.chat(lead, usage(40, 4))
	return b.td
}

// With release_after_root, a trace still naming a missing span goes that long after its
// root arrived (released "settled"), not wait_duration after its last span; without it,
// it is held.
func TestReleaseAfterRootReleasesAnUntracedTask(t *testing.T) {
	cfg := defaultTestConfig()
	cfg.WaitDuration = time.Hour
	cfg.ReleaseAfterRoot = 40 * time.Millisecond
	p, sink, tel := newTestProcessor(t, cfg)
	start := time.Now()
	require.NoError(t, p.ConsumeTraces(context.Background(), untracedTask()))
	assert.Zero(t, sink.SpanCount(), "held until release_after_root")
	require.Eventually(t, func() bool { return sink.SpanCount() == 4 }, 5*time.Second, 2*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), cfg.ReleaseAfterRoot)
	assert.Equal(t, int64(1), releasedBy(t, tel, "settled"))
	require.NoError(t, p.Shutdown(context.Background()))

	cfg.ReleaseAfterRoot = 0
	held, heldSink, heldTel := newTestProcessor(t, cfg)
	require.NoError(t, held.ConsumeTraces(context.Background(), untracedTask()))
	time.Sleep(200 * time.Millisecond) // five times the release above; wait_duration is an hour
	assert.Zero(t, heldSink.SpanCount(), "without release_after_root the trace waits for its missing parent")
	require.NoError(t, held.Shutdown(context.Background()))
	assert.Equal(t, 4, heldSink.SpanCount())
	assert.Equal(t, int64(1), releasedBy(t, heldTel, "shutdown"))
}

// A subagent that arrives after the early release (another process flushing later) is
// merged from the trace's record, and its dispatcher re-emitted `corrected`: the last
// version at an upserting sink is the one a complete trace gives.
func TestReleaseAfterRootCorrectsALateSubtree(t *testing.T) {
	full := buildOneTask()
	all := flatSpans(full)
	var first, later []arrivalSpan
	for _, it := range all {
		name, _ := it.sp.Attributes().Get(genai.AttrToolName)
		if underTask(all, it.sp) || name.Str() == genai.TaskToolName {
			later = append(later, it)
		} else {
			first = append(first, it)
		}
	}
	require.NotEmpty(t, later)
	cfg := defaultTestConfig()
	cfg.WaitDuration = time.Hour
	cfg.ReleaseAfterRoot = 30 * time.Millisecond
	p, sink, tel := newTestProcessor(t, cfg)
	require.NoError(t, p.ConsumeTraces(context.Background(), batchOf(first)))
	require.Eventually(t, func() bool { return sink.SpanCount() == len(first) }, 5*time.Second, 2*time.Millisecond)
	assert.Equal(t, int64(1), releasedBy(t, tel, "settled"))
	require.NoError(t, p.ConsumeTraces(context.Background(), batchOf(later)))
	require.NoError(t, p.Shutdown(context.Background()))

	got := canonical(lastVersions(sink.AllTraces()...)...)
	want := run(t, defaultTestConfig(), buildOneTask())
	assertSubagent(t, spanByCalls(t, got, "call_task_1"), genai.Usage{Input: 10, Output: 5}, 1, "call_task_1")
	assertSubagent(t, spanByCalls(t, want, "call_task_1"), genai.Usage{Input: 10, Output: 5}, 1, "call_task_1")
	var corrected bool
	for _, td := range sink.AllTraces() {
		for sp := range spaniter.All(td) {
			if v, ok := sp.Attributes().Get(genai.AttrMergeStatus); ok && v.Str() == genai.MergeCorrected {
				corrected = true
			}
		}
	}
	assert.True(t, corrected, "the dispatcher went out again marked corrected")
}

// settle_time and release_after_root are two delays after a root: a trace due sooner
// goes sooner even when it started settling after one due later in its shard.
func TestSettlingKeepsDueOrderAcrossBothDelays(t *testing.T) {
	unannounced := func(no uint64) ptrace.Traces { // settles: settle_time after its root
		b := newTraceBuilder(no)
		b.chat(b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID(), usage(1, 1))
		return b.td
	}
	// a trace number in the same shard as the settling one
	first := unannounced(500)
	shard := shardIndex(first.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID())
	var second ptrace.Traces
	var secondID pcommon.TraceID
	for no := uint64(501); ; no++ {
		b := newTraceBuilder(no)
		lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
		b.chat(lead, usage(2, 2), "call_missing") // its tool span never comes
		if shardIndex(b.tid) == shard {
			second, secondID = b.td, b.tid
			break
		}
	}
	cfg := defaultTestConfig()
	cfg.WaitDuration = time.Hour
	cfg.SettleTime = 10 * time.Second
	cfg.ReleaseAfterRoot = 20 * time.Millisecond
	p, sink, _ := newTestProcessor(t, cfg)
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	require.NoError(t, p.ConsumeTraces(context.Background(), first))
	require.NoError(t, p.ConsumeTraces(context.Background(), second))
	require.Eventually(t, func() bool { return sink.SpanCount() == 2 }, 5*time.Second, 2*time.Millisecond,
		"the trace due after release_after_root does not wait behind the one due after settle_time")
	for sp := range spaniter.All(sink.AllTraces()[0]) {
		assert.Equal(t, secondID, sp.TraceID())
	}
}

// A trace whose tombstone a burst of later releases pushed out (the count bound, long
// before late_span_window ends: a sender's retries after an outage) is still known as
// released by its id: a late span of it goes on in its own call, marked late, instead of
// waiting as the start of a new trace (its root went out with the release) until
// wait_duration. Past the ids' own bound it is held as a new trace again.
func TestLateSpanAfterItsTombstoneWasPushedOutGoesOn(t *testing.T) {
	ctx := context.Background()
	cfg := defaultTestConfig()
	cfg.SettleTime = 0 // root and every parent present: released at once
	sink := new(consumertest.TracesSink)
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, sink)
	require.NoError(t, err)
	p.maxTombstones = 4 // before Start: the sweeper reads it
	require.NoError(t, p.Start(ctx, componenttest.NewNopHost()))

	b := newTraceBuilder(1)
	root := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(root, usage(1, 1))
	lateID := b.tool(root, "web_search", "call_1").SpanID()
	isLate := func(sp ptrace.Span) bool { return sp.SpanID() == lateID }
	require.NoError(t, p.ConsumeTraces(ctx, only(b.td, func(sp ptrace.Span) bool { return !isLate(sp) })))
	require.Zero(t, p.nSpans.Load(), "released complete")

	// releases of other traces in the same shard push its tombstone out
	shard := &p.shards[shardIndex(b.tid)]
	n := uint64(1)
	releaseOthers := func(k int) {
		for pushed := 0; pushed < k; {
			n++
			o := newTraceBuilder(n)
			if shardIndex(o.tid) != shardIndex(b.tid) {
				continue
			}
			o.agent(pcommon.SpanID{}, genai.LeadAgentName)
			require.NoError(t, p.ConsumeTraces(ctx, o.td))
			pushed++
		}
	}
	releaseOthers(p.maxTombstones)
	shard.mu.Lock()
	require.Nil(t, shard.released[b.tid], "its tombstone was pushed out")
	shard.mu.Unlock()

	lateSpan := only(b.td, isLate)
	require.NoError(t, p.ConsumeTraces(ctx, lateSpan))
	assert.Zero(t, p.nSpans.Load(), "not held")
	var out []ptrace.Span
	for sp := range spaniter.In(sink.AllTraces()) {
		if isLate(sp) {
			out = append(out, sp)
		}
	}
	require.Len(t, out, 1, "passed on in its call")
	status, _ := out[0].Attributes().Get(genai.AttrMergeStatus)
	assert.Equal(t, genai.MergeLate, status.Str())

	// past goneIDsPerTombstone times the tombstones, its id goes too
	releaseOthers(goneIDsPerTombstone * p.maxTombstones)
	require.NoError(t, p.ConsumeTraces(ctx, only(b.td, isLate)))
	assert.Equal(t, int64(1), p.nSpans.Load(), "held as the start of a new trace")
	shard.mu.Lock()
	assert.LessOrEqual(t, shard.goneOrder.len(), goneIDsPerTombstone*p.maxTombstones)
	assert.Len(t, shard.gone, shard.goneOrder.len())
	shard.mu.Unlock()
	require.NoError(t, p.Shutdown(ctx))
}
