package subagentmerge

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// A correction of a trace the sink already had, still waiting to be sent at a kill -9
// (twice here), goes after the restart as what it was: an update of that span (LangSmith patches the
// run), at once. Before, it was read back as the start of a trace never seen, held
// until wait_duration and then sent as a first emission, which LangSmith ignores as a
// repeat of the post: the correction never reached it. The trace counts as released
// after the restart too, so a later correction is an update, an older one a repeat, and
// a span it never had goes on at once.
func TestQueuedCorrectionWaitingAtRestartGoesAsAnUpdate(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	var down atomic.Bool
	p := startWithStorageTo(t, st, queuedTestConfig(), refusingNext(t, sink, func(pcommon.TraceID) bool { return down.Load() }))
	full := buildOneTask()
	dispatcher := findChatWithCalls(t, full)
	require.NoError(t, p.ConsumeTraces(ctx, full)) // complete: released and delivered
	require.Eventually(t, func() bool { return sink.SpanCount() == full.SpanCount() }, 5*time.Second, 2*time.Millisecond)
	down.Store(true)
	require.NoError(t, p.ConsumeTraces(ctx, versionOf(dispatcher, 2)))
	require.Eventually(t, func() bool { return p.unsentSpans() == 1 }, 5*time.Second, 2*time.Millisecond)
	kill(p)
	// killed again before it could send it: the next process does the same
	p1 := startWithStorageTo(t, st, queuedTestConfig(), refusingNext(t, sink, func(pcommon.TraceID) bool { return true }))
	require.Eventually(t, func() bool { return p1.unsentSpans() == 1 }, 5*time.Second, 2*time.Millisecond)
	kill(p1)

	p2, sink2 := startWithStorage(t, st, queuedTestConfig())
	require.Eventually(t, func() bool { return sink2.SpanCount() == 1 }, 5*time.Second, 2*time.Millisecond,
		"the waiting correction goes at once, not after wait_duration")
	require.NoError(t, p2.ConsumeTraces(ctx, versionOf(dispatcher, 3)))
	require.NoError(t, p2.ConsumeTraces(ctx, versionOf(dispatcher, 1)))
	late := ptrace.NewSpan()
	dispatcher.CopyTo(late)
	late.SetSpanID(pcommon.SpanID{0xfe, 2})
	one := ptrace.NewTraces()
	late.CopyTo(one.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
	require.NoError(t, p2.ConsumeTraces(ctx, one))
	require.Eventually(t, func() bool { return sink2.SpanCount() == 3 }, 5*time.Second, 2*time.Millisecond,
		"the later correction and the late span go at once")
	require.NoError(t, p2.Shutdown(ctx))

	var versions []int64
	for sp := range spaniter.In(sink2.AllTraces()) {
		switch sp.SpanID() {
		case dispatcher.SpanID():
			assert.True(t, genai.IsReemission(sp.Attributes()), "an update of the span the sink has, not a second first emission")
			v, _ := sp.Attributes().Get(testVersionKey)
			versions = append(versions, v.Int())
		case late.SpanID():
			assert.False(t, genai.IsReemission(sp.Attributes()))
		default:
			t.Errorf("span %s sent again after the restart", sp.SpanID())
		}
	}
	assert.Equal(t, []int64{2, 3}, versions, "the waiting correction, then the later one; the older one is a repeat")
	assert.Zero(t, st.Count("chunk/"), "nothing left on disk once delivered")
}
