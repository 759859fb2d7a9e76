package subagentmerge

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
)

// traces_released counts a ledger's end once it stays ended: not when the next consumer
// refuses the call or sweep that ended it (the ledger is taken back, and ends again
// later), and not when a call takes it back while its ender waits (revive).

// releasedTally counts traces_released by reason, as the processor adds to it.
type releasedTally struct {
	metric.Int64Counter
	mu sync.Mutex
	by map[string]int64
}

func (c *releasedTally) Add(ctx context.Context, n int64, o ...metric.AddOption) {
	attrs := metric.NewAddConfig(o).Attributes()
	v, _ := attrs.Value("reason")
	c.mu.Lock()
	c.by[v.AsString()] += n
	c.mu.Unlock()
	c.Int64Counter.Add(ctx, n, o...)
}

func (c *releasedTally) of(reason string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by[reason]
}

func tallyReleased(p *subagentMerge) *releasedTally {
	c := &releasedTally{Int64Counter: p.tel.tb.ProcessorSubagentmergeTracesReleased, by: map[string]int64{}}
	p.tel.tb.ProcessorSubagentmergeTracesReleased = c
	return c
}

func TestReleasedCountsACapacityEndOnceItStays(t *testing.T) {
	bg := context.Background()
	t1, t2 := buildParallel(), buildNested()
	id2 := traceIDOf(t2)
	p, g, _, _ := roomForOne(t, false)
	released := tallyReleased(p)
	require.NoError(t, p.ConsumeTraces(bg, withoutRoot(t1)))

	callB := withoutRoot(t2)
	gB, resB := atGate(p, g, id2, errors.New("sending queue is full"), clone(callB))
	require.Nil(t, liveLedger(p, traceIDOf(t1)), "B ended t1's ledger for room")
	close(gB.release)
	require.Error(t, <-resB)
	require.NotNil(t, liveLedger(p, traceIDOf(t1)), "taken back: B was refused")
	assert.Zero(t, released.of("capacity"), "an end taken back is not a release")

	require.NoError(t, p.ConsumeTraces(bg, clone(callB)), "B's retry")
	require.Nil(t, liveLedger(p, traceIDOf(t1)))
	assert.Equal(t, int64(1), released.of("capacity"))
	require.NoError(t, p.Shutdown(bg))
}

func TestReleasedCountsARevivedLedgerWhenItEnds(t *testing.T) {
	bg := context.Background()
	t1, t2 := buildParallel(), buildNested()
	id1, id2 := traceIDOf(t1), traceIDOf(t2)
	p, g, _, _ := roomForOne(t, false)
	released := tallyReleased(p)
	require.NoError(t, p.ConsumeTraces(bg, withoutRoot(t1)))

	gB, resB := atGate(p, g, id2, nil, withoutRoot(t2))
	require.Nil(t, liveLedger(p, id1), "B ended t1's ledger for room")
	require.NoError(t, p.ConsumeTraces(bg, only(t1, isLocalRoot)), "C takes it back")
	close(gB.release)
	require.NoError(t, <-resB)
	require.NotNil(t, liveLedger(p, id1))
	assert.Zero(t, released.of("capacity"), "B's end of t1 did not stay")

	require.NoError(t, p.ConsumeTraces(bg, only(t2, isLocalRoot)), "needs room: t1, complete, ends")
	require.Nil(t, liveLedger(p, id1))
	assert.Equal(t, int64(1), released.of("capacity"))
	require.NoError(t, p.Shutdown(bg))
}

func TestReleasedCountsARefusedIdleEndWhenItStays(t *testing.T) {
	bg := context.Background()
	t1 := withoutRoot(buildParallel())
	id1 := traceIDOf(t1)
	cfg := streamTestConfig()
	p, g := gated(t, cfg, nil)
	released := tallyReleased(p)
	clock := stepClock(p)
	require.NoError(t, p.ConsumeTraces(bg, clone(t1)))

	gate := g.arm(id1, errors.New("sending queue is full"))
	close(gate.release)
	clock.Add(int64(cfg.WaitDuration) + 1)
	require.Error(t, p.sweepStream(bg, clock.Load()))
	require.NotNil(t, liveLedger(p, id1))
	assert.Zero(t, released.of("idle"), "the refused end was taken back")

	clock.Add(int64(cfg.SettleTime))
	require.NoError(t, p.sweepStream(bg, clock.Load()))
	require.Nil(t, liveLedger(p, id1))
	assert.Equal(t, int64(1), released.of("idle"))
	require.NoError(t, p.Shutdown(bg))
}

func TestReleasedCountsARevivedIdleEndWhenItEnds(t *testing.T) {
	bg := context.Background()
	t1 := buildParallel()
	id1 := traceIDOf(t1)
	cfg := streamTestConfig()
	p, g := gated(t, cfg, nil)
	released := tallyReleased(p)
	clock := stepClock(p)
	require.NoError(t, p.ConsumeTraces(bg, withoutRoot(t1)))

	gate := g.arm(id1, nil)
	clock.Add(int64(cfg.WaitDuration) + 1)
	swept := make(chan error, 1)
	go func() { swept <- p.sweepStream(bg, clock.Load()) }()
	<-gate.entered
	require.Nil(t, liveLedger(p, id1), "the sweep ended t1's ledger")
	require.NoError(t, p.ConsumeTraces(bg, only(t1, isLocalRoot)), "t1's root takes it back")
	close(gate.release)
	require.NoError(t, <-swept)
	require.NotNil(t, liveLedger(p, id1))
	assert.Zero(t, released.of("idle"), "the sweep's end did not stay")

	clock.Add(int64(cfg.WaitDuration) + 1)
	require.NoError(t, p.sweepStream(bg, clock.Load()))
	require.Nil(t, liveLedger(p, id1))
	assert.Equal(t, int64(1), released.of("idle"))
	require.NoError(t, p.Shutdown(bg))
}
