package subagentmerge

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// A correction of a trace that comes while the request that released the trace is still
// on its way to the lane (placed, not queued yet) goes after that release, with or
// without storage: LangSmith gets the post, then the patch. Before, the correction
// could reach the lane first, and LangSmith dropped its patch of a run it did not have
// yet, then kept the post without the correction.
func TestQueuedCorrectionFollowsTheReleaseOnItsWay(t *testing.T) {
	for _, stored := range []bool{false, true} {
		ctx := context.Background()
		var p *subagentMerge
		var sink *consumertest.TracesSink
		if stored {
			p, sink = startWithStorage(t, storagetest.New(), queuedTestConfig())
		} else {
			p, sink, _ = newTestProcessor(t, queuedTestConfig())
		}
		hookReleased(p)
		full := buildOneTask()
		dispatcher := findChatWithCalls(t, full)
		require.NoError(t, p.ConsumeTraces(ctx, withoutRoot(full)))

		ps := newPause()
		done := make(chan error, 1)
		go func() { done <- p.ConsumeTraces(context.WithValue(ctx, pauseKey{}, ps), rootOf(full)) }()
		<-ps.reached // the root's request released the trace and has not queued it yet
		require.NoError(t, p.ConsumeTraces(ctx, versionOf(dispatcher, 2)))
		// whatever the lane has now it sends before the release is queued
		require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
		close(ps.release)
		require.NoError(t, <-done)
		require.Eventually(t, func() bool { return sink.SpanCount() >= full.SpanCount() }, 5*time.Second, time.Millisecond)
		require.NoError(t, p.Shutdown(ctx))

		runs, reposted := langsmithView(sink.AllTraces())
		assert.Empty(t, reposted, "stored=%v", stored)
		require.Len(t, runs, full.SpanCount(), "stored=%v", stored)
		v, _ := runs[dispatcher.SpanID()].Attributes().Get(testVersionKey)
		assert.Equal(t, int64(2), v.Int(), "stored=%v: the correction reached the run", stored)
	}
}

// lateOf is a copy of sp under span id {0xfe, n, i}, a child of parent.
func lateOf(sp ptrace.Span, parent pcommon.SpanID, n byte, i uint16) ptrace.Span {
	c := ptrace.NewSpan()
	sp.CopyTo(c)
	c.SetSpanID(pcommon.SpanID{0xfe, n, byte(i >> 8), byte(i)})
	c.SetParentSpanID(parent)
	return c
}

// Two calls with spans of a released trace reach its lane in the order they placed
// them, whichever is ready first: here a late span B, then B's correction, placed while
// the release is on its way, the correction with a whole send's worth of late spans
// besides, ready first. Before, the correction went on the lane first, alone in a send,
// and LangSmith dropped its patch of B, which it did not have yet. (Found by review.)
func TestQueuedCallsOfAReleasedTraceGoInTheOrderPlaced(t *testing.T) {
	ctx := context.Background()
	p, sink, _ := newTestProcessor(t, queuedTestConfig())
	hookReleased(p)
	p.tel.tb.ProcessorSubagentmergeLateSpans = pauseCounter{p.tel.tb.ProcessorSubagentmergeLateSpans}
	full := buildOneTask()
	root := rootOf(full).ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)

	ps1 := newPause()
	rDone := make(chan error, 1)
	go func() { rDone <- p.ConsumeTraces(context.WithValue(ctx, pauseKey{}, ps1), clone(full)) }()
	<-ps1.reached // the release is placed, not queued

	b := lateOf(root, root.SpanID(), 1, 0)
	f1 := ptrace.NewTraces()
	b.CopyTo(f1.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
	ps2 := newPause()
	f1Done := make(chan error, 1)
	go func() { f1Done <- p.ConsumeTraces(context.WithValue(ctx, pauseKey{}, ps2), f1) }()
	<-ps2.reached // B is placed, not queued

	f2 := versionOf(b, 2)
	spans := f2.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := range uint16(maxDeliverSpans - 1) {
		lateOf(root, root.SpanID(), 2, i).CopyTo(spans.AppendEmpty())
	}
	require.NoError(t, p.ConsumeTraces(ctx, f2)) // placed after B, ready first

	close(ps2.release)
	require.NoError(t, <-f1Done)
	close(ps1.release)
	require.NoError(t, <-rDone)
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 && sink.SpanCount() >= full.SpanCount()+maxDeliverSpans },
		5*time.Second, time.Millisecond)
	require.NoError(t, p.Shutdown(ctx))

	runs, reposted := langsmithView(sink.AllTraces())
	assert.Empty(t, reposted)
	require.Contains(t, runs, b.SpanID(), "B is posted")
	v, _ := runs[b.SpanID()].Attributes().Get(testVersionKey)
	assert.Equal(t, int64(2), v.Int(), "B's correction reached the run")
}

// A whole trace released by a call that was never answered (killed before it wrote
// anything), and a correction of it that was answered: after the restart the sender's
// retry of the first call posts every run, the dispatcher with the correction.
// (Found by review against a restart rule that took such a correction for one of a
// trace delivered before the kill.)
func TestQueuedCorrectionOfAReleaseNeverWrittenAfterRestart(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	p, _ := startWithStorage(t, st, queuedTestConfig())
	hookReleased(p)
	full := buildOneTask()
	dispatcher := findChatWithCalls(t, full)

	ps := newPause()
	done := make(chan error, 1)
	go func() { done <- p.ConsumeTraces(context.WithValue(ctx, pauseKey{}, ps), clone(full)) }()
	<-ps.reached // released, nothing of it written

	fDone := make(chan error, 1)
	go func() { fDone <- p.ConsumeTraces(ctx, versionOf(dispatcher, 2)) }()
	require.NoError(t, <-fDone, "the correction is answered: on disk")
	st.Fail(errors.New("killed")) // the first call's write never happens
	kill(p)
	close(ps.release)
	<-done
	st.Fail(nil)

	p2, sink2 := startWithStorage(t, st, queuedTestConfig())
	require.NoError(t, p2.ConsumeTraces(ctx, clone(full)), "the sender's retry of the call never answered")
	require.Eventually(t, func() bool { return p2.unsentSpans() == 0 && sink2.SpanCount() >= full.SpanCount() }, 5*time.Second, time.Millisecond)
	require.NoError(t, p2.Shutdown(ctx))

	runs, reposted := langsmithView(sink2.AllTraces())
	assert.Empty(t, reposted)
	assert.Len(t, runs, full.SpanCount(), "every run of the trace is posted")
	if d, ok := runs[dispatcher.SpanID()]; assert.True(t, ok, "the dispatcher is posted") {
		v, _ := d.Attributes().Get(testVersionKey)
		assert.Equal(t, int64(2), v.Int(), "with the correction")
	}
}

// A trace's order on its lane outlives its tombstone: here the tombstone is pushed out
// (num_traces' bound on remembered traces) while the release is on its way, and a
// correction that comes then still goes after the release. (Found by review.)
func TestQueuedOrderOutlivesTheTombstone(t *testing.T) {
	ctx := context.Background()
	cfg := queuedTestConfig()
	cfg.NumTraces = 64 // 64 tombstones a shard
	p, sink, _ := newTestProcessor(t, cfg)
	hookReleased(p)
	full := oneTaskN(1)
	tid := traceIDOf(full)
	dispatcher := findChatWithCalls(t, full)
	require.NoError(t, p.ConsumeTraces(ctx, withoutRoot(full)))

	ps := newPause()
	done := make(chan error, 1)
	go func() { done <- p.ConsumeTraces(context.WithValue(ctx, pauseKey{}, ps), rootOf(full)) }()
	<-ps.reached // released, not queued

	pushed := 0
	for n := uint64(2); pushed < p.maxTombstones; n++ {
		if td := oneTaskN(n); shardIndex(traceIDOf(td)) == shardIndex(tid) {
			require.NoError(t, p.ConsumeTraces(ctx, td))
			pushed++
		}
	}
	s := &p.shards[shardIndex(tid)]
	s.mu.Lock()
	_, gone := s.gone[tid]
	s.mu.Unlock()
	require.True(t, gone, "the tombstone is pushed out while the release is on its way")

	require.NoError(t, p.ConsumeTraces(ctx, versionOf(dispatcher, 2)))
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	close(ps.release)
	require.NoError(t, <-done)
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p.Shutdown(ctx))

	runs, reposted := langsmithView(sink.AllTraces())
	assert.Empty(t, reposted)
	require.Contains(t, runs, dispatcher.SpanID())
	v, _ := runs[dispatcher.SpanID()].Attributes().Get(testVersionKey)
	assert.Equal(t, int64(2), v.Int(), "the correction reached the run")
}

// Corrections of released traces with nothing of theirs on its way go in their lane's
// batch of the call, as the call's other spans do, not in a batch each: what waits on a
// lane (counted against its bound, sent in pieces) stays as it was. (Found by review.)
func TestQueuedCorrectionsWithNothingOnTheirWayShareTheLaneBatch(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	sink := new(consumertest.TracesSink)
	cfg := queuedTestConfig()
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, refusingNext(t, sink, func(pcommon.TraceID) bool { return down.Load() }))
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx, componenttest.NewNopHost()))
	same := tracesOfLane(0, 3)
	call := ptrace.NewTraces()
	for _, td := range same {
		require.NoError(t, p.ConsumeTraces(ctx, td))
		versionOf(findChatWithCalls(t, td), 2).ResourceSpans().MoveAndAppendTo(call.ResourceSpans())
	}
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	down.Store(true)
	require.NoError(t, p.ConsumeTraces(ctx, call))
	assert.Equal(t, int64(1), p.deliver.queues[0].n.Load(), "one batch on the lane for the call's corrections of three traces")
	down.Store(false)
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p.Shutdown(ctx))
}

// tracesOfLane returns n one-task traces that go by queued delivery's lane.
func tracesOfLane(lane, n int) []ptrace.Traces {
	var same []ptrace.Traces
	for i := uint64(1); len(same) < n; i++ {
		if td := oneTaskN(i); laneOf(traceIDOf(td)) == lane {
			same = append(same, td)
		}
	}
	return same
}
