package subagentmerge

// Hold mode: how a batch is buffered, released when it completes a trace, or passed on
// as late, and how num_traces is kept.

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// consume is ConsumeTraces; restoreSeq >= 0 says td is that stored chunk, read back at
// start (it is buffered again under its own sequence number, not written again).
func (p *subagentMerge) consume(ctx context.Context, td ptrace.Traces, restoreSeq int64) (err error) {
	var c counts
	if restoreSeq < 0 {
		if err := p.refuseWhileFull(); err != nil {
			return err
		}
		defer func() {
			// only a request that dropped duplicates acknowledged spans it did not write
			if err == nil && c.duplicates > 0 {
				err = p.flushFailed(ctx) // nothing acknowledged only in memory
			}
		}()
	}
	sc := p.pool.Get().(*scratch)
	defer p.putScratch(sc)
	if restoreSeq >= 0 {
		sc.restoring, sc.restoreAt = true, uint64(restoreSeq)
	}
	// Whatever process says, what it left in td goes on: released traces are no
	// longer buffered, so an error (a failed write) must not hold them back. Gather mode
	// leaves td as it is and passes on a batch of its own.
	out := td
	if p.gather {
		out, err = p.gatherBatch(ctx, td, sc, &c)
	} else {
		err = p.process(td, sc, &c)
	}
	queued := p.queued && (sc.hasRest() || len(sc.raw) > 0)
	if !queued {
		err = errors.Join(err, p.writeChunk(ctx, sc))
	}
	p.tel.record(ctx, &c)
	if queued {
		restSeq := int64(-1) // the rest is not on disk yet
		if sc.restoring {
			restSeq = int64(sc.restoreAt) // the rest is of the chunk read back
		}
		p.frontFollows(sc)
		rest, follows, rerr := p.restEncodings(ctx, td, sc)
		// what the request holds is written with what it queues, in one transaction
		q := queuedOut{rest: rest, follows: follows, raw: sc.raw, landings: sc.landings, restSeq: restSeq, versions: sc.versions}
		qerr := errors.Join(rerr, p.enqueue(ctx, q, p.heldChunk(sc)))
		if sc.restoring && !sc.hasRest() && !sc.adopted {
			p.forgetOnDisk(ctx, nil, sc.restoreAt) // nothing of it is held or sent any more
		}
		return errors.Join(err, qerr)
	}
	for _, lo := range sc.landings {
		p.fill(lo.id, lo.s, nil) // a release with nothing to queue
	}
	if out.ResourceSpans().Len() > 0 {
		// the stored chunks out's released traces came from go with it
		seqs := sc.dels
		if sc.restoring {
			seqs = p.holdForEach(seqs, out, sc.restoreAt) // held by out until it is delivered
		}
		return errors.Join(err, p.passOn(ctx, out, seqs, !sc.restoring))
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
func (p *subagentMerge) process(td ptrace.Traces, sc *scratch, c *counts) error {
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
		sc.dels = holdsOf(sc.dels, g.prev)
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
		sc.dels = holdsOf(sc.dels, h)
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
		lateAll(sc, g, c)
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

	st := p.stateOf(&set, hasRoot)
	if st == stComplete {
		// Complete: release now, with whatever was buffered before (refs stay fateKeep).
		p.releaseNow(s, g, e, set, nil, added, now, c)
		return removed, nil
	}
	if added == 0 {
		return removed, nil // only duplicates
	}

	e = p.hold(s, e, g.id, set, hasRoot, st, now)
	p.nSpans.Add(int64(added))

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
		return removed, p.addChunk(sc, e, dst)
	}
	if e.hotSince == 0 {
		e.hot = dst
		s.pushHot(e, now)
	}
	return removed, nil
}

// stateOf is when a buffered trace goes: stWait until its root came (the rule's scan is
// skipped), then stateWith.
func (p *subagentMerge) stateOf(set *spanSet, hasRoot bool) uint8 {
	if !hasRoot {
		return stWait
	}
	return p.stateWith(set)
}

// releaseNow releases the trace of g, which this batch completes (its spans in the
// batch, added of them new, stay fateKeep): its entry e, if it had one, leaves the
// buffer into g.prev; otherwise it is only remembered as released. ranks are the newest
// versions gather mode passes on of spans that had several.
func (p *subagentMerge) releaseNow(s *shard, g *group, e *entry, set spanSet, ranks map[pcommon.SpanID]int64, added int, now int64, c *counts) {
	g.released = true
	c.released[relComplete]++
	if e == nil {
		s.addTombstone(g.id, spanSet{keys: set.keys, idx: set.idx}, ranks, now, p.window, p.maxTombstones)
		g.slot = p.takeSlot(s, g.id)
		return
	}
	e.spans, e.ranks = set, ranks
	held := len(set.keys) - added + e.versions
	g.prev = s.remove(e, now, p.window, p.maxTombstones)
	g.slot = p.takeSlot(s, g.id)
	g.prev.spans = held
	p.nTraces.Add(-1)
	p.nSpans.Add(-int64(held))
}

// lateAll passes every span of g on now, as late.
func lateAll(sc *scratch, g *group, c *counts) {
	for r := g.first; r >= 0; r = sc.refs[r].next {
		sc.refs[r].fate = fateLate
		c.late++
	}
}

// hold records that trace id, whose spans are now set, stays in the buffer: its entry
// (e, or a new one when nil) goes to the back of the lastSeen order, and on the settling
// chain when st says when it goes. It returns the entry.
func (p *subagentMerge) hold(s *shard, e *entry, id pcommon.TraceID, set spanSet, hasRoot bool, st uint8, now int64) *entry {
	if e == nil {
		e = &entry{id: id}
		if hasRoot {
			e.rootAt = now
		}
		s.traces[id] = e
		s.lru.pushBack(e)
		p.nTraces.Add(1)
	}
	e.spans, e.hasRoot = set, hasRoot
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
	return e
}

// addChunk encodes spans into one more chunk of e and, with storage, into the chunk this
// request writes (or, while restoring, records that e holds the stored chunk read back).
func (p *subagentMerge) addChunk(sc *scratch, e *entry, spans ptrace.Traces) error {
	b, err := p.marshaler.MarshalTraces(spans)
	if err != nil {
		return fmt.Errorf("subagentmerge: encoding spans to buffer: %w", err)
	}
	return p.addEncoded(sc, e, b)
}

// addEncoded is addChunk for spans already encoded, b, which e now owns.
func (p *subagentMerge) addEncoded(sc *scratch, e *entry, b []byte) error {
	e.chunks = append(e.chunks, b)
	if p.store == nil {
		return nil
	}
	if sc.restoring {
		e.restored = true
		e.seqs = append(e.seqs, sc.restoreAt)
		p.store.ref(sc.restoreAt)
		sc.adopted = true
		return nil
	}
	if len(sc.chunk) == 0 {
		sc.chunkSeq = p.store.draw()
	}
	// concatenated TracesData messages decode as one
	sc.chunk = append(sc.chunk, b...)
	e.seqs = append(e.seqs, sc.chunkSeq)
	p.store.ref(sc.chunkSeq)
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
	w := newRefWriter(td, dst)
	for r := first; r >= 0; r = refs[r].next {
		ref := &refs[r]
		if ref.fate == fateDrop {
			continue
		}
		w.move(ref)
		ref.fate = fateBuffer
	}
}

// refWriter copies (or moves) spans of a batch, td, into another, dst, each under a copy
// of its resource and scope; a run of spans from the same resource and scope of td
// shares one copy, and a resource or scope equal to the last one written is reused.
type refWriter struct {
	td, dst ptrace.Traces
	rs, ss  int32 // the resource and scope of td last written to
	crs     ptrace.ResourceSpans
	css     ptrace.ScopeSpans
}

func newRefWriter(td, dst ptrace.Traces) refWriter {
	return refWriter{td: td, dst: dst, rs: -1, ss: -1}
}

// copy appends a copy of ref's span to dst, as a first emission when ref says so.
func (w *refWriter) copy(ref *ref) {
	sp := w.scopeFor(ref).AppendEmpty()
	ref.span.CopyTo(sp)
	if ref.asFirst {
		asFirstEmission(sp.Attributes())
	}
}

// move moves ref's span into dst.
func (w *refWriter) move(ref *ref) {
	ref.span.MoveTo(w.scopeFor(ref).AppendEmpty())
}

// scopeFor returns the spans of dst's scope that ref's span goes under.
func (w *refWriter) scopeFor(ref *ref) ptrace.SpanSlice {
	dst, rss := w.dst, w.td.ResourceSpans()
	if ref.rs != w.rs {
		src := rss.At(int(ref.rs))
		// a trace's later batches usually come from the same process: reuse the
		// resource already there instead of another copy of it
		if n := dst.ResourceSpans().Len(); n > 0 && sameResource(dst.ResourceSpans().At(n-1), src) {
			w.crs = dst.ResourceSpans().At(n - 1)
		} else {
			w.crs = dst.ResourceSpans().AppendEmpty()
			src.Resource().CopyTo(w.crs.Resource())
			w.crs.SetSchemaUrl(src.SchemaUrl())
		}
		w.rs, w.ss = ref.rs, -1
	}
	if ref.ss != w.ss {
		src := rss.At(int(ref.rs)).ScopeSpans().At(int(ref.ss))
		if n := w.crs.ScopeSpans().Len(); n > 0 && sameScope(w.crs.ScopeSpans().At(n-1), src) {
			w.css = w.crs.ScopeSpans().At(n - 1)
		} else {
			w.css = w.crs.ScopeSpans().AppendEmpty()
			src.Scope().CopyTo(w.css.Scope())
			w.css.SetSchemaUrl(src.SchemaUrl())
		}
		w.ss = ref.ss
	}
	return w.css.Spans()
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
