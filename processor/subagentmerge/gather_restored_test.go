package subagentmerge

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// restartSink is LangSmith behind the exporter, across restarts (one sink): the first
// send blocks until gate is closed; while patchDown, a send with a re-emission is
// refused (retryably) and nothing of it is taken.
type restartSink struct {
	sink      *consumertest.TracesSink
	gate      chan struct{}
	entered   chan struct{}
	once      sync.Once
	patchDown atomic.Bool
}

func newRestartSink() *restartSink {
	return &restartSink{sink: new(consumertest.TracesSink), gate: make(chan struct{}), entered: make(chan struct{})}
}

func (r *restartSink) consumer(t *testing.T) consumer.Traces {
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		r.once.Do(func() { close(r.entered) })
		select {
		case <-r.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.patchDown.Load() {
			for sp := range spaniter.All(td) {
				if genai.IsReemission(sp.Attributes()) {
					return errors.New("LangSmith is down for patches")
				}
			}
		}
		return r.sink.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	return next
}

// The next consumer took a trace (LangSmith has its runs), but the disk failed the
// transaction that deletes its chunks and records its delivery (forgetSent). A
// correction of it, acknowledged and on disk before that, still waits (LangSmith refuses
// it for now). The process dies while the disk fails. The restart does not know the
// trace went out: it releases it again from its chunks, with the correction on the same
// lane. Coalesced into one first emission with the correction's content, they would be
// a second POST of the run, which LangSmith ignores (409), and the correction would
// never reach the run: what is read back at start keeps its first emission, and the
// correction goes as an update.
func TestQueuedDeliveryUnrecordedCorrectionReachesTheRunAfterRestart(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		t.Run(map[bool]string{false: "kill", true: "shutdown"}[graceful], func(t *testing.T) {
			unrecordedThenCorrection(t, graceful)
		})
	}
}

func unrecordedThenCorrection(t *testing.T, graceful bool) {
	ctx := context.Background()
	st := storagetest.New()
	r := newRestartSink()
	p := startWithStorageTo(t, st, queuedTestConfig(), r.consumer(t))
	full := buildOneTask()
	dispatcher := findChatWithCalls(t, full)
	require.NoError(t, p.ConsumeTraces(ctx, clone(full))) // complete: released, queued
	<-r.entered                                           // the lane sends it: LangSmith is slow
	require.NoError(t, p.ConsumeTraces(ctx, versionOf(dispatcher, 2)), "acknowledged: on disk")
	require.Eventually(t, func() bool { return p.unsentSpans() == int64(full.SpanCount()+1) }, 5*time.Second, time.Millisecond)

	st.Fail(errors.New("disk full"))
	r.patchDown.Store(true)
	close(r.gate) // LangSmith takes the trace (POSTs); the deletion and record fail
	require.Eventually(t, func() bool {
		return r.sink.SpanCount() == full.SpanCount() && p.unsentSpans() == 1 && p.store.waiting.Load()
	}, 5*time.Second, time.Millisecond)
	assert.Zero(t, st.Count("sent/"), "the delivery's record did not reach the disk")
	if graceful {
		defer func(d time.Duration) { shutdownSendTimeout = d }(shutdownSendTimeout)
		shutdownSendTimeout = 50 * time.Millisecond
		assert.Error(t, p.Shutdown(ctx), "the flush fails: the disk still fails")
	} else {
		kill(p) // kill -9 while the disk fails
	}

	st.Fail(nil)
	r.patchDown.Store(false)
	p2 := startWithStorageTo(t, st, queuedTestConfig(), r.consumer(t))
	require.Eventually(t, func() bool { return p2.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p2.Shutdown(ctx))

	runs, reposted := langsmithView(r.sink.AllTraces())
	t.Logf("runs posted again after the restart (409, harmless): %d", len(reposted))
	v, _ := runs[dispatcher.SpanID()].Attributes().Get(testVersionKey)
	assert.Equal(t, int64(2), v.Int(), "the acknowledged correction reached the run")
	assert.Zero(t, st.Count("chunk/"))
}

// The same through the buffer: the trace went out incomplete (idle), so the restart holds
// its chunks again as an incomplete trace and takes the waiting correction into it as a
// later version; released, the first emission goes as it is and the correction as an
// update.
func TestQueuedIdleDeliveryUnrecordedCorrectionReachesTheRunAfterRestart(t *testing.T) {
	ctx := context.Background()
	cfg := func() *Config {
		c := queuedTestConfig()
		c.WaitDuration = 30 * time.Millisecond
		c.SettleTime = 0
		return c
	}
	st := storagetest.New()
	r := newRestartSink()
	p := startWithStorageTo(t, st, cfg(), r.consumer(t))
	full := buildOneTask()
	part := withoutRoot(full)
	dispatcher := findChatWithCalls(t, full)
	require.NoError(t, p.ConsumeTraces(ctx, clone(part))) // held, then released idle
	<-r.entered
	require.NoError(t, p.ConsumeTraces(ctx, versionOf(dispatcher, 2)), "acknowledged: on disk")
	require.Eventually(t, func() bool { return p.unsentSpans() == int64(part.SpanCount()+1) }, 5*time.Second, time.Millisecond)

	st.Fail(errors.New("disk full"))
	r.patchDown.Store(true)
	close(r.gate)
	require.Eventually(t, func() bool {
		return r.sink.SpanCount() == part.SpanCount() && p.unsentSpans() == 1 && p.store.waiting.Load()
	}, 5*time.Second, time.Millisecond)
	kill(p)

	st.Fail(nil)
	r.patchDown.Store(false)
	p2 := startWithStorageTo(t, st, cfg(), r.consumer(t))
	require.Eventually(t, func() bool { return p2.nTraces.Load() == 0 && p2.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p2.Shutdown(ctx))

	assert.Equal(t, int64(2), runVersion(r.sink.AllTraces(), dispatcher.SpanID()), "the acknowledged correction reached the run")
}

// The same with a working disk: the record makes the restart send the correction as an
// update of a trace that went out.
func TestQueuedDeliveryRecordedCorrectionAfterRestart(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	r := newRestartSink()
	p := startWithStorageTo(t, st, queuedTestConfig(), r.consumer(t))
	full := buildOneTask()
	dispatcher := findChatWithCalls(t, full)
	require.NoError(t, p.ConsumeTraces(ctx, clone(full)))
	<-r.entered
	require.NoError(t, p.ConsumeTraces(ctx, versionOf(dispatcher, 2)))
	require.Eventually(t, func() bool { return p.unsentSpans() == int64(full.SpanCount()+1) }, 5*time.Second, time.Millisecond)
	r.patchDown.Store(true)
	close(r.gate)
	require.Eventually(t, func() bool { return r.sink.SpanCount() == full.SpanCount() && p.unsentSpans() == 1 }, 5*time.Second, time.Millisecond)
	kill(p)
	r.patchDown.Store(false)
	p2 := startWithStorageTo(t, st, queuedTestConfig(), r.consumer(t))
	require.Eventually(t, func() bool { return p2.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p2.Shutdown(ctx))
	runs, reposted := langsmithView(r.sink.AllTraces())
	assert.Empty(t, reposted)
	v, _ := runs[dispatcher.SpanID()].Attributes().Get(testVersionKey)
	assert.Equal(t, int64(2), v.Int())
}

// flakyLow fails every write while fail is set, except the low mark's own Set (a disk
// that fails batches but not a one-key write: advanceLow goes on while the deletions,
// markers and records it assumes wait in p.retry).
type flakyLow struct {
	storage.Client
	fail atomic.Bool
}

func (f *flakyLow) Set(ctx context.Context, k string, v []byte) error {
	if f.fail.Load() && k != keyLow {
		return errors.New("disk full")
	}
	return f.Client.Set(ctx, k, v)
}

func (f *flakyLow) Delete(ctx context.Context, k string) error {
	if f.fail.Load() {
		return errors.New("disk full")
	}
	return f.Client.Delete(ctx, k)
}

func (f *flakyLow) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if f.fail.Load() {
		for _, op := range ops {
			if op.Type != storage.Get {
				return errors.New("disk full")
			}
		}
	}
	return f.Client.Batch(ctx, ops...)
}

// random traces through queued gather mode, the next consumer refusing now and then,
// the disk failing at random (the low mark still moving), the process killed while the
// disk may still fail. Every acknowledged span reaches the sink after the restart (a
// refused request is sent again by its sender, after the restart).
func TestLowMarkNeverSkipsAcknowledgedOnAFailingDisk(t *testing.T) {
	ctx := context.Background()
	for _, mk := range []func() *Config{queuedTestConfig,
		func() *Config { c := queuedTestConfig(); c.NumTraces = 2; return c },
		func() *Config {
			c := queuedTestConfig()
			c.WaitDuration = 20 * time.Millisecond
			c.SettleTime = 0
			return c
		}} {
		for seed := uint64(1); seed <= 10; seed++ {
			r := rand.New(rand.NewPCG(seed, 77))
			reqs, all, cut := randomRequests(r, seed)
			st := storagetest.New()
			var mu sync.Mutex
			got := map[pcommon.SpanID]int{}
			var refuse atomic.Bool
			refuse.Store(seed%2 == 0)
			calls := 0
			next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if refuse.Load() && calls%3 == 1 {
					return errors.New("down")
				}
				for sp := range spaniter.All(td) {
					got[sp.SpanID()]++
				}
				return nil
			})
			require.NoError(t, err)
			p1 := startWithStorageTo(t, st, mk(), next)
			fl := &flakyLow{Client: p1.store.client}
			p1.store.mu.Lock()
			p1.store.client = fl
			p1.store.mu.Unlock()
			var again []ptrace.Traces // refused: its sender sends it again
			for _, req := range reqs[:cut] {
				fl.fail.Store(r.IntN(3) == 0)
				if err := p1.ConsumeTraces(ctx, clone(req)); err != nil {
					again = append(again, req)
				}
				time.Sleep(time.Duration(r.IntN(3)) * 5 * time.Millisecond)
				_ = p1.store.advanceLow(ctx)
			}
			time.Sleep(time.Duration(r.IntN(3)) * 20 * time.Millisecond)
			_ = p1.store.advanceLow(ctx)
			kill(p1)
			refuse.Store(false)
			p2 := startWithStorageTo(t, st, mk(), next)
			for _, req := range append(again, reqs[cut:]...) {
				require.NoError(t, p2.ConsumeTraces(ctx, clone(req)))
			}
			require.NoError(t, p2.Shutdown(ctx))
			mu.Lock()
			for id := range all {
				assert.GreaterOrEqual(t, got[id], 1, "seed %d (cut %d of %d): span %s lost", seed, cut, len(reqs), id)
			}
			mu.Unlock()
		}
	}
}

// Shutdown with a next consumer that blocks until its context ends (an exporter
// retrying a vendor that is down), while a released trace, its correction and a held
// trace wait, and the disk failing: Shutdown returns within its bound, and the restart
// sends everything acknowledged, the correction as the run's last state.
func TestQueuedShutdownWithBlockingNextLosesNothing(t *testing.T) {
	for _, diskFails := range []bool{false, true} {
		defer func(d time.Duration) { shutdownSendTimeout = d }(shutdownSendTimeout)
		shutdownSendTimeout = 50 * time.Millisecond
		ctx := context.Background()
		st := storagetest.New()
		blocking, err := consumer.NewTraces(func(ctx context.Context, _ ptrace.Traces) error {
			<-ctx.Done()
			return ctx.Err()
		})
		require.NoError(t, err)
		p := startWithStorageTo(t, st, queuedTestConfig(), blocking)
		a, b := oneTaskN(1), oneTaskN(2)
		dispatcher := findChatWithCalls(t, a)
		require.NoError(t, p.ConsumeTraces(ctx, clone(a)))
		require.NoError(t, p.ConsumeTraces(ctx, withoutRoot(b)))
		require.NoError(t, p.ConsumeTraces(ctx, versionOf(dispatcher, 2)))
		if diskFails {
			st.Fail(errors.New("disk full"))
		}
		start := time.Now()
		_ = p.Shutdown(ctx)
		assert.Less(t, time.Since(start), 3*time.Second, "Shutdown waited for the blocking consumer")
		st.Fail(nil)

		p2, sink := startWithStorage(t, st, queuedTestConfig())
		require.NoError(t, p2.Shutdown(ctx)) // b goes at shutdown, incomplete
		runs, reposted := langsmithView(sink.AllTraces())
		assert.Empty(t, reposted, "diskFails=%v", diskFails)
		for id := range spanIDSet(a) {
			assert.Contains(t, runs, id, "diskFails=%v: a's span lost", diskFails)
		}
		for id := range spanIDSet(withoutRoot(b)) {
			assert.Contains(t, runs, id, "diskFails=%v: b's span lost", diskFails)
		}
		v, _ := runs[dispatcher.SpanID()].Attributes().Get(testVersionKey)
		assert.Equal(t, int64(2), v.Int(), "diskFails=%v", diskFails)
		assert.Zero(t, st.Count("chunk/"))
	}
}

// The same without a failing disk: the exporter took the trace (LangSmith has the runs)
// but the process died before the send returned (kill -9 mid-send), with the correction
// waiting behind it on the lane. The restart sends the trace again: LangSmith ignores
// its posts (409) and takes the correction's patch.
func TestQueuedTakenNotAnsweredCorrectionReachesTheRunAfterRestart(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	dispatcher := correctionBehindAnUnansweredSend(t, st, sink)

	p2 := startWithStorageTo(t, st, queuedTestConfig(), sink)
	require.Eventually(t, func() bool { return p2.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p2.Shutdown(ctx))
	assert.Equal(t, int64(2), runVersion(sink.AllTraces(), dispatcher.SpanID()), "the acknowledged correction reached the run")
}

// A send read back at start, refused in part, is joined into one batch (joinHead) that
// still keeps its spans' first emissions apart from their newest versions: sent again
// with a fresh correction behind it, the repeated first emission is not coalesced with
// the correction into one first emission (a post LangSmith ignores).
func TestQueuedRestoredSendRefusedInPartKeepsItsFirstEmissions(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	dispatcher := correctionBehindAnUnansweredSend(t, st, sink)

	inFirst, proceed := make(chan struct{}), make(chan struct{})
	calls := 0
	var mu sync.Mutex
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n > 1 {
			return sink.ConsumeTraces(ctx, td)
		}
		close(inFirst)
		<-proceed
		// a sending queue that took one piece: one span other than the dispatcher's
		rest := ptrace.NewTraces()
		td.CopyTo(rest)
		taken := ptrace.NewTraces()
		done := false
		spaniter.RemoveIf(rest, func(sp ptrace.Span) bool {
			if done || sp.SpanID() == dispatcher.SpanID() {
				return false
			}
			done = true
			sp.CopyTo(taken.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
			return true
		})
		_ = sink.ConsumeTraces(ctx, taken)
		return consumererror.NewTraces(errors.New("sending queue full"), rest)
	})
	require.NoError(t, err)
	p2 := startWithStorageTo(t, st, queuedTestConfig(), next)
	<-inFirst
	require.NoError(t, p2.ConsumeTraces(ctx, versionOf(dispatcher, 3)), "a fresh correction")
	close(proceed)
	require.Eventually(t, func() bool { return p2.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p2.Shutdown(ctx))
	assert.Equal(t, int64(3), runVersion(sink.AllTraces(), dispatcher.SpanID()), "the correction reached the run")
}

// Inline delivery: the idle release of a trace is taken by the next consumer, the answer
// never comes (kill -9); a correction, refused meanwhile, waits on disk. The restart
// holds the trace's chunks again with the correction as a later version; released, the
// first emission goes as it is and the correction as an update, which reaches the run.
func TestInlineRestoredCorrectionReachesTheRun(t *testing.T) {
	ctx := context.Background()
	cfg := func() *Config {
		c := gatherTestConfig()
		c.WaitDuration = 30 * time.Millisecond
		c.SettleTime = 0
		return c
	}
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	entered := make(chan struct{})
	var once sync.Once
	var first atomic.Bool
	first.Store(true)
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		for sp := range spaniter.All(td) {
			if genai.IsReemission(sp.Attributes()) {
				return errors.New("LangSmith is down for patches")
			}
		}
		if first.CompareAndSwap(true, false) {
			_ = sink.ConsumeTraces(ctx, td) // taken ...
			once.Do(func() { close(entered) })
			<-ctx.Done() // ... never answered
			return ctx.Err()
		}
		return sink.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	p := startWithStorageTo(t, st, cfg(), next)
	full := buildOneTask()
	part := withoutRoot(full)
	dispatcher := findChatWithCalls(t, full)
	require.NoError(t, p.ConsumeTraces(ctx, clone(part))) // held, released idle
	<-entered
	require.NoError(t, p.ConsumeTraces(ctx, versionOf(dispatcher, 2)), "acknowledged: on disk")
	kill(p)

	p2, sink2 := startWithStorage(t, st, cfg())
	require.Eventually(t, func() bool { return p2.nTraces.Load() == 0 && p2.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p2.Shutdown(ctx))
	assert.Equal(t, int64(2), runVersion(append(sink.AllTraces(), sink2.AllTraces()...), dispatcher.SpanID()), "the acknowledged correction reached the run")
}

// correctionBehindAnUnansweredSend runs a queued processor on st whose next consumer
// takes the one-task trace into sink and never answers (LangSmith took it; the process
// dies before the answer comes back), acknowledges a correction (version 2) of its
// dispatcher behind it on the lane, and kills the process. It returns the dispatcher.
func correctionBehindAnUnansweredSend(t *testing.T, st *storagetest.Storage, sink *consumertest.TracesSink) ptrace.Span {
	t.Helper()
	ctx := context.Background()
	entered := make(chan struct{})
	var once sync.Once
	first, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		_ = sink.ConsumeTraces(ctx, td)
		once.Do(func() { close(entered) })
		<-ctx.Done()
		return ctx.Err()
	})
	require.NoError(t, err)
	p := startWithStorageTo(t, st, queuedTestConfig(), first)
	full := buildOneTask()
	dispatcher := findChatWithCalls(t, full)
	require.NoError(t, p.ConsumeTraces(ctx, clone(full)))
	<-entered
	require.NoError(t, p.ConsumeTraces(ctx, versionOf(dispatcher, 2)), "acknowledged: on disk")
	kill(p)
	return dispatcher
}

// runVersion is the version (testVersionKey) LangSmith keeps of span id's run, given
// everything sent to it.
func runVersion(tds []ptrace.Traces, id pcommon.SpanID) int64 {
	runs, _ := langsmithView(tds)
	v, _ := runs[id].Attributes().Get(testVersionKey)
	return v.Int()
}
