package subagentmerge

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// A refused call whose ledgers ended meanwhile, or ended for room in the call itself (and
// were taken back), leaves no ledger on the due chain that its shard does not hold,
// the ledger bytes add up, and the sweep re-emits nothing of a ledger that is gone.
func TestRollbackLeavesNoEndedLedgerDue(t *testing.T) {
	bg := context.Background()
	t1, t2, t3 := buildParallel(), buildNested(), buildOneTask()
	cfg := streamTestConfig()
	cfg.NumTraces = 2
	f := &failOnce{sink: new(consumertest.TracesSink)}
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, f.consumer())
	require.NoError(t, err)
	require.NoError(t, p.Start(bg, nil))
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	p.now = func() int64 { return clock.Load() }
	require.NoError(t, p.ConsumeTraces(bg, withoutRoot(t1)))
	clock.Add(1)
	require.NoError(t, p.ConsumeTraces(bg, withoutRoot(t2)))
	clock.Add(1)
	// t1's root completes it, and t3 makes a third ledger: t1's ends for room
	req := only(t1, isLocalRoot)
	withoutRoot(t3).ResourceSpans().MoveAndAppendTo(req.ResourceSpans())
	f.left.Store(1)
	require.Error(t, p.ConsumeTraces(bg, req))
	id1 := t1.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	s := &p.shards[shardIndex(id1)]
	s.mu.Lock()
	for l := s.led.due.head; l != nil; l = s.led.due.next(l) {
		assert.Same(t, s.led.byID[l.id], l, "a ledger on the due chain that the shard does not hold")
	}
	_, live := s.led.byID[id1]
	s.mu.Unlock()
	ledgerBytesAddUp(t, p)
	before := len(f.sink.AllTraces())
	clock.Add(int64(time.Hour))
	require.NoError(t, p.sweepStream(bg, clock.Load()))
	ledgerBytesAddUp(t, p)
	for _, td := range f.sink.AllTraces()[before:] {
		for sp := range spaniter.All(td) {
			assert.False(t, !live && sp.TraceID() == id1, "the sweep re-emitted a span of an ended ledger")
		}
	}
	kill(p)
}

// A refused call that ended a ledger for room (its last re-emissions settling calls
// that waited for their caller) takes it back: after the retry, every span that went on
// is counted once, the waiting calls of the ended ledger too.
func TestRefusedCallTakesBackTheLedgersItEnded(t *testing.T) {
	bg := context.Background()
	t2, t1 := buildParallel(), buildNested()
	cfg := streamTestConfig()
	cfg.NumTraces = 1
	f := &failOnce{sink: new(consumertest.TracesSink)}
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, f.consumer())
	require.NoError(t, err)
	require.NoError(t, p.Start(bg, nil))
	require.NoError(t, p.ConsumeTraces(bg, withoutRoot(t2)))
	t1 = withoutRoot(t1)
	n1, n2 := t1.SpanCount(), t2.SpanCount() // the calls append their re-emissions to what they are given
	pend := 0
	for sp := range spaniter.All(f.sink.AllTraces()[0]) {
		if v, ok := sp.Attributes().Get(genai.AttrCallerPending); ok && v.Bool() {
			pend++
		}
	}
	require.Positive(t, pend, "trace 2 has calls waiting for their caller")
	f.left.Store(1)
	require.Error(t, p.ConsumeTraces(bg, clone(t1)), "refused; it ended trace 2's ledger for room")
	ledgerBytesAddUp(t, p)
	require.NoError(t, p.ConsumeTraces(bg, t1), "the retry")
	require.NoError(t, p.Shutdown(bg))
	_, counted := upserted(f.sink.AllTraces())
	assert.Len(t, counted, n2-1+n1, "every span that went on counted once (%d waiting calls of trace 2)", pend)
}
