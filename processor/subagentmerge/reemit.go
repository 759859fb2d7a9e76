package subagentmerge

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// fingerprint hashes what the merge wrote on a span (its merge status, merged results
// and the caller the trace's shape gave it): two versions of a span with the same
// fingerprint read the same at every sink. It does not depend on the order of the
// attributes (the merge appends what it writes; a span passed on has it after the
// emitter's own): each attribute is hashed alone and the hashes are added. It runs on
// every kept span of every merge run, so it hashes values in place (FNV-1a) instead of
// formatting them.
func fingerprint(attrs pcommon.Map) uint64 {
	var sum uint64
	attrs.Range(func(k string, v pcommon.Value) bool {
		if merge.Written(k) || k == genai.AttrCaller {
			sum += hashValue(hashByte(hashString(fnvOffset, k), 0), v)
		}
		return true
	})
	if sum != 0 {
		return sum
	}
	return 1 // 0 is "must go out again"
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = hashByte(h, s[i])
	}
	return h
}

func hashUint(h, u uint64) uint64 {
	for range 8 {
		h = hashByte(h, byte(u))
		u >>= 8
	}
	return h
}

// hashValue hashes v's type and content into h: values of different types differ even
// where their text would not (the string "5" and the int 5). Slices and maps are hashed
// element by element, with their lengths, in their order.
func hashValue(h uint64, v pcommon.Value) uint64 {
	h = hashByte(h, byte(v.Type()))
	switch v.Type() {
	case pcommon.ValueTypeStr:
		h = hashString(h, v.Str())
	case pcommon.ValueTypeInt:
		h = hashUint(h, uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		h = hashUint(h, math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		if v.Bool() {
			h = hashByte(h, 1)
		}
	case pcommon.ValueTypeBytes:
		b := v.Bytes()
		h = hashUint(h, uint64(b.Len()))
		for _, c := range b.AsRaw() {
			h = hashByte(h, c)
		}
	case pcommon.ValueTypeSlice:
		sl := v.Slice()
		h = hashUint(h, uint64(sl.Len()))
		for i := range sl.Len() {
			h = hashValue(h, sl.At(i))
		}
	case pcommon.ValueTypeMap:
		m := v.Map()
		h = hashUint(h, uint64(m.Len()))
		m.Range(func(k string, e pcommon.Value) bool {
			h = hashValue(hashByte(hashString(h, k), 0), e)
			return true
		})
	}
	return h
}

// reemit appends to out, whole and under their span ids, the kept spans whose merge
// results in view differ from what last went out, and remembers what went out (its
// fingerprint and revision: the next re-emission starts from the version first passed
// on again). Each re-emission carries agentmeter.merge.revision (markReemitted); model
// calls also carry agentmeter.merge.status "corrected", which the token metrics skip.
// It appends the re-emitted span ids to ids.
//
// A pending call (genai.AttrCallerPending) whose caller is now settled, or every pending
// call with final (its ledger ends), goes out even when its merge results did not
// change, marked genai.AttrCallerSettled: the one version the token metrics count.
//
// With settled (storage), the versions that settle a pending caller are appended to it
// encoded, for the ledger's next chunk: a restart then knows the call is counted.
func (p *subagentMerge) reemit(l *ledger, view *mergedView, out ptrace.Traces, c *counts, now int64, ids []pcommon.SpanID, final bool, settled *[]byte) ([]pcommon.SpanID, error) {
	l.lastEmit = now
	var errs []error
	for id, k := range l.kept {
		fp, v, ok := view.fingerprint(id, k)
		if !ok {
			continue
		}
		settle := k.pending && (final || p.settled(l, id, view.namesCaller(id)))
		if fp == k.fp && !settle {
			continue
		}
		if v == (pcommon.Map{}) { // the fingerprint was kept: read what it was read from
			v, _ = view.attrs(id)
		}
		d, err := p.unmarshaler.UnmarshalTraces(k.enc)
		if err != nil || d.SpanCount() != 1 {
			errs = append(errs, fmt.Errorf("a kept span does not decode: %w", err))
			continue
		}
		rs := d.ResourceSpans().At(0)
		ss := rs.ScopeSpans().At(0)
		sp := ss.Spans().At(0)
		attrs := sp.Attributes()
		// k.enc is the version that first went out: what later ones changed on it
		// besides the merge's results is in k, so nothing is encoded again (a caller
		// the merge gave it stays what it was: the trace's shape above a call only
		// grows)
		if k.rev != 0 {
			attrs.PutInt(genai.AttrMergeRevision, k.rev)
		}
		if !k.pending {
			attrs.Remove(genai.AttrCallerPending) // settled before
		}
		writeMerged(attrs, v)
		if genai.IsModelCallSpan(sp.Name(), attrs) {
			attrs.PutStr(genai.AttrMergeStatus, genai.MergeCorrected)
		} else {
			countStatus(attrs, c)
		}
		c.corrected++
		markReemitted(attrs, now)
		if settle {
			attrs.Remove(genai.AttrCallerPending)
			attrs.PutBool(genai.AttrCallerSettled, true)
			k.pending = false
			l.pending--
			l.settledAt = append(l.settledAt, id)
		}
		if !settle {
			// counted by its settled version: a restored one may be this span's base
			attrs.Remove(genai.AttrCallerSettled)
		}
		if r, ok := attrs.Get(genai.AttrMergeRevision); ok {
			k.rev = r.Int()
		}
		k.fp = fp
		if settle && settled != nil {
			enc, err := p.marshaler.MarshalTraces(d)
			if err != nil {
				errs = append(errs, fmt.Errorf("encoding a settled call: %w", err))
			}
			*settled = append(*settled, enc...)
		}
		sp.MoveTo(slotUnder(out, rs.Resource(), ss.Scope()))
		ids = append(ids, id)
	}
	return ids, errors.Join(errs...)
}

// flushInto is flush within a call, recording the re-emitted ids in sc.
func (p *subagentMerge) flushInto(s *shard, l *ledger, out ptrace.Traces, c *counts, now int64, sc *scratch) error {
	var err error
	sc.ids, err = p.flush(s, l, out, c, now, sc.ids, false, p.settledSink(sc))
	return err
}

// flush re-emits what changed in l (called under its shard's lock); with final, every
// pending caller is settled as it stands (its ledger ends).
func (p *subagentMerge) flush(s *shard, l *ledger, out ptrace.Traces, c *counts, now int64, ids []pcommon.SpanID, final bool, settled *[]byte) ([]pcommon.SpanID, error) {
	s.led.unschedule(l)
	if err := p.warm(s, l, now); err != nil {
		return ids, err
	}
	view, err := p.mergeLedger(l)
	if err != nil {
		return ids, err
	}
	ids, err = p.reemit(l, &view, out, c, now, ids, final, settled)
	p.prune(l)
	p.ledgerBytes.Add(l.cost() - l.size)
	l.size = l.cost()
	return ids, err
}

// prune forgets the kept spans that can no longer change (called when nothing waits to
// be re-emitted): a model call that asked for no tool call once every ancestor of it is
// there (its caller is settled), and a tool span once it is merged. Dispatchers stay for
// the ledger's life: a subagent's spans from another process can still come. A complete
// trace's facts go too: the merge runs over it again only if late spans come.
func (p *subagentMerge) prune(l *ledger) {
	if l.thaw() != nil {
		return // keeps what it has: nothing is pruned from a ledger that does not thaw
	}
	if l.complete {
		l.dropFacts()
	}
	below := &modelsBelow{s: &l.spans}
	for id, k := range l.kept {
		if k.unanswered || slices.Contains(l.settledAt, id) {
			continue // its call, or the one that settled it, not answered yet: a refusal gives it back
		}
		i := l.spans.find(id)
		if i < 0 {
			continue
		}
		key := l.spans.keys[i]
		final := false
		switch {
		case key.kind&kindModel != 0:
			final = key.kind&kindFinal != 0 && l.spans.rooted(key)
		case key.kind&kindTool != 0:
			final = l.spans.toolStatus(i, below) == genai.MergeMerged
		}
		if final && !k.pending {
			l.keptLen -= int64(len(k.enc))
			delete(l.kept, id)
		}
	}
}
