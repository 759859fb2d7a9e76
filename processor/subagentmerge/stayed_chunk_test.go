package subagentmerge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A carries X1 (trace T1) and X2 (trace T2); B1 and B2 settle them; T2's ledger ends
// and is let go while A is at the next consumer; A is refused. The chunk of what stays
// is held by T1's ledger and marks T2's part ended, so a restart does not bring T2's
// ledger back (X2 would be counted again). The processor does not end a ledger a call
// waits on (ledger.waiting): the end is played by hand, for the chunk's rule that a
// ledger no longer in its shard holds nothing of it (holdChunk).
func TestStayedChunkLeavesAnEndedLedgerEnded(t *testing.T) {
	bg := context.Background()
	in1, sub1, x1 := subagentCallTrace(71)
	in2, sub2, x2 := subagentCallTrace(72)
	id1, id2 := traceIDOf(in1), traceIDOf(in2)
	isX := func(sp ptrace.Span) bool { return sp.SpanID() == x1 || sp.SpanID() == x2 }
	isB := func(sp ptrace.Span) bool { return isLocalRoot(sp) || sp.SpanID() == sub1 || sp.SpanID() == sub2 }
	p, g, st, cfg := gatedOnStorage(t)
	require.NoError(t, p.ConsumeTraces(bg, only(in1, func(sp ptrace.Span) bool { return !isB(sp) && !isX(sp) })))
	require.NoError(t, p.ConsumeTraces(bg, only(in2, func(sp ptrace.Span) bool { return !isB(sp) && !isX(sp) })))
	gA, resA := atGate(p, g, id1, errors.New("A refused"), concat(only(in1, isX), only(in2, isX)))
	require.NoError(t, p.ConsumeTraces(bg, only(in1, isB)), "B1")
	require.NoError(t, p.ConsumeTraces(bg, only(in2, isB)), "B2")
	// T2's ledger ends and is let go while A waits
	s := &p.shards[shardIndex(id2)]
	s.mu.Lock()
	e := p.endLedger(s, s.led.byID[id2], ptrace.NewTraces(), &counts{}, p.now(), relCapacity)
	s.mu.Unlock()
	require.NoError(t, p.forgetLedgers(bg, e))
	close(gA.release)
	require.Error(t, <-resA)
	require.NoError(t, p.ConsumeTraces(bg, only(in1, isX)), "A's retry, T1 part (duplicate)")
	_, _, counted := killAndRestart(t, p, g, st, cfg, func(p2 *subagentMerge) {
		assert.True(t, liveLedger(p2, id2) == nil, "T2's ledger ended before the kill: not back after the restart")
	})
	n := map[pcommon.SpanID]int{}
	for _, sp := range counted {
		n[sp.SpanID()]++
	}
	assert.Equal(t, 1, n[x1], "X1 counted once")
	assert.Equal(t, 1, n[x2], "X2 counted once")
	_ = id1
}

// B settles X and is stored; A (X's own request) is refused while the disk fails, so the
// chunk of what stays is not written, and the process is killed before the next write.
// The restart takes X from its settled version (no chunk has its span), so A's retry is
// a duplicate and X is counted once.
func TestStayedChunkLostToAFailingDiskStillCountsOnce(t *testing.T) {
	bg := context.Background()
	in, sub, x := subagentCallTrace(73)
	id := traceIDOf(in)
	isX := func(sp ptrace.Span) bool { return sp.SpanID() == x }
	isB := func(sp ptrace.Span) bool { return isLocalRoot(sp) || sp.SpanID() == sub }
	p, g, st, cfg := gatedOnStorage(t)
	require.NoError(t, p.ConsumeTraces(bg, only(in, func(sp ptrace.Span) bool { return !isB(sp) && !isX(sp) })))
	gA, resA := atGate(p, g, id, errors.New("A refused"), only(in, isX))
	require.NoError(t, p.ConsumeTraces(bg, only(in, isB)), "B")
	st.Fail(errors.New("input/output error"))
	close(gA.release)
	require.Error(t, <-resA)
	before := len(g.sink.AllTraces())
	kill(p)
	st.Fail(nil)

	p2, sink2 := startWithStorage(t, st, cfg)
	require.NoError(t, p2.ConsumeTraces(bg, only(in, isX)), "A's retry")
	require.NoError(t, p2.sweepStream(bg, p2.now()+int64(time.Hour)))
	require.NoError(t, p2.Shutdown(bg))
	counted := countedAcross(g.sink.AllTraces()[:before:before], sink2.AllTraces())
	assert.Equal(t, 1, timesCounted(counted, x), "X counted once")
}
