package subagentmerge

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// What arrives after a trace was released is merged into it after the fact. A released
// trace's tombstone keeps, for late_span_window:
//
//   - skel: every span as it arrived (before the merge wrote anything), trimmed to what
//     the merge reads (ids, name, times, small attributes; no message contents, events
//     or links), encoded as OTLP protobuf;
//   - sent: the last version passed on of every model call that asked for tool calls (a
//     possible dispatching span), whole, under its resource and scope.
//
// When late spans come, they are added to skel and the merge is run again over it.
// The late spans go on carrying what that merge wrote for them; every dispatching span
// already passed on whose agentmeter.subagent.* changed is re-emitted, whole, under the
// same span id, with the corrected values and agentmeter.merge.status = "corrected".
// Vendors upsert it by id (LangSmith and Langfuse do); the token metrics skip it, since
// its own usage was counted when it first went on.

// maxSkeletonString is the longest string attribute a skeleton keeps: ids, names,
// models, statuses and usage fit; message contents and tool results do not.
const maxSkeletonString = 256

// copyMergeWritten replaces dst's merge-written attributes with src's.
func copyMergeWritten(dst, src pcommon.Map) {
	dst.RemoveIf(func(k string, _ pcommon.Value) bool { return merge.Written(k) })
	src.Range(func(k string, v pcommon.Value) bool {
		if merge.Written(k) {
			v.CopyTo(dst.PutEmpty(k))
		}
		return true
	})
}

// sameSubagentResult reports whether a and b carry the same merged results.
func sameSubagentResult(a, b pcommon.Map) bool {
	n := 0
	equal := true
	a.Range(func(k string, v pcommon.Value) bool {
		if !merge.SubagentResult(k) {
			return true
		}
		n++
		w, ok := b.Get(k)
		equal = ok && w.Equal(v)
		return equal
	})
	if !equal {
		return false
	}
	b.Range(func(k string, _ pcommon.Value) bool {
		if merge.SubagentResult(k) {
			n--
		}
		return true
	})
	return n == 0
}

// asksForTools reports whether sp is a model call that asked for tool calls: a span a
// late subtree could need corrected.
func asksForTools(sp ptrace.Span) bool {
	if !genai.IsModelCallSpan(sp.Name(), sp.Attributes()) {
		return false
	}
	return len(genai.DispatchedToolCallIDs(sp.Attributes())) > 0
}

// recorder collects, while a trace is released, what its tombstone keeps.
type recorder struct {
	skel skeletonWriter
	sent ptrace.Traces
	// lent are the spans in sent, moved there from where they go on (from) rather than
	// copied: attach gives them back once it has encoded sent
	lent []lentSpan
	// keep are the model calls whose last version is kept whole (possible dispatchers);
	// the rest is scratch for choosing them.
	keep     map[pcommon.SpanID]struct{}
	asks     []uint32
	ranges   [][2]int32
	kinds    []uint8
	dispatch map[uint32]struct{}
	runUnder map[pcommon.SpanID]struct{}
}

// lentSpan is a span moved into a recorder's sent (at) from its place in a batch (from).
type lentSpan struct{ from, at ptrace.Span }

func newRecorder() *recorder {
	return &recorder{
		sent: ptrace.NewTraces(), keep: map[pcommon.SpanID]struct{}{},
		dispatch: map[uint32]struct{}{}, runUnder: map[pcommon.SpanID]struct{}{},
	}
}

func (r *recorder) reset() {
	r.skel.reset()
	r.sent = ptrace.NewTraces()
	clear(r.lent)
	r.lent = r.lent[:0]
	clear(r.keep)
	clear(r.dispatch)
	clear(r.runUnder)
	r.asks, r.ranges, r.kinds = r.asks[:0], r.ranges[:0], r.kinds[:0]
}

// beforeAll records spans as they arrived (call before the merge) and chooses which
// model calls to keep whole: with all, every one that asked for tool calls (its tool
// spans may still come); else, as for a complete trace (every asked tool span is
// there), only those that asked for a subagent dispatch, the only calls a late span
// (a step under a subagent's run) can change. A nil recorder records nothing.
func (r *recorder) beforeAll(spans []ptrace.Span, all bool) {
	if r == nil {
		return
	}
	for _, sp := range spans {
		f := r.skel.add(sp)
		from := int32(len(r.asks))
		var kind uint8
		kind, _, r.asks = f.classify(sp, r.asks)
		r.ranges = append(r.ranges, [2]int32{from, int32(len(r.asks))})
		r.kinds = append(r.kinds, kind)
		if kind&kindAgent != 0 && !isLocalRoot(sp) {
			r.runUnder[sp.ParentSpanID()] = struct{}{}
		}
	}
	for i, sp := range spans {
		if r.kinds[i]&kindTool == 0 {
			continue
		}
		if _, run := r.runUnder[sp.SpanID()]; run || r.kinds[i]&kindDispatch != 0 {
			if v, ok := sp.Attributes().Get(genai.AttrToolCallID); ok {
				r.dispatch[callHash(v.AsString())] = struct{}{}
			}
		}
	}
	for i, sp := range spans {
		rg := r.ranges[i]
		if r.kinds[i]&kindModel == 0 || rg[0] == rg[1] {
			continue
		}
		keep := all
		for _, h := range r.asks[rg[0]:rg[1]] {
			if _, ok := r.dispatch[h]; ok {
				keep = true
			}
		}
		if keep {
			r.keep[sp.SpanID()] = struct{}{}
		}
	}
}

// afterFrom records the possible dispatchers among the spans of rss from index from on.
func (r *recorder) afterFrom(rss ptrace.ResourceSpansSlice, from int) {
	for i := from; i < rss.Len(); i++ {
		rs := rss.At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				r.after(ss.Spans().At(k), rs.Resource(), ss.Scope())
			}
		}
	}
}

// after records sp as it goes on (call after the merge), when it may be a dispatcher
// or is a tool span that went on without being merged (its dispatcher may come late).
func (r *recorder) after(sp ptrace.Span, res pcommon.Resource, scope pcommon.InstrumentationScope) {
	if _, ok := r.keep[sp.SpanID()]; ok || unmergedTool(sp) {
		at := slotUnder(r.sent, res, scope)
		sp.MoveTo(at)
		r.lent = append(r.lent, lentSpan{from: sp, at: at})
	}
}

// giveBack moves the spans after lent back to where they came from.
func (r *recorder) giveBack() {
	for _, l := range r.lent {
		l.at.MoveTo(l.from)
	}
	clear(r.lent)
	r.lent = r.lent[:0]
}

// unmergedTool reports whether sp is a tool span that is not (yet) merged: a late
// dispatcher or subtree can still change its merge status.
func unmergedTool(sp ptrace.Span) bool {
	if !genai.IsToolCallSpan(sp.Name(), sp.Attributes()) {
		return false
	}
	return mergeStatus(sp.Attributes()) != genai.MergeMerged
}

// mergeStatus is a span's agentmeter.merge.status, "" when it has none.
func mergeStatus(attrs pcommon.Map) string {
	if v, ok := attrs.Get(genai.AttrMergeStatus); ok {
		return v.AsString()
	}
	return ""
}

// markReemitted gives a span passed on again its next agentmeter.merge.revision: the
// emission time in milliseconds, or one more than the last (so it grows across
// restarts too).
func markReemitted(attrs pcommon.Map, now int64) {
	rev := now / 1e6
	if old, ok := attrs.Get(genai.AttrMergeRevision); ok && old.Type() == pcommon.ValueTypeInt && old.Int() >= rev {
		rev = old.Int() + 1
	}
	attrs.PutInt(genai.AttrMergeRevision, rev)
}

// appendUnder appends a copy of sp to td under res and scope, reusing td's last
// resource and scope when they are the same.
func appendUnder(td ptrace.Traces, sp ptrace.Span, res pcommon.Resource, scope pcommon.InstrumentationScope) {
	sp.CopyTo(slotUnder(td, res, scope))
}

// slotUnder appends an empty span to td under res and scope, reusing td's last resource
// and scope when they are the same, and returns it.
func slotUnder(td ptrace.Traces, res pcommon.Resource, scope pcommon.InstrumentationScope) ptrace.Span {
	rss := td.ResourceSpans()
	var rs ptrace.ResourceSpans
	if n := rss.Len(); n > 0 && rss.At(n-1).Resource().Attributes().Equal(res.Attributes()) {
		rs = rss.At(n - 1)
	} else {
		rs = rss.AppendEmpty()
		res.CopyTo(rs.Resource())
	}
	var ss ptrace.ScopeSpans
	if n := rs.ScopeSpans().Len(); n > 0 && sameScopeOf(rs.ScopeSpans().At(n-1).Scope(), scope) {
		ss = rs.ScopeSpans().At(n - 1)
	} else {
		ss = rs.ScopeSpans().AppendEmpty()
		scope.CopyTo(ss.Scope())
	}
	return ss.Spans().AppendEmpty()
}

func sameScopeOf(a, b pcommon.InstrumentationScope) bool {
	return a.Name() == b.Name() && a.Version() == b.Version() && a.Attributes().Equal(b.Attributes())
}

// correction is the result of merging late spans into a released trace.
type correction struct {
	skel, sent []byte        // the tombstone's new records
	out        ptrace.Traces // re-emitted dispatching spans (marked corrected)
	n          int           // how many
}

// correct merges the late spans into the released trace recorded in skel and sent:
// it writes onto each late span what the merge now says about it, and returns the
// re-emissions and the new records. late spans must not have been changed yet.
func (p *subagentMerge) correct(skel, sent []byte, late []lateSpan, at int64) (correction, error) {
	var c correction
	var w skeletonWriter
	for _, l := range late {
		w.add(l.span)
	}
	c.skel = append(skel[:len(skel):len(skel)], w.message()...)
	s, err := p.unmarshaler.UnmarshalTraces(c.skel)
	if err != nil {
		return c, err
	}
	spans := appendSpans(nil, s)
	byID := make(map[pcommon.SpanID]ptrace.Span, len(spans))
	for _, sp := range spans {
		byID[sp.SpanID()] = sp
	}
	merge.Apply(spans)

	d := ptrace.NewTraces()
	if len(sent) > 0 {
		if d, err = p.unmarshaler.UnmarshalTraces(sent); err != nil {
			return c, err
		}
	}
	c.out = ptrace.NewTraces()
	rss := d.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			sc := rs.ScopeSpans().At(j)
			for k := 0; k < sc.Spans().Len(); k++ {
				sp := sc.Spans().At(k)
				now, ok := byID[sp.SpanID()]
				if !ok {
					continue
				}
				if genai.IsModelCallSpan(sp.Name(), sp.Attributes()) {
					if sameSubagentResult(sp.Attributes(), now.Attributes()) {
						continue
					}
					copyMergeWritten(sp.Attributes(), now.Attributes())
					sp.Attributes().PutStr(genai.AttrMergeStatus, genai.MergeCorrected)
				} else {
					if mergeStatus(sp.Attributes()) == mergeStatus(now.Attributes()) {
						continue
					}
					copyMergeWritten(sp.Attributes(), now.Attributes())
				}
				markReemitted(sp.Attributes(), at)
				appendUnder(c.out, sp, rs.Resource(), sc.Scope())
				c.n++
			}
		}
	}
	for _, l := range late {
		if now, ok := byID[l.span.SpanID()]; ok {
			copyMergeWritten(l.span.Attributes(), now.Attributes())
			// attribution by shape, from the whole trace as now known
			if _, has := l.span.Attributes().Get(genai.AttrCaller); !has {
				if v, ok := now.Attributes().Get(genai.AttrCaller); ok {
					l.span.Attributes().PutStr(genai.AttrCaller, v.AsString())
				}
			}
		}
		if asksForTools(l.span) || unmergedTool(l.span) {
			appendUnder(d, l.span, l.res, l.scope)
		}
	}
	if c.sent, err = p.marshaler.MarshalTraces(d); err != nil {
		return c, err
	}
	return c, nil
}

// lateSpan is a span of an already released trace, with where it sits in its batch.
type lateSpan struct {
	span  ptrace.Span
	res   pcommon.Resource
	scope pcommon.InstrumentationScope
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
			s.setRecord(tomb, cr.skel, cr.sent)
			s.trimRecords(p.recordBudget())
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
	rec.giveBack()
	if err != nil {
		p.logger.Error("recording a released trace failed; spans arriving after it will not be merged", zap.Error(err))
		return
	}
	s := &p.shards[shardIndex(id)]
	s.mu.Lock()
	if tomb := s.released[id]; tomb != nil && tomb.skel == nil {
		s.setRecord(tomb, skel, sent)
		s.trimRecords(p.recordBudget())
	}
	s.mu.Unlock()
}

// recordBudget is one shard's share of ledger_limit_mib for records: releases spread
// over the shards by trace id, so the shards' earliest records go first overall too.
func (p *subagentMerge) recordBudget() int64 { return p.maxRecords / numShards }
