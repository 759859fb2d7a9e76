package subagentmerge

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

type storageHost struct {
	component.Host
	ext map[component.ID]component.Component
}

func (h storageHost) GetExtensions() map[component.ID]component.Component { return h.ext }

var storageID = component.MustNewID("file_storage")

func startWithStorage(t *testing.T, st *storagetest.Storage, cfg *Config) (*subagentMerge, *consumertest.TracesSink) {
	t.Helper()
	sink := new(consumertest.TracesSink)
	return startWithStorageTo(t, st, cfg, sink), sink
}

// startWithStorageTo starts a processor of cfg on st's storage, passing on to next.
func startWithStorageTo(t *testing.T, st *storagetest.Storage, cfg *Config, next consumer.Traces) *subagentMerge {
	t.Helper()
	cfg.Storage = &storageID
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), st.Host(storageID)))
	return p
}

// kill stops p the way kill -9 does, as far as the buffer goes: nothing it holds is
// released (the sweeper is stopped so the test leaks no goroutine).
func kill(p *subagentMerge) {
	close(p.stop)
	p.cancelSweep()
	<-p.done
	if p.queued {
		p.stopDeliver()
	}
	_ = p.tel.shutdown()
}

// A restart picks up where the killed process stopped: the spans it held (acknowledged)
// are read back from storage, and the root that comes after the restart completes the
// trace, merged exactly as without the crash.
func TestStorageRestartPicksUpTheBuffer(t *testing.T) {
	st := storagetest.New()
	full := buildParallel()
	p1, sink1 := startWithStorage(t, st, defaultTestConfig())
	require.NoError(t, p1.ConsumeTraces(context.Background(), withoutRoot(full)))
	require.Zero(t, sink1.SpanCount())
	require.Positive(t, st.Count("chunk/"), "held spans are on disk before the request is acknowledged")
	kill(p1)

	p2, sink2 := startWithStorage(t, st, defaultTestConfig())
	assert.Equal(t, int64(full.SpanCount()-1), p2.nSpans.Load(), "the restart holds what the killed process held")
	require.NoError(t, p2.ConsumeTraces(context.Background(), only(full, isLocalRoot)))
	require.Equal(t, full.SpanCount(), sink2.SpanCount())
	assertSubagent(t, spanByCalls(t, canonical(sink2.AllTraces()...), "call_a", "call_b"), genai.Usage{Input: 30, Output: 12}, 2, "call_a", "call_b")
	assert.Zero(t, st.Count("chunk/"), "a passed-on trace leaves nothing on disk")
	require.NoError(t, p2.Shutdown(context.Background()))
}

// A failing disk: the request is refused with a retryable error (never a silent drop),
// and its spans, still held in memory, go on when their trace is released.
func TestStorageFailureRefusesRetryably(t *testing.T) {
	st := storagetest.New()
	st.Fail(errors.New("no space left on device"))
	p, sink := startWithStorage(t, st, defaultTestConfig())
	in := withoutRoot(buildOneTask())
	n := in.SpanCount()
	err := p.ConsumeTraces(context.Background(), in)
	require.ErrorContains(t, err, "no space left on device")
	assert.False(t, consumererror.IsPermanent(err), "the OTLP receiver answers retryable")
	assert.Zero(t, st.Count("chunk/"))
	// the disk works again: the next write stores what the failed one could not
	st.Fail(nil)
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(buildParallel())))
	assert.Equal(t, 2, st.Count("chunk/"), "the failed chunk is written with the next one")
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Equal(t, n+buildParallel().SpanCount()-1, sink.SpanCount(), "nothing accepted in memory is lost")
}

// When the next consumer refuses a released trace, it waits in the unsent queue with its
// chunks on disk (the request that completed it is written too): a crash before it is
// delivered leaves it for the next start, and the low mark does not pass it.
func TestStorageKeepsRefusedTraces(t *testing.T) {
	st := storagetest.New()
	p := startWithStorageTo(t, st, defaultTestConfig(), consumertest.NewErr(errors.New("queue full")))
	full := buildOneTask()
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(full)))
	require.NoError(t, p.ConsumeTraces(context.Background(), only(full, isLocalRoot)), "in the processor's keeping")
	assert.Equal(t, int64(full.SpanCount()), p.unsent.spans.Load())
	assert.Positive(t, st.Count("chunk/"), "on disk until delivered")
	lowest, any := p.store.minLive()
	assert.True(t, any, "the unsent queue holds the low mark back")
	assert.Zero(t, lowest)
	kill(p)

	p2, sink2 := startWithStorage(t, st, defaultTestConfig())
	require.NoError(t, p2.Shutdown(context.Background()))
	assert.Equal(t, full.SpanCount(), sink2.SpanCount(), "the next start sends every span, once")
	assert.Zero(t, st.Count("chunk/"))
}

// One request's buffered spans of several traces are one chunk; it stays on disk until
// the last of those traces went on, across a restart too.
func TestStorageChunkOutlivesItsLastTrace(t *testing.T) {
	st := storagetest.New()
	a, b := buildParallel(), buildNested()
	req := withoutRoot(a)
	withoutRoot(b).ResourceSpans().MoveAndAppendTo(req.ResourceSpans())
	p1, _ := startWithStorage(t, st, defaultTestConfig())
	require.NoError(t, p1.ConsumeTraces(context.Background(), req))
	require.Equal(t, 1, st.Count("chunk/"), "one write for the request")
	kill(p1)

	p2, sink := startWithStorage(t, st, defaultTestConfig())
	require.NoError(t, p2.ConsumeTraces(context.Background(), only(a, isLocalRoot)))
	assert.Equal(t, a.SpanCount(), sink.SpanCount())
	assert.Equal(t, 1, st.Count("chunk/"), "the other trace still holds the chunk")
	require.NoError(t, p2.ConsumeTraces(context.Background(), only(b, isLocalRoot)))
	assert.Equal(t, a.SpanCount()+b.SpanCount(), sink.SpanCount())
	assert.Zero(t, st.Count("chunk/"))
	require.NoError(t, p2.Shutdown(context.Background()))
}

// A call whose pending caller was settled (its settled version counted) before a crash
// is not settled, nor counted, again after the restart: the settled version is stored
// with the ledger's chunk, and read over the first version.
func TestRestartDoesNotSettleACallTwice(t *testing.T) {
	in := buildParallel()
	st := storagetest.New()
	p1, sink1 := startWithStorage(t, st, streamTestConfig())
	for _, b := range realTime(in) {
		require.NoError(t, p1.ConsumeTraces(context.Background(), b))
	}
	_, counted1 := upserted(sink1.AllTraces())
	require.Len(t, counted1, in.SpanCount(), "before the crash: every span counted once")
	kill(p1)

	p2, sink2 := startWithStorage(t, st, streamTestConfig())
	require.NoError(t, p2.Shutdown(context.Background()))
	all := append(sink1.AllTraces(), sink2.AllTraces()...)
	_, counted := upserted(all)
	var twice []string
	seen := map[pcommon.SpanID]int{}
	for _, sp := range counted {
		seen[sp.SpanID()]++
		if seen[sp.SpanID()] == 2 {
			twice = append(twice, sp.SpanID().String())
		}
	}
	assert.Empty(t, twice, "counted twice")
	assert.Len(t, counted, in.SpanCount(), "every span counted once across the restart")
}

// A request's write fails and it is refused; the disk works again, and the sender's
// retry, all duplicates now, writes nothing of its own. It is answered only once what the
// failed write left is on disk: a kill -9 right after the answer loses nothing
// acknowledged (the sweeper writes it at most a second later). Hold mode, gather mode
// with queued delivery, and stream mode's ledgers.
func TestRetryIsAnsweredOnceTheFailedChunkIsOnDisk(t *testing.T) {
	for name, cfg := range map[string]func() *Config{"hold": defaultTestConfig, "queued": queuedTestConfig, "stream": streamTestConfig} {
		st := storagetest.New()
		p, _ := startWithStorage(t, st, cfg())
		a := buildOneTask()
		req := withoutRoot(a)
		st.Fail(errors.New("disk full"))
		require.Error(t, p.ConsumeTraces(context.Background(), clone(req)), "%s: refused, the write failed", name)
		st.Fail(nil)
		require.NoError(t, p.ConsumeTraces(context.Background(), clone(req)), "%s: the sender's retry", name)
		disk := diskNow(st) // kill -9 now
		kill(p)

		p2, sink2 := startWithStorage(t, disk, cfg())
		if name == "stream" {
			assert.Equal(t, req.SpanCount(), ledgerSpans(p2, traceIDOf(a)), "%s: the ledger is back whole", name)
			require.NoError(t, p2.Shutdown(context.Background()))
			continue
		}
		require.NoError(t, p2.ConsumeTraces(context.Background(), rootOf(a)))
		require.NoError(t, p2.Shutdown(context.Background()))
		got := spanCounts(sink2.AllTraces())
		for id := range spanIDSet(req) {
			assert.Equal(t, 1, got[id], "%s: acknowledged span %s once after the restart", name, id)
		}
	}
}

// diskNow is what st holds now, apart from st: what a process killed now leaves on disk.
func diskNow(st *storagetest.Storage) *storagetest.Storage {
	cp := storagetest.New()
	_ = st.Walk(context.Background(), func(k string, v []byte) ([]*storage.Operation, error) {
		_ = cp.Set(context.Background(), k, bytes.Clone(v))
		return nil, nil
	})
	return cp
}
