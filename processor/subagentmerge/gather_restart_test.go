package subagentmerge

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// A correction of a trace the sink already had, still waiting to be sent at a kill -9
// (twice here), goes after the restart as what it was: an update of that span (LangSmith
// patches the run), at once. Before, it was read back as the start of a trace never
// seen, held until wait_duration and then sent as a first emission, which LangSmith
// ignores as a repeat of the post: the correction never reached it. The trace counts as
// delivered after the restart too (the delivery is on disk, with the deletion of what
// it sent), so a later correction is an update, an older one a repeat, and a span it
// never had goes on at once.
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

// After a restart, a correction of any span of a trace delivered before it is an update,
// not only of the spans that had one waiting: here the lead agent's run, whose first
// correction comes after the restart. (Found by review.)
func TestCorrectionAfterRestartOfADeliveredTraceIsAnUpdate(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	sink := new(consumertest.TracesSink) // what LangSmith got, across the restart
	p := startWithStorageTo(t, st, queuedTestConfig(), sink)
	full := buildOneTask()
	var lead ptrace.Span
	for sp := range spaniter.All(full) {
		if sp.ParentSpanID().IsEmpty() {
			lead = sp
		}
	}
	require.NoError(t, p.ConsumeTraces(ctx, clone(full))) // complete: released and delivered
	require.Eventually(t, func() bool { return sink.SpanCount() == full.SpanCount() }, 5*time.Second, 2*time.Millisecond)
	kill(p)

	p2 := startWithStorageTo(t, st, queuedTestConfig(), sink)
	require.NoError(t, p2.ConsumeTraces(ctx, versionOf(lead, 2)))
	require.Eventually(t, func() bool { return sink.SpanCount() == full.SpanCount()+1 }, 5*time.Second, 2*time.Millisecond,
		"at once, not after wait_duration")
	require.NoError(t, p2.Shutdown(ctx))
	runs, reposted := langsmithView(sink.AllTraces())
	assert.Empty(t, reposted, "no run posted twice")
	v, _ := runs[lead.SpanID()].Attributes().Get(testVersionKey)
	assert.Equal(t, int64(2), v.Int(), "the lead's correction after the restart")
}

// What a delivery leaves on disk to tell a restart which traces went out lasts
// late_span_window: later deliveries delete it, and a restart after it rebuilds nothing
// (a correction then starts a trace never seen, as without storage).
func TestDeliveriesOnDiskLastTheLateSpanWindow(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	cfg := queuedTestConfig()
	var clock atomic.Int64 // the restart runs on the real clock, long after
	clock.Store(time.Now().UnixNano() - 10*int64(cfg.LateSpanWindow))
	p, sink := startOnClock(t, st, cfg, &clock)
	a, b := oneTaskN(1), oneTaskN(2)
	require.NoError(t, p.ConsumeTraces(ctx, a))
	// the record is written once the send returned, after the sink took it
	require.Eventually(t, func() bool { return sink.SpanCount() == a.SpanCount() && st.Count("sent/") == 1 },
		5*time.Second, 2*time.Millisecond, "the delivery is on disk")
	clock.Add(int64(cfg.LateSpanWindow) + 1)
	require.NoError(t, p.ConsumeTraces(ctx, b))
	require.Eventually(t, func() bool { return sink.SpanCount() == a.SpanCount()+b.SpanCount() && st.Count("sent/") == 1 },
		5*time.Second, 2*time.Millisecond, "the first delivery's record went with the second's")
	kill(p)

	p2, sink2 := startWithStorage(t, st, queuedTestConfig())
	assert.Zero(t, st.Count("sent/"), "a restart deletes what is past the window")
	dispatcher := findChatWithCalls(t, b)
	require.NoError(t, p2.ConsumeTraces(ctx, versionOf(dispatcher, 2)))
	require.NoError(t, p2.Shutdown(ctx))
	for sp := range spaniter.In(sink2.AllTraces()) {
		assert.False(t, genai.IsReemission(sp.Attributes()), "past the window the trace is not known: held, then a first emission")
	}
}

// A record stamped ahead of the clock (a clock stepped back) does not keep the records
// behind it on disk: it counts as made when the clock is first seen behind it.
// (Found by review.)
func TestDeliveryRecordsAheadOfTheClockExpire(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	cfg := queuedTestConfig()
	base := time.Now().UnixNano()
	var clock atomic.Int64
	clock.Store(base + int64(time.Hour)) // ahead
	p, sink := startOnClock(t, st, cfg, &clock)
	sent := 0
	deliver := func(n uint64) {
		td := oneTaskN(n)
		sent += td.SpanCount()
		require.NoError(t, p.ConsumeTraces(ctx, td))
		require.Eventually(t, func() bool { return sink.SpanCount() == sent }, 5*time.Second, time.Millisecond)
	}
	deliver(1)
	clock.Store(base) // stepped back
	for n := uint64(2); n < 12; n++ {
		deliver(n)
		clock.Add(int64(cfg.LateSpanWindow) + 1)
	}
	require.NoError(t, p.Shutdown(ctx))
	assert.LessOrEqual(t, st.Count("sent/"), 2, "records past late_span_window are deleted")
}

// Traces of a send that the next consumer took in part (a partial refusal names what it
// did not take) are recorded as delivered at once, whatever becomes of the rest.
// (Found by review.)
func TestPartlyTakenSendRecordsWhatWasTaken(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	same := tracesOfLane(0, 2)
	a, b := same[0], same[1]
	aID, bID := traceIDOf(a), traceIDOf(b)
	sink := new(consumertest.TracesSink)
	var calls atomic.Int32
	var gate atomic.Bool
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if !gate.Load() {
			return errors.New("down")
		}
		if calls.Add(1) == 1 {
			_ = sink.ConsumeTraces(ctx, only(td, func(sp ptrace.Span) bool { return sp.TraceID() == aID }))
			return consumererror.NewTraces(errors.New("queue full"), only(td, func(sp ptrace.Span) bool { return sp.TraceID() == bID }))
		}
		return consumererror.NewPermanent(errors.New("invalid run"))
	})
	require.NoError(t, err)
	p := startWithStorageTo(t, st, queuedTestConfig(), next)
	require.NoError(t, p.ConsumeTraces(ctx, clone(a)))
	require.NoError(t, p.ConsumeTraces(ctx, clone(b)))
	gate.Store(true)
	p.deliver.poke(0)
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	require.Equal(t, a.SpanCount(), sink.SpanCount(), "a reached the sink")
	kill(p)
	assert.Equal(t, 1, st.Count("sent/"), "a's delivery is on disk")
}

// startOnClock starts a processor of cfg on st's storage that reads the time from clock
// (set before it starts: its goroutines read it).
func startOnClock(t *testing.T, st *storagetest.Storage, cfg *Config, clock *atomic.Int64) (*subagentMerge, *consumertest.TracesSink) {
	t.Helper()
	cfg.Storage = &storageID
	sink := new(consumertest.TracesSink)
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, sink)
	require.NoError(t, err)
	p.now = clock.Load
	require.NoError(t, p.Start(context.Background(), st.Host(storageID)))
	return p, sink
}
