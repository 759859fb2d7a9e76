package subagentmerge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// A request's chunk holds every trace it extended, and outlives a ledger that ends
// while another trace still holds it. A restart must not rebuild the ended ledger from
// what is left of it: its merge would read differently from what went out (here the
// dispatcher came with its subagent already merged, from a chunk that is gone) and
// re-emit the dispatcher with partial numbers as its newest version.
func TestStreamRestartLeavesEndedLedgersEnded(t *testing.T) {
	st := storagetest.New()
	cfg := streamTestConfig()
	p1, sink1 := startWithStorage(t, st, cfg)
	clock := time.Now().UnixNano()
	p1.now = func() int64 { return clock }
	a, b := buildOneTask(), buildNested()
	aID := a.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	root := func(sp ptrace.Span) bool { return sp.ParentSpanID().IsEmpty() }
	var rootID pcommon.SpanID
	for sp := range spaniter.All(a) {
		if root(sp) {
			rootID = sp.SpanID()
		}
	}
	underLead := func(sp ptrace.Span) bool { return root(sp) || sp.ParentSpanID() == rootID }
	// the subagent's spans first, alone; then the lead's, the dispatcher among them,
	// with some of b's
	require.NoError(t, p1.ConsumeTraces(context.Background(), only(a, func(sp ptrace.Span) bool { return !underLead(sp) })))
	require.NoError(t, p1.ConsumeTraces(context.Background(), concat(only(a, underLead), withoutRoot(b))))
	require.Equal(t, int64(2), p1.nLedgers.Load())

	// b goes on; a's ledger ends idle, and its chunk of its own leaves the disk
	clock += int64(cfg.WaitDuration) / 2
	require.NoError(t, p1.ConsumeTraces(context.Background(), only(b, root)))
	clock += int64(cfg.WaitDuration)/2 + 1
	require.NoError(t, p1.sweepStream(context.Background(), clock))
	require.Equal(t, int64(1), p1.nLedgers.Load(), "a's ledger ended, b's did not")
	require.Equal(t, 1, st.Count(prefixStream+"end/"), "the chunk a and b share says a ended")
	before := len(sink1.AllTraces())
	kill(p1)

	assert.Positive(t, before)
	restartLeavesEnded(t, st, cfg, aID)
}

// restartLeavesEnded starts a processor on st where the ledger of trace ended had ended
// and one other is live: only the live one comes back, nothing of ended goes out, and
// once the live one ends too nothing is left on disk.
func restartLeavesEnded(t *testing.T, st *storagetest.Storage, cfg *Config, ended pcommon.TraceID) {
	t.Helper()
	p, sink := startWithStorage(t, st, cfg)
	assert.Equal(t, int64(1), p.nLedgers.Load(), "only the live ledger is back")
	require.NoError(t, p.sweepStream(context.Background(), p.now()+int64(time.Hour)))
	require.NoError(t, p.Shutdown(context.Background()))
	for _, td := range sink.AllTraces() {
		for sp := range spaniter.All(td) {
			assert.NotEqual(t, ended, sp.TraceID(), "a span of the ended trace went out again after the restart: %s %v", sp.Name(), sp.Attributes().AsRaw())
		}
	}
	assert.Zero(t, st.Count(prefixStream+"chunk/"), "every ledger ended: no chunk is left on disk")
	assert.Zero(t, st.Count(prefixStream+"end/"), "every ledger ended: no end marker is left on disk")
}

// A ledger can end (for room, or idle) while a request that extended it is on its way
// to the next consumer; the request's chunk, held by the request's other traces, then
// carries spans of a ledger that does not hold it, and says so, so a restart does not
// bring that ledger back from it.
func TestStreamChunkOfAnEndedLedgerSaysItEnded(t *testing.T) {
	st := storagetest.New()
	cfg := streamTestConfig()
	a, b := buildOneTask(), buildNested()
	aID := a.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	var p1 *subagentMerge
	ended := false
	sink1 := new(consumertest.TracesSink)
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if !ended {
			// the sweeper ends a's ledger while the request is here
			ended = true
			s := &p1.shards[shardIndex(aID)]
			s.mu.Lock()
			e := p1.endLedger(s, s.led.byID[aID], ptrace.NewTraces(), &counts{}, p1.now(), relCapacity)
			s.mu.Unlock()
			require.NoError(t, p1.forgetLedgers(ctx, e))
		}
		return sink1.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	p1 = startWithStorageTo(t, st, cfg, next)
	require.NoError(t, p1.ConsumeTraces(context.Background(), concat(withoutRoot(a), withoutRoot(b))))
	require.True(t, ended)
	require.Equal(t, int64(1), p1.nLedgers.Load(), "a's ledger ended, b's did not")
	require.Equal(t, 1, st.Count(prefixStream+"chunk/"))
	require.Equal(t, 1, st.Count(prefixStream+"end/"), "the chunk says a's ledger does not hold it")
	kill(p1)
	restartLeavesEnded(t, st, cfg, aID)
}

// Deleting an ended ledger's chunks can fail (a failing disk); the deletions then go
// with the next batch that succeeds, so a restart does not bring the ledger back.
func TestStreamDeletionsAFailedBatchLeftGoWithTheNext(t *testing.T) {
	st := storagetest.New()
	cfg := streamTestConfig()
	p1, _ := startWithStorage(t, st, cfg)
	clock := time.Now().UnixNano()
	p1.now = func() int64 { return clock }
	require.NoError(t, p1.ConsumeTraces(context.Background(), withoutRoot(buildOneTask())))
	require.Equal(t, 1, st.Count(prefixStream+"chunk/"))

	st.Fail(errors.New("input/output error"))
	clock += int64(cfg.WaitDuration) + 1
	require.NoError(t, p1.sweepStream(context.Background(), clock))
	require.Zero(t, p1.nLedgers.Load(), "the ledger ended")
	require.Equal(t, 1, st.Count(prefixStream+"chunk/"), "its chunk is still on disk")

	st.Fail(nil)
	require.NoError(t, p1.ConsumeTraces(context.Background(), withoutRoot(buildParallel())))
	assert.Equal(t, 1, st.Count(prefixStream+"chunk/"), "the next write deleted it")
	kill(p1)

	p2, _ := startWithStorage(t, st, cfg)
	assert.Equal(t, int64(1), p2.nLedgers.Load(), "only the live ledger is back")
	require.NoError(t, p2.Shutdown(context.Background()))
}

// ledgerSpans is how many spans p's ledger of trace id holds (0: none).
func ledgerSpans(p *subagentMerge, id pcommon.TraceID) int {
	s := &p.shards[shardIndex(id)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.led.byID[id]; l != nil {
		return len(l.spans.keys)
	}
	return 0
}

// Two ledgers holding one chunk end together (one sweep; in hold mode, one release):
// the chunk is deleted and nothing names it any more, on disk or in memory.
func TestChunkLetGoOfByAllAtOnceLeavesNoMarker(t *testing.T) {
	for _, stream := range []bool{true, false} {
		st := storagetest.New()
		cfg, prefix := streamTestConfig(), prefixStream
		if !stream {
			cfg, prefix = defaultTestConfig(), prefixHold
		}
		p, sink := startWithStorage(t, st, cfg)
		clock := time.Now().UnixNano()
		p.now = func() int64 { return clock }
		a, b := buildOneTask(), buildNested()
		require.NoError(t, p.ConsumeTraces(context.Background(), concat(withoutRoot(a), withoutRoot(b))))
		require.Equal(t, 1, st.Count(prefix+"chunk/"))
		if stream {
			clock += int64(cfg.WaitDuration) + 1
			require.NoError(t, p.sweepStream(context.Background(), clock))
			require.Zero(t, p.nLedgers.Load())
		} else {
			require.NoError(t, p.ConsumeTraces(context.Background(), concat(rootOf(a), rootOf(b))))
			require.Equal(t, a.SpanCount()+b.SpanCount(), sink.SpanCount())
		}
		assert.Zero(t, st.Count(prefix+"chunk/"), "stream=%v", stream)
		assert.Zero(t, st.Count(prefix+"end/"), "stream=%v: no marker names the deleted chunk", stream)
		p.store.mu.Lock()
		assert.Empty(t, p.store.endLeft, "stream=%v", stream)
		assert.Empty(t, p.store.endsOn, "stream=%v", stream)
		p.store.mu.Unlock()
		require.NoError(t, p.Shutdown(context.Background()))
	}
}

// Random agent trees, several at once, their spans mixed into requests so that chunks
// are shared; killed mid-way, after some complete traces' ledgers ended (as the sweeper
// ends them), and restarted on the same storage: every dispatcher's last version at the
// sink is exact and every call is counted once. An ended ledger rebuilt in part from a
// shared chunk would re-emit partial numbers as the newest version.
func TestPropertyRestartAfterLedgersEnded(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 23))
		want := map[pcommon.SpanID]genai.Usage{}
		var queues [][]ptrace.Traces
		for k := range uint64(2 + r.IntN(3)) {
			in, w := randomAgentTraceWithWant(r, seed*10+k, true)
			maps.Copy(want, w)
			queues = append(queues, realTime(in))
		}
		reqs, owner := mixIntoRequests(r, queues, 3)
		cut := 1 + r.IntN(len(reqs)-1)
		st := storagetest.New()
		cfg := streamTestConfig()
		p1, sink1 := startWithStorage(t, st, cfg)
		for _, req := range reqs[:cut] {
			require.NoError(t, p1.ConsumeTraces(context.Background(), req))
		}
		// the traces complete before the cut: end some of their ledgers
		later := 0
		for i := cut; i < len(reqs); i++ {
			later |= owner[i]
		}
		var gone []ended
		for k := range uint64(len(queues)) {
			id := newTraceBuilder(seed*10 + k).tid
			if later&(1<<k) != 0 || r.IntN(2) == 0 {
				continue
			}
			s := &p1.shards[shardIndex(id)]
			s.mu.Lock()
			if l := s.led.byID[id]; l != nil {
				out := ptrace.NewTraces()
				gone = append(gone, p1.endLedger(s, l, out, &counts{}, p1.now(), relCapacity))
				s.mu.Unlock()
				require.NoError(t, sink1.ConsumeTraces(context.Background(), out))
				continue
			}
			s.mu.Unlock()
		}
		require.NoError(t, p1.forgetLedgers(context.Background(), gone...))
		kill(p1)

		p2, sink2 := startWithStorage(t, st, cfg)
		for _, req := range reqs[cut:] {
			require.NoError(t, p2.ConsumeTraces(context.Background(), req))
		}
		require.NoError(t, p2.sweepStream(context.Background(), p2.now()+int64(time.Hour)))
		require.NoError(t, p2.Shutdown(context.Background()))
		assertExactAtSink(t, append(sink1.AllTraces(), sink2.AllTraces()...), want, fmt.Sprintf("seed %d (%d ledgers ended)", seed, len(gone)))
		assert.Zero(t, st.Count(prefixStream+"chunk/"), "seed %d", seed)
		assert.Zero(t, st.Count(prefixStream+"end/"), "seed %d", seed)
	}
}

// A drawn chunk let go of before its write is named by a marker; its write then deletes
// the chunk and that marker. When that write's batch fails, the deletions wait for the
// next batch, so the marker does not stay on disk for good.
func TestMarkerOfAChunkDeletedByAFailedWriteGoesWithTheNext(t *testing.T) {
	bg := context.Background()
	st := storagetest.New()
	cfg := streamTestConfig()
	a, b := buildOneTask(), buildNested()
	aID, bID := traceIDOf(a), traceIDOf(b)
	p1, _ := startWithStorage(t, st, cfg)
	require.NoError(t, p1.ConsumeTraces(bg, withoutRoot(a)))
	require.NoError(t, p1.ConsumeTraces(bg, withoutRoot(b)))
	la := liveLedger(p1, aID)
	require.NotNil(t, la)
	skel, err := p1.marshaler.MarshalTraces(only(a, isLocalRoot))
	require.NoError(t, err)
	chunk := append(protowire.AppendVarint(nil, uint64(len(skel))), skel...)
	seq := p1.store.draw()
	require.True(t, p1.holdChunk(la, seq))
	s := &p1.shards[shardIndex(aID)]
	s.mu.Lock()
	e := p1.endLedger(s, la, ptrace.NewTraces(), &counts{}, p1.now(), relCapacity)
	s.mu.Unlock()
	require.NoError(t, p1.forgetLedgers(bg, e))
	require.Equal(t, 1, st.Count(prefixStream+"end/"), "a marker names the drawn chunk")
	st.Fail(errors.New("input/output error"))
	require.Error(t, p1.store.write(bg, seq, chunk))
	st.Fail(nil)
	require.NoError(t, p1.store.write(bg, 0, nil), "the next batch")
	// b ends too: nothing is live
	lb := liveLedger(p1, bID)
	s = &p1.shards[shardIndex(bID)]
	s.mu.Lock()
	e = p1.endLedger(s, lb, ptrace.NewTraces(), &counts{}, p1.now(), relCapacity)
	s.mu.Unlock()
	require.NoError(t, p1.forgetLedgers(bg, e))
	require.NoError(t, p1.store.advanceLow(bg))
	kill(p1)
	p2, _ := startWithStorage(t, st, cfg)
	require.NoError(t, p2.Shutdown(bg))
	assert.Zero(t, st.Count(prefixStream+"chunk/"), "no chunk left")
	assert.Zero(t, st.Count(prefixStream+"end/"), "no end marker left on disk")
}

// mixIntoRequests takes the queues' batches (one queue a trace, in the order they go)
// into requests of one to most batches, each from a queue picked at random, and says
// which queues each request has batches of (a bit set).
func mixIntoRequests(r *rand.Rand, queues [][]ptrace.Traces, most int) (reqs []ptrace.Traces, owner []int) {
	left := func() []int {
		var ks []int
		for k, q := range queues {
			if len(q) > 0 {
				ks = append(ks, k)
			}
		}
		return ks
	}
	for ks := left(); len(ks) > 0; ks = left() {
		req, from := ptrace.NewTraces(), 0
		for range 1 + r.IntN(most) {
			if ks = left(); len(ks) == 0 {
				break
			}
			k := ks[r.IntN(len(ks))]
			queues[k][0].ResourceSpans().MoveAndAppendTo(req.ResourceSpans())
			queues[k] = queues[k][1:]
			from |= 1 << k
		}
		reqs, owner = append(reqs, req), append(owner, from)
	}
	return reqs, owner
}

// A request that ends a ledger for room writes its own chunk and lets go of the ended
// ledger's chunks (deleting them, or marking the ledger ended in those that live on) in
// one storage transaction, not two.
func TestEndingForRoomIsInTheRequestsTransaction(t *testing.T) {
	st := storagetest.New()
	cfg := streamTestConfig()
	cfg.NumTraces = 1
	p, _ := startWithStorage(t, st, cfg)
	ctx := context.Background()
	a, b := oneTaskN(1), oneTaskN(2)
	require.NoError(t, p.ConsumeTraces(ctx, withoutRoot(a)))
	require.Equal(t, 1, st.Count(prefixStream+"chunk/"))

	var mu sync.Mutex
	var batches [][]string // the chunk and marker keys of each batch
	st.SetOnBatch(func(ops []*storage.Operation) {
		var keys []string
		for _, op := range ops {
			if op.Type != storage.Get && (strings.Contains(op.Key, "chunk/") || strings.Contains(op.Key, "end/")) {
				keys = append(keys, op.Key)
			}
		}
		if len(keys) > 0 {
			mu.Lock()
			batches = append(batches, keys)
			mu.Unlock()
		}
	})
	require.NoError(t, p.ConsumeTraces(ctx, withoutRoot(b)), "b's ledger ends a's for room")
	st.SetOnBatch(nil)
	require.Equal(t, int64(1), p.nLedgers.Load())
	assert.Equal(t, 1, st.Count(prefixStream+"chunk/"), "b's chunk written, a's deleted")
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, batches, 1, "one transaction: %v", batches)
	require.NoError(t, p.Shutdown(ctx))
}
