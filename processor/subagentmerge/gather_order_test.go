package subagentmerge

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

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
