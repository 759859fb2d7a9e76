package subagentmerge

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// gatedRefusal refuses the first call after armed, once release is closed; the others
// go to sink.
type gatedRefusal struct {
	armed            atomic.Bool
	entered, release chan struct{}
	sink             *consumertest.TracesSink
}

func (g *gatedRefusal) consume(ctx context.Context, td ptrace.Traces) error {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
		return errors.New("queue full")
	}
	return g.sink.ConsumeTraces(ctx, td)
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

// Two requests of one trace at once. The first (the root) settles the calls that waited
// for their caller, and waits at the next consumer; the second (a late call of the lead)
// goes on meanwhile; then the first is refused. The calls it settled are given back
// their pending caller, so the sender's retry settles them again and each is counted
// once: what one request settled is its own, not the ledger's last.
func TestRefusedCallGivesBackWhatItSettledWhileAnotherWentOn(t *testing.T) {
	bg := context.Background()
	b := newTraceBuilder(2)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(60, 9), "call_a")
	_, sub := b.task(lead, "call_a", "researcher", genai.SubagentCompleted)
	b.chat(sub, usage(10, 5))
	b.chat(lead, usage(90, 30))
	late := b.chat(lead, usage(1, 1)).SpanID()
	in := b.td
	g := &gatedRefusal{entered: make(chan struct{}), release: make(chan struct{}), sink: new(consumertest.TracesSink)}
	next, err := consumer.NewTraces(g.consume)
	require.NoError(t, err)
	p, err := newProcessor(processortest.NewNopSettings(Type), streamTestConfig(), next)
	require.NoError(t, err)
	require.NoError(t, p.Start(bg, nil))
	isLate := func(sp ptrace.Span) bool { return sp.SpanID() == late }
	for _, bt := range realTime(in) {
		sp := bt.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		if !isLocalRoot(sp) && !isLate(sp) {
			require.NoError(t, p.ConsumeTraces(bg, bt))
		}
	}
	require.Positive(t, pendingCalls(p, in), "calls wait for their caller")

	g.armed.Store(true)
	refused := make(chan error, 1)
	go func() { refused <- p.ConsumeTraces(bg, only(in, isLocalRoot)) }()
	<-g.entered
	require.NoError(t, p.ConsumeTraces(bg, only(in, isLate)))
	close(g.release)
	require.Error(t, <-refused)
	require.NoError(t, p.ConsumeTraces(bg, only(in, isLocalRoot)), "the sender's retry")
	require.NoError(t, p.Shutdown(bg))
	_, counted := upserted(g.sink.AllTraces())
	assert.Len(t, counted, in.SpanCount(), "every span counted once")
}

// pendingCalls counts td's model calls whose ledger waits for their caller.
func pendingCalls(p *subagentMerge, td ptrace.Traces) int {
	id := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	s := &p.shards[shardIndex(id)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.led.byID[id]; l != nil {
		return l.pending
	}
	return 0
}
