package subagentmerge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"

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

// endLedger takes l out of its shard (whose lock the caller holds) for reason, re-emitting
// first what changed since it last went out, and returns what it held on disk and what
// it re-emitted.
func (p *subagentMerge) endLedger(s *shard, l *ledger, out ptrace.Traces, c *counts, now int64, reason int) ended {
	e := ended{l: l, reason: reason}
	if l.scheduled() || l.pending > 0 {
		from := len(l.settledAt)
		var sink *[]byte
		if p.store != nil {
			sink = &e.settledEnc
		}
		var err error
		if e.ids, err = p.flush(s, l, out, c, now, nil, true, sink); err != nil {
			p.logger.Error("re-emitting the last corrections of an ending ledger failed", zap.Error(err))
		}
		e.settled = slices.Clone(l.settledSince(from))
	}
	s.led.remove(l)
	s.led.ending[l.id] = l
	p.nLedgers.Add(-1)
	p.ledgerBytes.Add(-l.size)
	e.seqs = l.seqs // l keeps them too, in case a call takes it back (revive)
	return e
}

// revive takes back ledger l, ended by a call or sweep that waits for the next
// consumer's answer, for a call that brings more spans of its trace (under s's lock).
// A new ledger instead would hold nothing the ended one knew: its merge would miss it,
// and if the ender's re-emissions are then refused, the calls they settled could never
// be settled again. l waits on the ender's answer (endedHolds, reinstate), which settles
// what its end re-emitted.
func (p *subagentMerge) revive(s *shard, l *ledger) *ledger {
	delete(s.led.ending, l.id)
	l.revived = true
	l.waiting++
	s.led.add(l)
	p.nLedgers.Add(1)
	l.size = l.cost()
	p.ledgerBytes.Add(l.size)
	return l
}

// ended is a ledger that ended: what it held on disk, and the spans its last
// re-emissions were and the calls they settled (given back if a refused call ended it
// for capacity: reinstate).
type ended struct {
	l       *ledger
	reason  int // why it ended (relCapacity, relIdle): counted once it stays ended (endedHolds)
	seqs    []uint64
	ids     []pcommon.SpanID
	settled []pcommon.SpanID
	// settledEnc is what settled those calls, encoded (storage): stored as counted when
	// a call took the ledger back (revive) and the re-emissions were taken, so that a
	// restart does not settle, and count, them again
	settledEnc []byte
}

// endOverCapacity ends ledgers of all shards until they fit ledger_limit_mib and
// num_traces, those of complete traces first, each kind least recently extended first;
// their last re-emissions go into out. It returns the ended ledgers: the call forgets
// their chunks once the next consumer took out, or, refused, takes them back (reinstate).
func (p *subagentMerge) endOverCapacity(now int64, c *counts, out ptrace.Traces) []ended {
	var gone []ended
	if p.ledgerBytes.Load() > p.maxLedgerBytes {
		for i := range p.shards {
			s := &p.shards[i]
			s.mu.Lock()
			p.freezeForRoom(s, now)
			s.mu.Unlock()
		}
	}
	for p.ledgerBytes.Load() > p.maxLedgerBytes || p.nLedgers.Load() > int64(p.cfg.NumTraces) {
		// the least recently extended ledger of a complete trace first; a run in flight's
		// only when no complete trace has one
		best, kind, bestSeen := -1, 0, int64(0)
		for i := range p.shards {
			s := &p.shards[i]
			s.mu.Lock()
			for k, ch := range s.led.ageChains() {
				if h := firstEndable(ch); h != nil && (best < 0 || k < kind || (k == kind && h.lastSeen < bestSeen)) {
					best, kind, bestSeen = i, k, h.lastSeen
				}
			}
			s.mu.Unlock()
		}
		if best < 0 {
			break
		}
		s := &p.shards[best]
		s.mu.Lock()
		// Only a ledger of the kind chosen: a concurrent call may have ended the one
		// seen, and the shard's next may be a run in flight while other shards still
		// hold complete traces. Then the choice is made again.
		if l := firstEndable(s.led.ageChains()[kind]); l != nil {
			gone = append(gone, p.endLedger(s, l, out, c, now, relCapacity))
		}
		s.mu.Unlock()
	}
	return gone
}

// reinstate takes back ended ledgers whose last re-emissions the next consumer refused:
// those a refused call ended for room, and those a sweep ended for idleness. They go out
// again at at (a later call or sweep ends them again). A ledger is never ended while a
// call or sweep waits on it (ledger.waiting), so none of them holds spans rollback took
// out; one a call took back meanwhile (revive) is in its shard already.
func (p *subagentMerge) reinstate(gone []ended, at int64) {
	for _, e := range gone {
		l := e.l
		s := &p.shards[shardIndex(l.id)]
		s.mu.Lock()
		if l.revived {
			l.revived = false
			l.waiting--
		} else {
			delete(s.led.ending, l.id)
			s.led.add(l)
			p.nLedgers.Add(1)
			l.size = 0 // its end counted its bytes off
		}
		giveBack(l, e.ids, e.settled)
		s.led.schedule(l, at)
		s.led.setComplete(l, p.stateWith(&l.spans) == stComplete)
		p.ledgerBytes.Add(l.cost() - l.size)
		l.size = l.cost()
		s.mu.Unlock()
	}
}

// sweepStream re-emits what is due and ends the ledgers idle for wait_duration. When
// the next consumer refuses the re-emissions, the ledgers they came from go out again
// settle_time later: the live ones (reopen), and the ones that ended in the sweep, taken
// back (reinstate) and ended again when due.
func (p *subagentMerge) sweepStream(ctx context.Context, now int64) error {
	out := ptrace.NewTraces()
	var c counts
	var gone []ended
	var errs []error
	type flushed struct {
		l       *ledger
		ids     []pcommon.SpanID
		calls   []pcommon.SpanID // the pending calls it settled
		settled []byte           // their settled versions, encoded (storage)
	}
	var sent []flushed
	cutoff := now - p.wait
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for _, ch := range s.led.ageChains() {
			for l := ch.head; l != nil && l.lastSeen <= cutoff; {
				next := ch.next(l)
				// not while something waits on it, nor before its refused last
				// re-emissions are due again
				if l.waiting == 0 && l.dueAt <= now {
					gone = append(gone, p.endLedger(s, l, out, &c, now, relIdle))
				}
				l = next
			}
		}
		for l := s.led.due.head; l != nil && l.dueAt <= now; l = s.led.due.head {
			f := flushed{l: l}
			from := len(l.settledAt)
			var sink *[]byte
			if p.store != nil {
				sink = &f.settled
			}
			ids, err := p.flush(s, l, out, &c, now, nil, false, sink)
			if err != nil {
				errs = append(errs, err)
			}
			f.ids = ids
			f.calls = slices.Clone(l.settledSince(from)) // given back if refused
			l.waiting++                                  // until the send is answered
			sent = append(sent, f)
		}
		p.freezeIdle(s, now)
		s.mu.Unlock()
	}
	var nerr error
	if out.ResourceSpans().Len() > 0 {
		nerr = p.next.ConsumeTraces(ctx, out)
	}
	// a partial refusal names what was not taken: only those ledgers re-emit again
	var left map[pcommon.TraceID]bool
	if rest, partly := notTaken(out, nerr); nerr != nil && partly {
		left = traceIDsIn(rest)
	}
	again := p.now() + max(p.settle, int64(minUnsentBackoff))
	var back, forget []ended
	for _, e := range gone {
		if nerr != nil && (left == nil || left[e.l.id]) && len(e.ids) > 0 {
			back = append(back, e) // it ends once they are taken
		} else {
			forget = append(forget, e)
		}
	}
	// what follows is storage: not given up when Shutdown cancels the sweep (the send
	// above is)
	ctx = context.WithoutCancel(ctx)
	p.tel.record(ctx, &c)
	for _, f := range sent {
		s := &p.shards[shardIndex(f.l.id)]
		s.mu.Lock()
		refused := nerr != nil && (left == nil || left[f.l.id])
		switch {
		case !refused:
			f.l.unsettle(f.calls)
		case s.led.byID[f.l.id] == f.l:
			p.reopen(s, f.l, f.ids, f.calls, again)
		}
		// else a refused call took out the ledger it had created, with all it held
		s.mu.Unlock()
	}
	if nerr != nil {
		errs = append(errs, fmt.Errorf("subagentmerge: passing on %d re-emitted spans (they go out again): %w", out.SpanCount(), nerr))
	}
	// the settled versions taken (all, or what a partial refusal does not name) are
	// counted now: stored, so a restart does not settle them again
	var items []settledOf
	for _, f := range sent {
		if len(f.settled) > 0 && (nerr == nil || (left != nil && !left[f.l.id])) {
			items = append(items, settledOf{f.l, f.settled})
		}
	}
	if err := p.commitSettled(ctx, items); err != nil {
		errs = append(errs, fmt.Errorf("subagentmerge: storing settled calls: %w", err))
	}
	for _, f := range sent {
		p.unwait(f.l)
	}
	p.reinstate(back, again)
	if err := p.forgetLedgers(ctx, forget...); err != nil {
		errs = append(errs, fmt.Errorf("subagentmerge: storing the calls ended ledgers settled: %w", err))
	}
	return errors.Join(errs...)
}

// settledSink is where a call's re-emissions put the versions that settle waiting calls:
// the call's chunk, with storage.
func (p *subagentMerge) settledSink(sc *scratch) *[]byte {
	if p.store == nil {
		return nil
	}
	return &sc.chunkSent
}

// settledOf is what a flush outside a call settled in one ledger, encoded.
type settledOf struct {
	l   *ledger
	enc []byte
}

// commitSettled stores, once the next consumer took them, the versions that settled
// waiting calls outside a call (the sweeper, shutdown), as a chunk of their ledgers
// without skeletons: a restart reads them over the first versions, so those calls are
// not settled, and counted, again. A crash between the send and this write still
// counts them twice.
func (p *subagentMerge) commitSettled(ctx context.Context, items []settledOf) error {
	if p.store == nil || len(items) == 0 {
		return nil
	}
	seq := p.store.draw()
	chunk := protowire.AppendVarint(nil, 0) // no skeletons
	refs := 0
	for _, it := range items {
		if p.holdChunk(it.l, seq) {
			refs++
			chunk = append(chunk, it.enc...)
		}
	}
	if refs == 0 {
		p.store.undraw(seq)
		return nil
	}
	return p.store.write(ctx, seq, chunk)
}

// flushAll re-emits every dirty ledger's changes (shutdown). With storage the ledgers
// stay on disk and a restart goes on from them; without, they end here, so every
// pending caller is settled as it stands (its call counted).
func (p *subagentMerge) flushAll(ctx context.Context) error {
	out := ptrace.NewTraces()
	var c counts
	var errs []error
	var items []settledOf
	now := p.now()
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for l := s.led.due.head; l != nil; l = s.led.due.head {
			var settled []byte
			var sink *[]byte
			if p.store != nil {
				sink = &settled
			}
			if _, err := p.flush(s, l, out, &c, now, nil, p.store == nil, sink); err != nil {
				errs = append(errs, err)
			}
			if len(settled) > 0 {
				items = append(items, settledOf{l, settled})
			}
		}
		if p.store == nil {
			for _, ch := range s.led.ageChains() {
				for l := ch.head; l != nil; l = ch.next(l) {
					if l.pending > 0 {
						if _, err := p.flush(s, l, out, &c, now, nil, true, nil); err != nil {
							errs = append(errs, err)
						}
					}
				}
			}
		}
		s.mu.Unlock()
	}
	p.tel.record(ctx, &c)
	if out.ResourceSpans().Len() > 0 {
		if err := p.next.ConsumeTraces(ctx, out); err != nil {
			errs = append(errs, fmt.Errorf("subagentmerge: passing on %d re-emitted spans at shutdown: %w", out.SpanCount(), err))
		} else if err := p.commitSettled(ctx, items); err != nil {
			errs = append(errs, fmt.Errorf("subagentmerge: storing settled calls: %w", err))
		}
	}
	return errors.Join(errs...)
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
