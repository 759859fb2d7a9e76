package subagentmerge

// Hold mode: how a batch is buffered, released when it completes a trace, or passed on
// as late, and how num_traces is kept.

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// consume is ConsumeTraces; restoreSeq >= 0 says td is that stored chunk, read back at
// start (it is buffered again under its own sequence number, not written again).
func (p *subagentMerge) consume(ctx context.Context, td ptrace.Traces, restoreSeq int64) error {
	if restoreSeq < 0 {
		if err := p.refuseWhileFull(); err != nil {
			return err
		}
	}
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
		// the stored chunks td's released traces came from go with it
		seqs := sc.dels
		if sc.restoring {
			p.store.ref(sc.restoreAt) // held by td until it is delivered
			seqs = append(seqs, sc.restoreAt)
		}
		return errors.Join(err, p.passOn(ctx, td, seqs, !sc.restoring))
	}
	var drop []uint64
	if sc.restoring && !sc.adopted {
		drop = append(drop, sc.restoreAt) // nothing of it is held any more
	}
	p.forgetOnDisk(ctx, sc.dels, drop...)
	return err
}

// recorder returns the scratch's recorder, emptied (its buffers are reused).
func (sc *scratch) recorder() *recorder {
	if sc.rec == nil {
		sc.rec = newRecorder()
	}
	sc.rec.reset()
	return sc.rec
}

// process rewrites td in place into what goes on now.
func (p *subagentMerge) process(ctx context.Context, td ptrace.Traces, sc *scratch, c *counts) error {
	// Pass 1: index the batch by trace.
	p.indexBatch(td, sc, false)

	// Pass 2: decide each trace's fate under its shard's lock.
	now := p.now()
	removed := false
	var errs []error
	for gi := range sc.groups {
		rm, err := p.place(td, sc, gi, now, c)
		removed = removed || rm
		if err != nil {
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

// place decides the fate of one trace's spans in this batch, and reports whether it
// took any out of td (buffered or dropped as duplicates).
func (p *subagentMerge) place(td ptrace.Traces, sc *scratch, gi int, now int64, c *counts) (removed bool, _ error) {
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
				removed = true
				continue
			}
			tomb.spans.add(ref.key, nil)
			ref.fate = fateLate
			g.late = true
			c.late++
		}
		return removed, nil
	}
	if _, gone := s.gone[g.id]; gone {
		// Released before, remembered by id only: every span goes on as late, an exact
		// repeat too. LangSmith, the sink hold mode is for, keeps the first post of a run
		// id (409); a sink that upserts would take the repeat, unmerged, over the merged
		// version.
		for r := g.first; r >= 0; r = sc.refs[r].next {
			sc.refs[r].fate = fateLate
			c.late++
		}
		g.late = true
		return false, nil
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
			removed = true
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
			return removed, nil
		}
		s.addTombstone(g.id, spanSet{keys: set.keys, idx: set.idx}, now, p.window, p.maxTombstones)
		return removed, nil
	}
	if added == 0 {
		return removed, nil // only duplicates
	}

	if e == nil {
		e = &entry{id: g.id}
		if hasRoot {
			e.rootAt = now
		}
		s.traces[g.id] = e
		s.lru.pushBack(e)
		p.nTraces.Add(1)
	}
	e.spans, e.hasRoot = set, hasRoot
	p.nSpans.Add(int64(added))
	s.touch(e, now)
	// A settling trace goes settle_time after its root; with release_after_root, one that
	// still names something missing goes that long after its root. The earlier wins.
	var due int64
	switch {
	case st == stSettle:
		due = e.rootAt + p.settle
	case st == stWait && hasRoot && p.afterRoot > 0:
		due = e.rootAt + p.afterRoot
	}
	switch {
	case due != 0 && (e.settleAt == 0 || due < e.settleAt):
		s.unlinkSettle(e)
		s.pushSettle(e, due)
	case due == 0 && e.settleAt != 0:
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
	removed = true
	if encode {
		b, err := p.marshaler.MarshalTraces(dst)
		if err != nil {
			return removed, fmt.Errorf("subagentmerge: encoding spans to buffer: %w", err)
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
		return removed, nil
	}
	if e.hotSince == 0 {
		e.hot = dst
		s.pushHot(e, now)
	}
	return removed, nil
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
			if h := s.lru.head; h != nil && (best < 0 || h.lastSeen < bestSeen) {
				best, bestSeen = i, h.lastSeen
			}
			s.mu.Unlock()
		}
		if best < 0 {
			return // emptied meanwhile by other calls
		}
		s := &p.shards[best]
		s.mu.Lock()
		if e := s.lru.head; e != nil && p.nTraces.Load() > limit {
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
