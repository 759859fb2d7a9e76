package subagentmerge

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// A ledger ends while the disk refuses writes: the deletion of its chunks waits for the
// next write. The disk works again, and the collector is stopped before the sweeper's
// next write: Shutdown makes that write, so a restart does not rebuild the ended
// ledger, whose end settled and counted its calls, and settle them again.
func TestShutdownWritesWhatAFailedWriteLeft(t *testing.T) {
	bg := context.Background()
	run := withoutRoot(buildParallel())
	id := traceIDOf(run)
	st := storagetest.New()
	cfg := streamTestConfig()
	p, g := gated(t, cfg, st)
	clock := stepClock(p)
	require.NoError(t, p.ConsumeTraces(bg, clone(run)))
	require.Positive(t, pendingCalls(p, run))

	st.Fail(errors.New("no space left on device"))
	clock.Add(int64(cfg.WaitDuration) + 1)
	// the end's re-emissions are taken; deleting the ledger's chunks fails (it waits
	// for the next write, logged)
	require.NoError(t, p.sweepStream(bg, clock.Load()))
	require.Nil(t, liveLedger(p, id), "ended")
	require.Positive(t, st.Count(prefixStream+"chunk/"))
	st.Fail(nil)
	require.NoError(t, p.Shutdown(bg))
	require.Zero(t, st.Count(prefixStream+"chunk/"), "the ended ledger's chunks are deleted at shutdown")

	p2, sink2 := startWithStorage(t, st, streamTestConfig())
	require.Nil(t, liveLedger(p2, id), "the restart does not rebuild the ended ledger")
	require.NoError(t, p2.sweepStream(bg, p2.now()+int64(cfg.WaitDuration)*2))
	require.NoError(t, p2.Shutdown(bg))
	_, counted := upserted(append(g.sink.AllTraces(), sink2.AllTraces()...))
	assertEachCountedOnce(t, counted, run)
}

// The sweeper's send of an idle ledger's last re-emissions waits at the next consumer
// until its context is done (a sending queue that blocks when full). Shutdown cancels
// it instead of waiting for ever: the refused re-emissions go out at shutdown, once.
func TestShutdownDoesNotWaitOnABlockedSweep(t *testing.T) {
	bg := context.Background()
	run := withoutRoot(buildParallel())
	var armed atomic.Bool
	blocked := make(chan struct{})
	sink := new(consumertest.TracesSink)
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if armed.CompareAndSwap(true, false) {
			close(blocked)
			<-ctx.Done()
			return ctx.Err()
		}
		return sink.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	cfg := streamTestConfig()
	cfg.WaitDuration = 20 * time.Millisecond
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, next)
	require.NoError(t, err)
	require.NoError(t, p.Start(bg, nil))
	require.NoError(t, p.ConsumeTraces(bg, clone(run)))
	armed.Store(true)
	<-blocked // the sweeper ends the idle ledger and waits

	done := make(chan error, 1)
	go func() { done <- p.Shutdown(bg) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown waits on the sweeper's blocked send")
	}
	_, counted := upserted(sink.AllTraces())
	assertEachCountedOnce(t, counted, run)
}
