package subagentmerge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/internal/otlpwire"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// What becomes of one incoming span.
const (
	fateKeep   uint8 = iota // stays in the batch and goes on now (released trace, late, no trace id)
	fateBuffer              // moved into the buffer
	fateDrop                // exact duplicate of an accepted span
	fateLate                // stays in the batch; its trace was already released
)

// ref is one incoming span, found in the first pass over a batch.
type ref struct {
	span   ptrace.Span
	res    pcommon.Resource
	scope  pcommon.InstrumentationScope
	key    spanKey
	asks   [2]int32 // the span's asked-for tool calls: scratch.asks[asks[0]:asks[1]]
	rs, ss int32
	next   int32 // next ref of the same trace, -1 at the end
	fate   uint8
	// gather mode: the span's version (rank: 0 a first emission), and whether the
	// first the sink gets of this span is a re-emission (its first emission never came
	// this way), so that it goes as a first emission
	rank    int64
	asFirst bool
	// queued delivery: 1 + its index in scratch.follows when it is a span of a released
	// trace that goes on now (landing.go), else 0
	follow int32
	// stream mode: the span's skeleton, scratch.sw.spans[skel[0]:skel[1]]
	skel [2]int32
}

// group is the spans of one trace within a batch.
type group struct {
	id          pcommon.TraceID
	first, last int32
	released    bool  // the whole trace goes on with this batch
	late        bool  // some of its spans came after its release
	prev        held  // its previously buffered spans, when released
	slot        *slot // queued delivery: its release's place among the trace's calls (landing.go)
}

// scratch is the per-call working memory, pooled to keep ConsumeTraces allocation-light.
type scratch struct {
	refs    []ref
	asks    []uint32
	groups  []group
	byTrace map[pcommon.TraceID]int32
	evicted []held // traces pushed out by capacity, released with this batch
	rec     *recorder
	// with storage: chunks to write before acknowledging, chunks of released traces to
	// delete once the next consumer accepted them, and, while restoring, the chunk
	// being read back (restoring) and whether a buffered trace adopted it
	chunk     []byte // what this request leaves buffered, encoded (one chunk)
	chunkSeq  uint64
	dels      []chunkHold
	restoring bool
	restoreAt uint64
	adopted   bool
	spans     []ptrace.Span
	// stream mode: the skeleton writer, the ledgers this call touched, the span ids
	// they refer to, and the ledger chunk being built (ledgerstore.go)
	sw        skeletonWriter
	touched   []touched
	ids       []pcommon.SpanID
	chunkSkel []byte
	chunkSent []byte
	parts     [][2]int32
	facts     []merge.Fact     // the merge facts of one trace's new spans (stream mode)
	enc       spanEncoder      // encodes kept spans
	fresh     []pcommon.SpanID // one trace's new spans that went out pending (touched.fr)
	// gather mode: the batch encoded once (wired), and the spans of one trace to hold
	wire  otlpwire.Index
	wired bool
	held  []int32
	// queued delivery: this batch's spans that go on now, by lane (ref indexes)
	rest [deliverLanes][]int32
	// restFirst are the refs of rest that go as first emissions (ref.asFirst): copied and
	// encoded, not cut out of the batch's encoding, which carries their revision marks
	restFirst [deliverLanes][]int32
	// gather mode with delivery: queued: the traces this call released, sent from their
	// chunks as stored (hold_deliver.go), and whether some span goes in several versions
	raw      []held
	versions bool
	// queued delivery: the slots of the traces this call released, and its spans of
	// traces released before, by trace (landing.go)
	landings []landingOf
	follows  []following
}

type subagentMerge struct {
	cfg    *Config
	next   consumer.Traces
	logger *zap.Logger
	tel    *telemetry

	wait, window   int64  // nanoseconds
	settle         int64  // nanoseconds
	afterRoot      int64  // nanoseconds; release_after_root, 0 off
	unsent         unsent // hold mode: what the next consumer refused (hold_unsent.go)
	unsentMax      int64  // bound on the unsent queues' bytes together (maxUnsentBytes; tests lower it)
	compactAfter   int64  // nanoseconds
	maxTombstones  int    // per shard
	shards         [numShards]shard
	nTraces        atomic.Int64
	nSpans         atomic.Int64
	records        atomic.Int64 // bytes held by the records of released traces
	maxRecords     int64        // bound on records (ledger_limit_mib; tests lower it)
	stream         bool
	gather         bool // ModeGather: hold mode's buffer without its merge (gather.go)
	queued         bool // delivery: queued (hold_deliver.go)
	deliver        *deliverer
	nLedgers       atomic.Int64
	ledgerBytes    atomic.Int64
	maxLedgerBytes int64

	id    component.ID
	store *persister // nil unless `storage` is set

	pool        sync.Pool
	marshaler   ptrace.ProtoMarshaler
	unmarshaler ptrace.ProtoUnmarshaler
	now         func() int64

	stop chan struct{}
	done chan struct{}
	// cancelSweep cancels the sweeper's context at shutdown: a send of its re-emissions
	// that waits at the next consumer (a blocking sending queue) gives up, and they go
	// out at shutdown instead (flushAll), under the caller's context
	cancelSweep context.CancelFunc
	started     atomic.Bool
	shutOnce    sync.Once
}

var _ processor.Traces = (*subagentMerge)(nil)

func newProcessor(set processor.Settings, cfg *Config, next consumer.Traces) (*subagentMerge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("subagentmerge: invalid config: %w", err)
	}
	p := &subagentMerge{
		cfg:            cfg,
		id:             set.ID,
		next:           next,
		logger:         set.Logger,
		wait:           int64(cfg.WaitDuration),
		window:         int64(cfg.LateSpanWindow),
		afterRoot:      int64(cfg.ReleaseAfterRoot),
		settle:         int64(min(cfg.SettleTime, cfg.WaitDuration)),
		compactAfter:   int64(cfg.CompactAfter),
		maxTombstones:  max(cfg.NumTraces/numShards, 64),
		maxRecords:     int64(cfg.LedgerLimitMiB) << 20,
		maxLedgerBytes: int64(cfg.LedgerLimitMiB) << 20,
		stream:         cfg.Mode == ModeStream,
		gather:         cfg.Mode == ModeGather,
		queued:         cfg.Delivery == DeliveryQueued,
		deliver:        newDeliverer(cfg.Delivery == DeliveryQueued),
		now:            func() int64 { return time.Now().UnixNano() },
		unsentMax:      maxUnsentBytes,
		stop:           make(chan struct{}),
		done:           make(chan struct{}),
	}
	for i := range p.shards {
		p.shards[i].init(&p.records)
	}
	p.pool.New = func() any { return &scratch{byTrace: map[pcommon.TraceID]int32{}} }
	tel, err := newTelemetry(set.ID, set.TelemetrySettings,
		func() (int64, int64) { return p.nTraces.Load(), p.nSpans.Load() },
		func() (int64, int64) { return p.nLedgers.Load(), p.ledgerBytes.Load() },
		p.unsentSpans)
	if err != nil {
		return nil, err
	}
	p.tel = tel
	return p, nil
}

// Capabilities: stream and hold mode write the merge's results onto the spans they are
// given; gather mode only reads them (it holds their encoding and passes on copies), so
// the collector need not clone a batch it shares with other consumers.
func (p *subagentMerge) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: !p.gather}
}

// Start launches the one sweeper goroutine that releases idle traces.
func (p *subagentMerge) Start(ctx context.Context, host component.Host) error {
	if p.cfg.Storage != nil && p.store == nil {
		if err := p.startStorage(ctx, host); err != nil {
			return fmt.Errorf("subagentmerge: %w", err)
		}
	}
	if p.started.CompareAndSwap(false, true) {
		every := min(p.cfg.WaitDuration, max(p.cfg.CompactAfter, time.Millisecond))
		if p.settle > 0 {
			every = min(every, time.Duration(p.settle))
		}
		if p.afterRoot > 0 {
			every = min(every, time.Duration(p.afterRoot))
		}
		sctx, cancel := context.WithCancel(context.Background())
		p.cancelSweep = cancel
		go p.sweepLoop(sctx, sweepInterval(every))
		if p.queued {
			p.startDeliver()
		}
	}
	return nil
}

// sweepInterval bounds how late an idle trace is released (and a hot one compacted):
// at most a quarter of the period after it is due, checked no more than every 5 ms
// nor less than every second.
func sweepInterval(wait time.Duration) time.Duration {
	return min(max(wait/4, 5*time.Millisecond), time.Second)
}

// Shutdown stops the sweeper and releases every buffered trace: nothing accepted is lost.
func (p *subagentMerge) Shutdown(ctx context.Context) error {
	var err error
	p.shutOnce.Do(func() {
		if p.started.Load() {
			close(p.stop)
			p.cancelSweep()
			<-p.done
			if p.queued {
				p.stopDeliver()
			}
		}
		if p.stream {
			err = p.flushAll(ctx)
		} else {
			err = errors.Join(p.releaseAll(ctx), p.unsentAtShutdown(ctx))
		}
		err = errors.Join(err, p.tel.shutdown())
		if p.store != nil {
			// what failed writes left waits for the sweeper's next write, which does not
			// come now: chunks of ledgers that ended would bring them back at the restart
			if ferr := p.store.flush(ctx); ferr != nil {
				err = errors.Join(err, fmt.Errorf("subagentmerge: storage: writing what earlier writes failed to, at shutdown: %w", ferr))
			}
			err = errors.Join(err, p.store.close(ctx))
		}
	})
	return err
}

func (p *subagentMerge) sweepLoop(ctx context.Context, every time.Duration) {
	defer close(p.done)
	t := time.NewTicker(every)
	defer t.Stop()
	var lastLow int64
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			now := p.now()
			if p.stream {
				if err := p.sweepStream(ctx, now); err != nil {
					p.sweepFailed(ctx, "re-emitting corrected spans or ending idle ledgers failed", err)
				}
			} else {
				if !p.queued { // queued delivery has its own goroutine
					p.drainUnsent(ctx, now)
				}
				if err := p.releaseDue(ctx, now); err != nil {
					p.sweepFailed(ctx, "releasing idle or settled traces failed", err)
				}
			}
			if p.compactAfter > 0 && p.store == nil && !p.stream {
				p.compact(now - p.compactAfter)
			}
			if p.store != nil && now-lastLow >= int64(time.Second) {
				lastLow = now
				sctx := context.WithoutCancel(ctx) // storage: not given up at shutdown
				if err := p.store.write(sctx, 0, nil); err != nil {
					p.logger.Error("storage: writing buffered spans still fails", zap.Error(err))
				}
				if err := p.store.advanceLow(sctx); err != nil {
					p.logger.Error("storage: recording the buffer's low mark failed", zap.Error(err))
				}
			}
		}
	}
}

// sweepFailed logs a sweep's failure; one that Shutdown cancelled (its send waited at
// the next consumer) is not one: what it carried goes out at shutdown.
func (p *subagentMerge) sweepFailed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		p.logger.Info("a sweep stopped by shutdown; what it carried goes out at shutdown", zap.Error(err))
		return
	}
	p.logger.Error(what, zap.Error(err))
}

// notTaken is what of td the next consumer did not take when it refused it with err: a
// partial refusal (consumererror.Traces: a sending queue that took the first pieces of
// a batch it cut) names the rest, and only that is sent again. Sending the whole batch
// again would repeat what was taken, and a consumer that only ever has room for the
// first pieces would never see the last ones.
//
// Behind a fanout the refusals of several consumers come joined; which of them took what
// is not known then, so the whole of td goes again.
func notTaken(td ptrace.Traces, err error) (rest ptrace.Traces, partly bool) {
	if joined, ok := err.(interface{ Unwrap() []error }); ok && len(joined.Unwrap()) > 1 {
		return td, false
	}
	var partial consumererror.Traces
	if errors.As(err, &partial) {
		return partial.Data(), true
	}
	return td, false
}

// traceIDsIn returns the trace ids td holds spans of.
func traceIDsIn(td ptrace.Traces) map[pcommon.TraceID]bool {
	ids := map[pcommon.TraceID]bool{}
	for sp := range spaniter.All(td) {
		ids[sp.TraceID()] = true
	}
	return ids
}

func appendSpans(dst []ptrace.Span, td ptrace.Traces) []ptrace.Span {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				dst = append(dst, ss.At(k))
			}
		}
	}
	return dst
}

// ConsumeTraces buffers the spans of incomplete traces and passes on, in the same call,
// every trace this batch completes (merged), every trace it pushes out by capacity,
// late spans of already released traces, and spans without a trace id.
func (p *subagentMerge) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if p.stream {
		return p.consumeStream(ctx, td)
	}
	return p.consume(ctx, td, -1)
}

func (p *subagentMerge) putScratch(sc *scratch) {
	clear(sc.refs)
	sc.refs = sc.refs[:0]
	sc.asks = sc.asks[:0]
	clear(sc.groups)
	sc.groups = sc.groups[:0]
	clear(sc.byTrace)
	clear(sc.evicted)
	sc.evicted = sc.evicted[:0]
	sc.chunk, sc.dels = sc.chunk[:0], sc.dels[:0]
	sc.restoring, sc.adopted = false, false
	clear(sc.spans)
	sc.spans = sc.spans[:0]
	clear(sc.touched)
	sc.touched, sc.ids = sc.touched[:0], sc.ids[:0]
	sc.chunkSkel, sc.chunkSent = sc.chunkSkel[:0], sc.chunkSent[:0]
	sc.fresh = sc.fresh[:0]
	clear(sc.facts)
	sc.facts = sc.facts[:0]
	sc.enc.reset()
	sc.wired, sc.held = false, sc.held[:0]
	for i := range sc.rest {
		sc.rest[i], sc.restFirst[i] = sc.rest[i][:0], sc.restFirst[i][:0]
	}
	clear(sc.raw)
	sc.raw, sc.versions = sc.raw[:0], false
	clear(sc.landings)
	clear(sc.follows)
	sc.landings, sc.follows = sc.landings[:0], sc.follows[:0]
	p.pool.Put(sc)
}

// removeNotKept deletes buffered and duplicate spans from td, then empty scopes and
// resources. RemoveIf visits spans in the order pass 1 indexed them.
func removeNotKept(td ptrace.Traces, refs []ref) {
	i := 0
	spaniter.RemoveIf(td, func(ptrace.Span) bool {
		f := refs[i].fate
		i++
		return f == fateBuffer || f == fateDrop
	})
}
