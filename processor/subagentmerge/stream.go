package subagentmerge

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// touched is what one call did to one ledger, kept until the next consumer answered:
// a refused call is taken back out of the ledger (rollback), so the sender's retry is
// new spans again and not a duplicate.
type touched struct {
	l            *ledger
	ids          [2]int32 // the call's new spans: scratch.ids[ids[0]:ids[1]]
	re           [2]int32 // the spans it re-emitted: scratch.ids[re[0]:re[1]]
	created      bool
	prevLastEmit int64
}

// consumeStream is ConsumeTraces in stream mode: every span goes on in this call, with
// what the merge says of it given its trace's ledger; dispatching spans whose merged
// usage changed go on again with it when their settle window allows (reemit.go).
func (p *subagentMerge) consumeStream(ctx context.Context, td ptrace.Traces) error {
	sc := p.pool.Get().(*scratch)
	defer p.putScratch(sc)
	var c counts
	p.indexBatch(td, sc)
	now := p.now()
	out := ptrace.NewTraces()
	removed := false
	var errs []error
	for gi := range sc.groups {
		rm, err := p.streamTrace(td, sc, gi, now, &c, out)
		removed = removed || rm
		if err != nil {
			errs = append(errs, err)
		}
	}
	ended := p.endOverCapacity(now, &c, out)
	if removed {
		removeNotKept(td, sc.refs)
	}
	out.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	p.tel.record(ctx, &c)
	if td.ResourceSpans().Len() > 0 {
		if err := p.next.ConsumeTraces(ctx, td); err != nil {
			p.rollback(sc)
			p.forgetLedgers(ctx, ended)
			return errors.Join(append(errs, err)...)
		}
	}
	if err := p.commitChunk(ctx, sc); err != nil {
		// the spans went on; the chunk is written with the next write that succeeds
		p.logger.Error("storage: writing the ledgers failed; refusing the request (retryable)", zap.Error(err))
		errs = append(errs, fmt.Errorf("subagentmerge: storing the ledgers: %w", err))
	}
	p.forgetLedgers(ctx, ended)
	return errors.Join(errs...)
}

// indexBatch is pass 1: every span of td becomes a ref, chained by trace.
func (p *subagentMerge) indexBatch(td ptrace.Traces, sc *scratch) {
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
}

// streamTrace adds one trace's new spans of the batch to its ledger, writes onto them
// what the merge now says, and re-emits into out what changed, when due. It reports
// whether it dropped duplicates from td.
func (p *subagentMerge) streamTrace(_ ptrace.Traces, sc *scratch, gi int, now int64, c *counts, out ptrace.Traces) (bool, error) {
	g := &sc.groups[gi]
	s := &p.shards[shardIndex(g.id)]
	s.mu.Lock()
	defer s.mu.Unlock()

	l := s.led.byID[g.id]
	t := touched{l: l}
	if l == nil {
		// lastEmit starts at creation: even the first re-emission waits for a window
		l = &ledger{id: g.id, lastSeen: now, lastEmit: now, kept: map[pcommon.SpanID]*keptSpan{}}
		s.led.byID[g.id] = l
		s.led.pushBack(l)
		p.nLedgers.Add(1)
		t.l, t.created = l, true
	}
	t.prevLastEmit = l.lastEmit
	oldCost := l.size // 0 for a new ledger
	removed := false
	sc.sw.reset()
	t.ids[0] = int32(len(sc.ids))
	for r := g.first; r >= 0; r = sc.refs[r].next {
		ref := &sc.refs[r]
		if l.spans.has(ref.key.id) {
			ref.fate = fateDrop
			c.duplicates++
			removed = true
			continue
		}
		l.spans.add(ref.key, sc.asks[ref.asks[0]:ref.asks[1]])
		if f := sc.sw.add(ref.span); f.mergeWritten {
			l.upstream = true
		}
		sc.ids = append(sc.ids, ref.key.id)
	}
	t.ids[1] = int32(len(sc.ids))
	t.re = [2]int32{t.ids[1], t.ids[1]}
	if t.ids[0] == t.ids[1] {
		sc.touched = append(sc.touched, t)
		return removed, nil // only duplicates
	}
	delta := sc.sw.message()
	l.skel = append(l.skel, delta...)
	s.led.touch(l, now)
	err := p.extendView(s, l, delta)

	// The new spans go on carrying what the merge says of them. Most need no merge run
	// for that (effect): nothing of theirs changes, or only a tool span's status,
	// read off the span keys; the dispatchers they change are re-emitted later, once
	// per settle window, from one run of the merge.
	var view mergedView
	eff := effectNone
	if err == nil {
		eff = p.effectOf(sc, g, l)
	}
	if eff == effectInline {
		if view, err = p.mergeLedger(s, l); err != nil {
			eff = effectNone
		}
	}
	var sentDelta []byte
	for r := g.first; r >= 0; r = sc.refs[r].next {
		ref := &sc.refs[r]
		if ref.fate == fateDrop {
			continue
		}
		attrs := ref.span.Attributes()
		_, named := attrs.Get(genai.AttrCaller)
		switch eff {
		case effectInline:
			if v, ok := view.span(ref.key.id); ok {
				writeMerged(attrs, v.Attributes())
			}
		case effectLater:
			if ref.key.kind&kindTool != 0 {
				if st := l.spans.toolStatus(ref.key); st != "" {
					if _, marked := attrs.Get(genai.AttrMergeStatus); !marked {
						attrs.PutStr(genai.AttrMergeStatus, st)
					}
				}
			}
		}
		countStatus(attrs, c)
		if !mayChange(ref, named, &l.spans) {
			continue
		}
		enc, kerr := p.keep(l, ref.span, ref.res, ref.scope)
		if kerr != nil {
			err = errors.Join(err, kerr)
			continue
		}
		sentDelta = append(sentDelta, enc...)
	}

	st := l.spans.state()
	l.complete = st == stComplete || (st == stSettle && p.settle == 0)
	t.re[0] = int32(len(sc.ids))
	dirty := eff == effectLater || (eff == effectInline && p.dirty(l, view))
	switch {
	case dirty && (l.complete || now-l.lastEmit >= p.settle) && eff == effectInline:
		s.led.unschedule(l)
		if sc.ids, err = p.reemit(l, view, out, c, now, sc.ids); err != nil {
			err = fmt.Errorf("subagentmerge: re-emitting corrected spans: %w", err)
		}
	case (dirty && l.complete) || (l.complete && l.onDueList):
		// its last spans came: what waited for the settle window goes now
		if ferr := p.flushInto(s, l, out, c, now, sc); ferr != nil {
			err = errors.Join(err, ferr)
		}
	case dirty:
		s.led.schedule(l, max(l.lastEmit+p.settle, now))
	}
	t.re[1] = int32(len(sc.ids))

	if p.store != nil {
		p.addToChunk(sc, delta, sentDelta)
	}
	p.ledgerBytes.Add(l.cost() - oldCost)
	l.size = l.cost()
	sc.touched = append(sc.touched, t)
	return removed, err
}

// keep records sp (as it goes on now) as a span that may go out again, and returns its
// encoding.
func (p *subagentMerge) keep(l *ledger, sp ptrace.Span, res pcommon.Resource, scope pcommon.InstrumentationScope) ([]byte, error) {
	td := ptrace.NewTraces()
	appendUnder(td, sp, res, scope)
	enc, err := p.marshaler.MarshalTraces(td)
	if err != nil {
		return nil, fmt.Errorf("subagentmerge: encoding a span kept for re-emission: %w", err)
	}
	if old := l.kept[sp.SpanID()]; old != nil {
		l.keptLen -= int64(len(old.enc))
	}
	l.kept[sp.SpanID()] = &keptSpan{fp: fingerprint(sp.Attributes()), enc: enc}
	l.keptLen += int64(len(enc))
	return enc, nil
}

// dirty reports whether a kept span now reads differently from its last version out.
func (p *subagentMerge) dirty(l *ledger, view mergedView) bool {
	for id, k := range l.kept {
		if v, ok := view.span(id); ok && fingerprint(v.Attributes()) != k.fp {
			return true
		}
	}
	return false
}

// What a group's new spans do to what the merge writes on their trace.
const (
	effectNone   = iota // nothing: no subtree sum, dispatcher, status or caller changes
	effectLater         // dispatchers or kept spans change: re-emitted in the settle window
	effectInline        // a new span's own merge results need a merge run now
)

// effectOf tells what the group's new spans change. A span changes nothing when it is
// not a tool span, not a model call that asked for a tool call already in the trace,
// and has no tool span above it (walking up through the spans present): then no
// subtree sum, dispatcher or attribution above it changes, and below it everything was
// decided by what was there already. Spans exported as they end (children before
// parents) mostly are such: a subagent's steps come before the tool span that
// dispatched it. A tool span (execute_tool) changes its dispatcher later; its own
// status is read off the keys (toolStatus). A model call under a tool span, or one
// whose asked tool spans are there with model calls under them, needs the merge now,
// for its own caller or merged usage.
func (p *subagentMerge) effectOf(sc *scratch, g *group, l *ledger) int {
	eff := effectNone
	for r := g.first; r >= 0; r = sc.refs[r].next {
		ref := &sc.refs[r]
		if ref.fate == fateDrop {
			continue
		}
		k := ref.key
		model := k.kind&kindModel != 0
		switch {
		case k.kind&kindTool != 0:
			eff = max(eff, effectLater)
			continue
		case !model && genai.IsToolCallSpan(ref.span.Name(), ref.span.Attributes()):
			return effectInline // a tool span of another convention: the merge decides
		}
		for _, h := range sc.asks[ref.asks[0]:ref.asks[1]] {
			if l.spans.dispatchesUsage(h) {
				return effectInline
			}
		}
		for steps := 0; !k.root() && steps <= len(l.spans.keys); steps++ {
			i := l.spans.find(k.parent)
			if i < 0 {
				break
			}
			k = l.spans.keys[i]
			if k.kind&kindTool != 0 {
				if model {
					return effectInline
				}
				eff = max(eff, effectLater)
				break
			}
		}
	}
	return eff
}

// dispatchesUsage reports whether a tool span of call h is present with a model call
// under it: what a model call asking for h would get merged onto it.
func (s *spanSet) dispatchesUsage(h uint32) bool {
	for i := range s.keys {
		if k := s.keys[i]; k.kind&kindTool != 0 && k.call == h && s.toolStatus(k) != "" {
			return true
		}
	}
	return false
}

// toolStatus is what the merge writes on execute_tool span t given the spans present:
// "" while no model call is under it, "merged" once some model call also asked for its
// tool call (its dispatcher), else "orphan" (internal/merge decides the same way).
func (s *spanSet) toolStatus(t spanKey) string {
	has := false
	for i := range s.keys {
		if s.keys[i].kind&kindModel == 0 {
			continue
		}
		k := s.keys[i]
		for steps := 0; !k.root() && steps <= len(s.keys); steps++ {
			j := s.find(k.parent)
			if j < 0 {
				break
			}
			if s.keys[j].id == t.id {
				has = true
				break
			}
			k = s.keys[j]
		}
		if has {
			break
		}
	}
	if !has {
		return ""
	}
	if t.call != 0 {
		for _, a := range s.asks {
			if a == t.call {
				return genai.MergeMerged
			}
		}
	}
	return genai.MergeOrphan
}

// writeMerged replaces dst's merge-written attributes with the merge's view of the span,
// and gives it the caller the trace's shape says, unless it names its own.
func writeMerged(dst, view pcommon.Map) {
	copyMergeWritten(dst, view)
	if _, has := dst.Get(genai.AttrCaller); !has {
		if v, ok := view.Get(genai.AttrCaller); ok {
			dst.PutStr(genai.AttrCaller, v.AsString())
		}
	}
}

// countStatus counts a tool span going out merged or orphan.
func countStatus(attrs pcommon.Map, c *counts) {
	if v, ok := attrs.Get(genai.AttrMergeStatus); ok {
		switch v.Str() {
		case genai.MergeMerged:
			c.merged++
		case genai.MergeOrphan:
			c.orphans++
		}
	}
}

// mayChange reports whether what the merge writes on ref's span can still change as
// more of its trace arrives: a model call that asked for tool calls (its subagents'
// usage may still come), a model call that names no caller while some ancestor of it
// is still missing (the trace's shape may yet say it runs in a subagent), or a tool
// span that went out without being merged (its dispatcher or subtree may still come).
func mayChange(ref *ref, named bool, spans *spanSet) bool {
	if ref.key.kind&kindModel != 0 {
		return ref.asks[1] > ref.asks[0] || (!named && !spans.rooted(ref.key))
	}
	attrs := ref.span.Attributes()
	if ref.key.kind&kindTool == 0 && !genai.IsToolCallSpan(ref.span.Name(), attrs) {
		return false
	}
	return mergeStatus(attrs) != genai.MergeMerged
}

// rooted reports whether every ancestor of k, up to a local root, is in the set.
func (s *spanSet) rooted(k spanKey) bool {
	for steps := 0; steps <= len(s.keys); steps++ {
		if k.root() {
			return true
		}
		i := s.find(k.parent)
		if i < 0 {
			return false
		}
		k = s.keys[i]
	}
	return false // a cycle of parent links
}

// mergedView is the merge run over a ledger's whole skeleton.
type mergedView struct{ v *ledgerView }

// span returns the merge's version of span id.
func (m mergedView) span(id pcommon.SpanID) (ptrace.Span, bool) {
	if m.v == nil {
		return ptrace.Span{}, false
	}
	i, ok := m.v.idx[id]
	if !ok {
		return ptrace.Span{}, false
	}
	return m.v.spans[i], true
}

// mergeLedger runs the merge over l's whole skeleton: on its cached view, with what
// the last run wrote taken off first, or on a fresh decode.
func (p *subagentMerge) mergeLedger(s *shard, l *ledger) (mergedView, error) {
	v := l.view
	if v == nil || l.upstream {
		var err error
		if v, err = p.decodeView(l.skel); err != nil {
			// only this processor's own encoding produced these bytes
			return mergedView{}, err
		}
		if !l.upstream {
			l.view = v
			s.led.viewed = append(s.led.viewed, l)
		}
	} else {
		for i, sp := range v.spans {
			attrs := sp.Attributes()
			attrs.RemoveIf(func(k string, _ pcommon.Value) bool {
				return isMergeWritten(k) || (k == genai.AttrCaller && !v.named[i])
			})
		}
	}
	merge.Apply(v.spans)
	return mergedView{v}, nil
}

// decodeView decodes a skeleton into a view.
func (p *subagentMerge) decodeView(skel []byte) (*ledgerView, error) {
	td, err := p.unmarshaler.UnmarshalTraces(skel)
	if err != nil {
		return nil, err
	}
	v := &ledgerView{td: td}
	v.add(appendSpans(nil, td))
	return v, nil
}

func (v *ledgerView) add(spans []ptrace.Span) {
	if v.idx == nil {
		v.idx = make(map[pcommon.SpanID]int32, len(spans))
	}
	for _, sp := range spans {
		v.idx[sp.SpanID()] = int32(len(v.spans))
		v.spans = append(v.spans, sp)
		_, named := sp.Attributes().Get(genai.AttrCaller)
		v.named = append(v.named, named)
	}
}

// extendView adds a batch's skeleton to l's cached view, if it has one.
func (p *subagentMerge) extendView(s *shard, l *ledger, delta []byte) error {
	if l.view == nil {
		return nil
	}
	td, err := p.unmarshaler.UnmarshalTraces(delta)
	if err != nil {
		l.view = nil
		return err
	}
	spans := appendSpans(nil, td)
	td.ResourceSpans().MoveAndAppendTo(l.view.td.ResourceSpans())
	l.view.add(spans)
	return nil
}

// dropViews lets go of the cached views of ledgers not extended since before cutoff
// (called under the shard's lock).
func (ls *ledgers) dropViews(cutoff int64) {
	keep := ls.viewed[:0]
	for _, l := range ls.viewed {
		if l.view != nil && l.lastSeen > cutoff {
			keep = append(keep, l)
			continue
		}
		l.view = nil
	}
	clear(ls.viewed[len(keep):])
	ls.viewed = keep
}

// rollback takes every ledger change of a call the next consumer refused back out, so
// the sender's retry counts as new spans, and what it re-emitted goes out again. It
// runs after the shard locks were let go, so other calls may have extended the same
// ledgers since: the refused spans are filtered out, not cut off.
func (p *subagentMerge) rollback(sc *scratch) {
	for i := range sc.touched {
		t := &sc.touched[i]
		l := t.l
		s := &p.shards[shardIndex(l.id)]
		s.mu.Lock()
		oldCost := l.size
		var drop map[pcommon.SpanID]struct{}
		for _, id := range sc.ids[t.ids[0]:t.ids[1]] {
			if drop == nil {
				drop = map[pcommon.SpanID]struct{}{}
			}
			drop[id] = struct{}{}
			if k := l.kept[id]; k != nil {
				l.keptLen -= int64(len(k.enc))
				delete(l.kept, id)
			}
		}
		if drop != nil {
			l.spans = l.spans.without(drop)
			l.view = nil
			var err error
			if l.skel, err = p.filterSpans(l.skel, drop); err != nil {
				p.logger.Error("taking refused spans out of a ledger failed", zap.Error(err))
			}
		}
		for _, id := range sc.ids[t.re[0]:t.re[1]] {
			if k := l.kept[id]; k != nil {
				k.fp = 0 // differs from any merge result: goes out again
			}
		}
		if t.re[1] > t.re[0] {
			l.lastEmit = t.prevLastEmit
			s.led.schedule(l, p.now())
		}
		if s.led.byID[l.id] != l {
			s.mu.Unlock()
			continue // ended meanwhile: its bytes are counted off already
		}
		if t.created && len(l.spans.keys) == 0 {
			s.led.remove(l)
			p.nLedgers.Add(-1)
			p.ledgerBytes.Add(-oldCost)
			s.mu.Unlock()
			continue
		}
		p.ledgerBytes.Add(l.cost() - oldCost)
		l.size = l.cost()
		s.mu.Unlock()
	}
	// the call's chunk is never written: what it recorded was refused
	sc.chunkSkel, sc.chunkSent = sc.chunkSkel[:0], sc.chunkSent[:0]
}

// filterSpans returns the encoded traces b without the spans in drop.
func (p *subagentMerge) filterSpans(b []byte, drop map[pcommon.SpanID]struct{}) ([]byte, error) {
	if len(b) == 0 {
		return b, nil
	}
	td, err := p.unmarshaler.UnmarshalTraces(b)
	if err != nil {
		return b, err
	}
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
				_, gone := drop[sp.SpanID()]
				return gone
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	return p.marshaler.MarshalTraces(td)
}

// without returns the set less the spans in drop. The asks of dropped model calls
// stay: only the completeness rule reads them, and an extra one only keeps the trace
// from counting as complete until the retry brings the span back.
func (s spanSet) without(drop map[pcommon.SpanID]struct{}) spanSet {
	var out spanSet
	for _, k := range s.keys {
		if _, gone := drop[k.id]; !gone {
			out.add(k, nil)
		}
	}
	out.asks = s.asks
	return out
}
