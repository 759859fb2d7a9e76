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

	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// A refused call whose ledgers ended meanwhile (here: for capacity, in the same call)
// leaves them ended: none goes back on the due chain, nothing of it is re-emitted again,
// and the ledger bytes still add up.
func TestRollbackLeavesAnEndedLedgerEnded(t *testing.T) {
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
		assert.False(t, l.id == id1 && s.led.byID[id1] != l, "an ended ledger is back on the due chain")
	}
	s.mu.Unlock()
	ledgerBytesAddUp(t, p)
	before := len(f.sink.AllTraces())
	clock.Add(int64(time.Hour))
	require.NoError(t, p.sweepStream(bg, clock.Load()))
	ledgerBytesAddUp(t, p)
	for _, td := range f.sink.AllTraces()[before:] {
		for sp := range spaniter.All(td) {
			assert.NotEqual(t, id1, sp.TraceID(), "the sweep re-emitted a span of an ended ledger")
		}
	}
	kill(p)
}
