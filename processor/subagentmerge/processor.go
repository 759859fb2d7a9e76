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
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/genai"
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
}

// group is the spans of one trace within a batch.
type group struct {
	id          pcommon.TraceID
	first, last int32
	released    bool // the whole trace goes on with this batch
	late        bool // some of its spans came after its release
	prev        held // its previously buffered spans, when released
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
	dels      []uint64
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
}

type subagentMerge struct {
	cfg    *Config
	next   consumer.Traces
	logger *zap.Logger
	tel    *telemetry

	wait, window   int64 // nanoseconds
	settle         int64 // nanoseconds
	compactAfter   int64 // nanoseconds
	maxTombstones  int   // per shard
	shards         [numShards]shard
	nTraces        atomic.Int64
	nSpans         atomic.Int64
	records        atomic.Int64 // bytes held by the records of released traces
	maxRecords     int64        // bound on records (ledger_limit_mib; tests lower it)
	stream         bool
	nLedgers       atomic.Int64
	ledgerBytes    atomic.Int64
	maxLedgerBytes int64
	viewFor        int64 // nanoseconds a ledger's decoded view outlives its last extension

	id    component.ID
	store *persister // nil unless `storage` is set

	pool        sync.Pool
	marshaler   ptrace.ProtoMarshaler
	unmarshaler ptrace.ProtoUnmarshaler
	now         func() int64

	stop     chan struct{}
	done     chan struct{}
	started  atomic.Bool
	shutOnce sync.Once
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
		settle:         int64(min(cfg.SettleTime, cfg.WaitDuration)),
		compactAfter:   int64(cfg.CompactAfter),
		maxTombstones:  max(cfg.NumTraces/numShards, 64),
		maxRecords:     int64(cfg.LedgerLimitMiB) << 20,
		maxLedgerBytes: int64(cfg.LedgerLimitMiB) << 20,
		stream:         cfg.Mode == ModeStream,
		viewFor:        int64(max(cfg.CompactAfter, time.Second)),
		now:            func() int64 { return time.Now().UnixNano() },
		stop:           make(chan struct{}),
		done:           make(chan struct{}),
	}
	for i := range p.shards {
		p.shards[i].traces = map[pcommon.TraceID]*entry{}
		p.shards[i].released = map[pcommon.TraceID]*tombstone{}
		p.shards[i].records = &p.records
		p.shards[i].led.byID = map[pcommon.TraceID]*ledger{}
	}
	p.pool.New = func() any { return &scratch{byTrace: map[pcommon.TraceID]int32{}} }
	tel, err := newTelemetry(set.TelemetrySettings,
		func() (int64, int64) { return p.nTraces.Load(), p.nSpans.Load() },
		func() (int64, int64) { return p.nLedgers.Load(), p.ledgerBytes.Load() })
	if err != nil {
		return nil, err
	}
	p.tel = tel
	return p, nil
}

func (*subagentMerge) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
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
		go p.sweepLoop(sweepInterval(every))
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
			<-p.done
		}
		if p.stream {
			err = p.flushAll(ctx)
		} else {
			err = p.releaseAll(ctx)
		}
		err = errors.Join(err, p.tel.shutdown())
		if p.store != nil {
			err = errors.Join(err, p.store.close(ctx))
		}
	})
	return err
}

func (p *subagentMerge) sweepLoop(every time.Duration) {
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
				if err := p.sweepStream(context.Background(), now); err != nil {
					p.logger.Error("re-emitting corrected spans or ending idle ledgers failed", zap.Error(err))
				}
			} else if err := p.releaseDue(context.Background(), now); err != nil {
				p.logger.Error("releasing idle or settled traces failed", zap.Error(err))
			}
			if p.compactAfter > 0 && p.store == nil && !p.stream {
				p.compact(now - p.compactAfter)
			}
			if p.store != nil && now-lastLow >= int64(time.Second) {
				lastLow = now
				if err := p.store.write(context.Background(), 0, nil); err != nil {
					p.logger.Error("storage: writing buffered spans still fails", zap.Error(err))
				}
				lowest, any := p.minLiveSeq()
				if p.stream {
					lowest, any = p.minLiveLedgerSeq()
				}
				if err := p.store.advanceLow(context.Background(), lowest, any); err != nil {
					p.logger.Error("storage: recording the buffer's low mark failed", zap.Error(err))
				}
			}
		}
	}
}

// releaseDue releases the traces idle for wait_duration (from the head of each shard's
// list, ordered by lastSeen) and the settling traces whose settle time is over (from the
// head of the settling list, ordered by settleAt).
func (p *subagentMerge) releaseDue(ctx context.Context, now int64) error {
	var bufs []held
	var c counts
	cutoff := now - p.wait
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for e := s.head; e != nil && e.lastSeen <= cutoff; e = s.head {
			bufs = append(bufs, p.removeLocked(s, e, now))
			c.released[relIdle]++
		}
		for e := s.settleHead; e != nil && e.settleAt <= now; e = s.settleHead {
			bufs = append(bufs, p.removeLocked(s, e, now))
			c.released[relSettled]++
		}
		s.expireTombstones(now, p.window, p.maxTombstones)
		s.mu.Unlock()
	}
	return p.sendReleased(ctx, bufs, &c, "idle or settled")
}

// releaseAll releases every buffered trace (shutdown).
func (p *subagentMerge) releaseAll(ctx context.Context) error {
	var bufs []held
	var c counts
	now := p.now()
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for e := s.head; e != nil; e = s.head {
			bufs = append(bufs, p.removeLocked(s, e, now))
		}
		s.mu.Unlock()
	}
	c.released[relShutdown] = int64(len(bufs))
	return p.sendReleased(ctx, bufs, &c, "shutdown")
}

// removeLocked takes e out of its shard s (whose lock the caller holds) and the counts.
func (p *subagentMerge) removeLocked(s *shard, e *entry, now int64) held {
	h := s.remove(e, now, p.window, p.maxTombstones)
	p.nTraces.Add(-1)
	p.nSpans.Add(-int64(len(e.spans.keys)))
	return h
}

// sendReleased merges the released traces and passes them on in one batch.
func (p *subagentMerge) sendReleased(ctx context.Context, bufs []held, c *counts, what string) error {
	if len(bufs) == 0 {
		return nil
	}
	out := ptrace.NewTraces()
	var spans []ptrace.Span
	var errs []error
	for _, b := range bufs {
		var err error
		spans, err = p.appendReleased(out, b, spans[:0], c, what != "shutdown")
		if err != nil {
			errs = append(errs, err)
		}
	}
	p.tel.record(ctx, c)
	var seqs []uint64
	for _, b := range bufs {
		seqs = append(seqs, b.seqs...)
	}
	if err := p.next.ConsumeTraces(ctx, out); err != nil {
		errs = append(errs, fmt.Errorf("subagentmerge: passing on %d traces released (%s): %w", len(bufs), what, err))
		p.keepOnDisk(seqs)
	} else {
		p.forgetOnDisk(ctx, seqs)
	}
	return errors.Join(errs...)
}

// compact encodes the hot spans of every trace that has held them since before cutoff.
func (p *subagentMerge) compact(cutoff int64) {
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for e := s.hotHead; e != nil && e.hotSince <= cutoff; e = s.hotHead {
			b, err := p.marshaler.MarshalTraces(e.hot)
			s.unlinkHot(e)
			if err != nil {
				// keep the spans hot rather than lose them; they go out at release
				p.logger.Error("encoding buffered spans failed", zap.Error(err))
				s.pushHot(e, p.now())
				break
			}
			e.chunks = append(e.chunks, b)
			e.hot, e.hotSince = ptrace.Traces{}, 0
		}
		s.mu.Unlock()
	}
}

// appendHeld moves one buffered trace's spans into out (decoding its chunks) and
// appends them to spans.
func (p *subagentMerge) appendHeld(out ptrace.Traces, h held, spans []ptrace.Span) ([]ptrace.Span, error) {
	var err error
	if len(h.chunks) > 0 {
		var td ptrace.Traces
		td, err = p.unmarshaler.UnmarshalTraces(joinChunks(h.chunks))
		if err != nil {
			// only our own marshalling produced these bytes; this is a bug, not bad input
			err = fmt.Errorf("subagentmerge: decoding a buffered trace: %w", err)
		} else {
			spans = appendSpans(spans, td)
			td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
		}
	}
	if h.hasHot {
		spans = appendSpans(spans, h.hot)
		h.hot.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	return spans, err
}

// appendReleased moves one buffered trace into out and merges it; with record, what
// its tombstone keeps for late spans is recorded.
func (p *subagentMerge) appendReleased(out ptrace.Traces, h held, spans []ptrace.Span, c *counts, record bool) ([]ptrace.Span, error) {
	from := out.ResourceSpans().Len()
	spans, err := p.appendHeld(out, h, spans)
	var rec *recorder
	if record && p.window > 0 && len(spans) > 0 {
		rec = newRecorder()
	}
	rec.beforeAll(spans, true)
	r := merge.Apply(spans)
	c.merged += int64(r.Merged)
	c.orphans += int64(r.Orphans)
	if rec != nil {
		rec.afterFrom(out.ResourceSpans(), from)
		p.attach(spans[0].TraceID(), rec)
	}
	return spans, err
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

// consume is ConsumeTraces; restoreSeq >= 0 says td is that stored chunk, read back at
// start (it is buffered again under its own sequence number, not written again).
func (p *subagentMerge) consume(ctx context.Context, td ptrace.Traces, restoreSeq int64) error {
	sc := p.pool.Get().(*scratch)
	defer p.putScratch(sc)
	if restoreSeq >= 0 {
		sc.restoring, sc.restoreAt = true, uint64(restoreSeq)
	}
	var c counts
	// Whatever process says, what it left in td goes on: released traces are no
	// longer buffered, so an error (a failed write) must not hold them back.
	err := p.process(ctx, td, sc, &c)
	p.tel.record(ctx, &c)
	if td.ResourceSpans().Len() > 0 {
		if nerr := p.next.ConsumeTraces(ctx, td); nerr != nil {
			p.keepOnDisk(sc.dels)
			if sc.restoring {
				p.keepOnDisk([]uint64{sc.restoreAt})
			}
			return errors.Join(err, nerr)
		}
	}
	var drop []uint64
	if sc.restoring && !sc.adopted {
		drop = append(drop, sc.restoreAt) // nothing of it is held any more
	}
	p.forgetOnDisk(ctx, sc.dels, drop...)
	return err
}

// forgetOnDisk deletes the stored chunks of traces the next consumer accepted.
func (p *subagentMerge) forgetOnDisk(ctx context.Context, seqs []uint64, drop ...uint64) {
	if p.store == nil || len(seqs)+len(drop) == 0 {
		return
	}
	if err := p.store.forget(ctx, seqs, drop...); err != nil {
		// they are sent again after a restart: duplicates, which the vendors upsert
		p.logger.Warn("storage: deleting the chunks of passed-on traces failed", zap.Error(err))
	}
}

// keepOnDisk keeps the stored chunks of traces the next consumer refused, for the next start.
func (p *subagentMerge) keepOnDisk(seqs []uint64) {
	if p.store != nil && len(seqs) > 0 {
		p.store.keep(seqs)
	}
}

// recorder returns the scratch's recorder, emptied (its buffers are reused).
func (sc *scratch) recorder() *recorder {
	if sc.rec == nil {
		sc.rec = newRecorder()
	}
	sc.rec.reset()
	return sc.rec
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
	p.pool.Put(sc)
}

// process rewrites td in place into what goes on now.
func (p *subagentMerge) process(ctx context.Context, td ptrace.Traces, sc *scratch, c *counts) error {
	// Pass 1: index the batch by trace.
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		res := rss.At(i).Resource()
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			scope := sss.At(j).Scope()
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				idx := int32(len(sc.refs))
				from := int32(len(sc.asks))
				var key spanKey
				key, sc.asks = keyOf(sp, sc.asks)
				sc.refs = append(sc.refs, ref{
					span: sp, res: res, scope: scope, rs: int32(i), ss: int32(j), next: -1,
					key: key, asks: [2]int32{from, int32(len(sc.asks))},
				})
				tid := sp.TraceID()
				if tid.IsEmpty() {
					continue // cannot be grouped; passed on as is
				}
				g, ok := sc.byTrace[tid]
				if !ok {
					sc.byTrace[tid] = int32(len(sc.groups))
					sc.groups = append(sc.groups, group{id: tid, first: idx, last: idx})
					continue
				}
				sc.refs[sc.groups[g].last].next = idx
				sc.groups[g].last = idx
			}
		}
	}

	// Pass 2: decide each trace's fate under its shard's lock.
	now := p.now()
	removed := false
	var errs []error
	for gi := range sc.groups {
		if err := p.place(td, sc, gi, now, c, &removed); err != nil {
			errs = append(errs, err)
		}
	}

	// num_traces is exact: push the least recently extended traces of all shards on
	// with this batch until no more than num_traces are held.
	p.evictOverCapacity(sc, now, c)

	// Pass 3: take buffered spans and duplicates out of the batch.
	if removed {
		removeNotKept(td, sc.refs)
	}

	// With storage, the spans just buffered are on disk before this returns.
	if p.store != nil && len(sc.chunk) > 0 {
		if err := p.store.write(ctx, sc.chunkSeq, sc.chunk); err != nil {
			p.logger.Error("storage: writing buffered spans failed; refusing the request (retryable)", zap.Error(err))
			errs = append(errs, fmt.Errorf("subagentmerge: storing buffered spans: %w", err))
		}
	}

	// Pass 4: merge what is released now, and what came after its trace's release.
	for gi := range sc.groups {
		g := &sc.groups[gi]
		if g.late {
			p.correctLate(td, sc, g, c)
		}
		if !g.released {
			continue
		}
		var rec *recorder
		if p.window > 0 {
			rec = sc.recorder()
		}
		spans := sc.spans[:0]
		for r := g.first; r >= 0; r = sc.refs[r].next {
			if sc.refs[r].fate == fateKeep {
				spans = append(spans, sc.refs[r].span)
			}
		}
		from := td.ResourceSpans().Len()
		sc.dels = append(sc.dels, g.prev.seqs...)
		var err error
		if spans, err = p.appendHeld(td, g.prev, spans); err != nil {
			errs = append(errs, err)
		}
		g.prev = held{}
		rec.beforeAll(spans, false)
		r := merge.Apply(spans)
		c.merged += int64(r.Merged)
		c.orphans += int64(r.Orphans)
		if rec != nil {
			for r := g.first; r >= 0; r = sc.refs[r].next {
				if ref := &sc.refs[r]; ref.fate == fateKeep {
					rec.after(ref.span, ref.res, ref.scope)
				}
			}
			rec.afterFrom(td.ResourceSpans(), from)
			p.attach(g.id, rec)
		}
		sc.spans = spans
	}
	for _, h := range sc.evicted {
		sc.dels = append(sc.dels, h.seqs...)
		var err error
		if sc.spans, err = p.appendReleased(td, h, sc.spans[:0], c, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// correctLate merges g's late spans into their released trace (correction.go): they go
// on with what the merge now says about them, and every dispatching span it corrects
// is re-emitted with this batch. Without a record of the trace (released before the
// record was kept, or late_span_window off) late tool spans are marked late instead.
func (p *subagentMerge) correctLate(td ptrace.Traces, sc *scratch, g *group, c *counts) {
	var late []lateSpan
	for r := g.first; r >= 0; r = sc.refs[r].next {
		if ref := &sc.refs[r]; ref.fate == fateLate {
			late = append(late, lateSpan{span: ref.span, res: ref.res, scope: ref.scope})
		}
	}
	s := &p.shards[shardIndex(g.id)]
	s.mu.Lock()
	var cr correction
	var err error
	done := false
	if tomb := s.released[g.id]; tomb != nil && tomb.skel != nil {
		// under the shard lock: two late batches of one trace are corrected one after
		// the other, each on the record the other left
		if cr, err = p.correct(tomb.skel, tomb.sent, late, p.now()); err == nil {
			p.records.Add(int64(len(cr.skel) + len(cr.sent) - len(tomb.skel) - len(tomb.sent)))
			tomb.skel, tomb.sent = cr.skel, cr.sent
			done = true
		}
	}
	s.mu.Unlock()
	if err != nil {
		p.logger.Error("correcting a released trace failed; its late spans go on marked late", zap.Error(err))
	}
	if !done {
		for _, l := range late {
			markLate(l.span)
		}
		return
	}
	cr.out.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	c.corrected += int64(cr.n)
}

// attach stores what rec recorded of a released trace on its tombstone.
func (p *subagentMerge) attach(id pcommon.TraceID, rec *recorder) {
	skel := rec.skel.message()
	sent, err := p.marshaler.MarshalTraces(rec.sent)
	if err != nil {
		p.logger.Error("recording a released trace failed; spans arriving after it will not be merged", zap.Error(err))
		return
	}
	if p.records.Load() > p.maxRecords {
		return // over budget: late spans of this trace will be marked late
	}
	s := &p.shards[shardIndex(id)]
	s.mu.Lock()
	if tomb := s.released[id]; tomb != nil && tomb.skel == nil {
		tomb.skel, tomb.sent = skel, sent
		p.records.Add(int64(len(skel) + len(sent)))
	}
	s.mu.Unlock()
}

// place decides the fate of one trace's spans in this batch.
func (p *subagentMerge) place(td ptrace.Traces, sc *scratch, gi int, now int64, c *counts, removed *bool) error {
	g := &sc.groups[gi]
	s := &p.shards[shardIndex(g.id)]
	s.mu.Lock()
	defer s.mu.Unlock()

	if tomb := s.released[g.id]; tomb != nil {
		// Released before: pass late spans on once, drop exact repeats.
		for r := g.first; r >= 0; r = sc.refs[r].next {
			ref := &sc.refs[r]
			if tomb.spans.has(ref.key.id) {
				ref.fate = fateDrop
				c.duplicates++
				*removed = true
				continue
			}
			tomb.spans.add(ref.key, nil)
			ref.fate = fateLate
			g.late = true
			c.late++
		}
		return nil
	}

	e := s.traces[g.id]
	var set spanSet
	hasRoot := false
	if e != nil {
		set, hasRoot = e.spans, e.hasRoot
	}
	added := 0
	for r := g.first; r >= 0; r = sc.refs[r].next {
		ref := &sc.refs[r]
		if set.has(ref.key.id) {
			ref.fate = fateDrop
			c.duplicates++
			*removed = true
			continue
		}
		set.add(ref.key, sc.asks[ref.asks[0]:ref.asks[1]])
		if ref.key.root() && !hasRoot {
			hasRoot = true
			if e != nil {
				e.rootAt = now
			}
		}
		added++
	}

	st := uint8(stWait)
	if hasRoot {
		st = set.state()
		if st == stSettle && p.settle == 0 {
			st = stComplete
		}
	}
	if st == stComplete {
		// Complete: release now, with whatever was buffered before (refs stay fateKeep).
		g.released = true
		c.released[relComplete]++
		if e != nil {
			e.spans = set
			g.prev = s.remove(e, now, p.window, p.maxTombstones)
			p.nTraces.Add(-1)
			p.nSpans.Add(-int64(len(set.keys) - added))
			return nil
		}
		s.addTombstone(g.id, spanSet{keys: set.keys, idx: set.idx}, now, p.window, p.maxTombstones)
		return nil
	}
	if added == 0 {
		return nil // only duplicates
	}

	if e == nil {
		e = &entry{id: g.id}
		if hasRoot {
			e.rootAt = now
		}
		s.traces[g.id] = e
		s.pushBack(e)
		p.nTraces.Add(1)
	}
	e.spans, e.hasRoot = set, hasRoot
	p.nSpans.Add(int64(added))
	s.touch(e, now)
	switch {
	case st == stSettle && e.settleAt == 0:
		s.pushSettle(e, e.rootAt+p.settle)
	case st == stWait && e.settleAt != 0:
		s.unlinkSettle(e) // a span that arrived names something still missing
	}

	// Move this batch's spans of the trace into the entry's hot spans, or, with
	// compact_after 0, straight into an encoded chunk.
	// With storage, every group is a chunk, encoded on arrival: the bytes written are
	// the bytes held.
	encode := p.compactAfter == 0 || p.store != nil
	dst := e.hot
	if encode || e.hotSince == 0 {
		dst = ptrace.NewTraces()
	}
	moveGroup(td, sc.refs, g.first, dst)
	*removed = true
	if encode {
		b, err := p.marshaler.MarshalTraces(dst)
		if err != nil {
			return fmt.Errorf("subagentmerge: encoding spans to buffer: %w", err)
		}
		e.chunks = append(e.chunks, b)
		if p.store != nil {
			if sc.restoring {
				e.seqs = append(e.seqs, sc.restoreAt)
				p.store.ref(sc.restoreAt)
				sc.adopted = true
			} else {
				if len(sc.chunk) == 0 {
					sc.chunkSeq = p.store.next.Add(1) - 1
				}
				// concatenated TracesData messages decode as one
				sc.chunk = append(sc.chunk, b...)
				e.seqs = append(e.seqs, sc.chunkSeq)
				p.store.ref(sc.chunkSeq)
			}
		}
		return nil
	}
	if e.hotSince == 0 {
		e.hot = dst
		s.pushHot(e, now)
	}
	return nil
}

// evictOverCapacity releases, with this batch, the least recently extended traces of all
// shards until at most num_traces are held. It runs outside every shard lock: the
// oldest trace is found by looking at each shard's head (each list is ordered by
// lastSeen), then removed under its own shard's lock if it is still the head.
func (p *subagentMerge) evictOverCapacity(sc *scratch, now int64, c *counts) {
	limit := int64(p.cfg.NumTraces)
	for p.nTraces.Load() > limit {
		best, bestSeen := -1, int64(0)
		for i := range p.shards {
			s := &p.shards[i]
			s.mu.Lock()
			if s.head != nil && (best < 0 || s.head.lastSeen < bestSeen) {
				best, bestSeen = i, s.head.lastSeen
			}
			s.mu.Unlock()
		}
		if best < 0 {
			return // emptied meanwhile by other calls
		}
		s := &p.shards[best]
		s.mu.Lock()
		if e := s.head; e != nil && p.nTraces.Load() > limit {
			sc.evicted = append(sc.evicted, p.removeLocked(s, e, now))
			c.released[relCapacity]++
		}
		s.mu.Unlock()
	}
}

// moveGroup moves one trace's spans of the batch (the refs chain from first, minus
// duplicates) into dst under copies of their resource and scope, and marks them buffered.
func moveGroup(td ptrace.Traces, refs []ref, first int32, dst ptrace.Traces) {
	rss := td.ResourceSpans()
	var crs ptrace.ResourceSpans
	var css ptrace.ScopeSpans
	lastRS, lastSS := int32(-1), int32(-1)
	for r := first; r >= 0; r = refs[r].next {
		ref := &refs[r]
		if ref.fate == fateDrop {
			continue
		}
		if ref.rs != lastRS {
			src := rss.At(int(ref.rs))
			// A trace's later batches usually come from the same process: reuse the
			// resource already held instead of storing another copy of it.
			if n := dst.ResourceSpans().Len(); n > 0 && sameResource(dst.ResourceSpans().At(n-1), src) {
				crs = dst.ResourceSpans().At(n - 1)
			} else {
				crs = dst.ResourceSpans().AppendEmpty()
				src.Resource().CopyTo(crs.Resource())
				crs.SetSchemaUrl(src.SchemaUrl())
			}
			lastRS, lastSS = ref.rs, -1
		}
		if ref.ss != lastSS {
			src := rss.At(int(ref.rs)).ScopeSpans().At(int(ref.ss))
			if n := crs.ScopeSpans().Len(); n > 0 && sameScope(crs.ScopeSpans().At(n-1), src) {
				css = crs.ScopeSpans().At(n - 1)
			} else {
				css = crs.ScopeSpans().AppendEmpty()
				src.Scope().CopyTo(css.Scope())
				css.SetSchemaUrl(src.SchemaUrl())
			}
			lastSS = ref.ss
		}
		ref.span.MoveTo(css.Spans().AppendEmpty())
		ref.fate = fateBuffer
	}
}

func sameResource(a, b ptrace.ResourceSpans) bool {
	return a.SchemaUrl() == b.SchemaUrl() &&
		a.Resource().DroppedAttributesCount() == b.Resource().DroppedAttributesCount() &&
		a.Resource().Attributes().Equal(b.Resource().Attributes())
}

func sameScope(a, b ptrace.ScopeSpans) bool {
	as, bs := a.Scope(), b.Scope()
	return a.SchemaUrl() == b.SchemaUrl() && as.Name() == bs.Name() && as.Version() == bs.Version() &&
		as.DroppedAttributesCount() == bs.DroppedAttributesCount() && as.Attributes().Equal(bs.Attributes())
}

// removeNotKept deletes buffered and duplicate spans from td, then empty scopes and
// resources. RemoveIf visits spans in the order pass 1 indexed them.
func removeNotKept(td ptrace.Traces, refs []ref) {
	i := 0
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(ptrace.Span) bool {
				f := refs[i].fate
				i++
				return f == fateBuffer || f == fateDrop
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
}

// markLate marks a late execute_tool span, unless an earlier pass already decided it.
func markLate(sp ptrace.Span) {
	if genai.SpanOperation(sp.Name(), sp.Attributes()) != genai.OpExecuteTool {
		return
	}
	if _, ok := sp.Attributes().Get(genai.AttrMergeStatus); ok {
		return
	}
	sp.Attributes().PutStr(genai.AttrMergeStatus, genai.MergeLate)
}
