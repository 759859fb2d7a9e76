package subagentmerge

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// A chunk holds every trace its request extended (stream mode: their skeletons; hold
// mode: their buffered spans), and lives while one of them holds it. When a trace lets
// go of chunks that others still hold (its ledger ended; its buffer was passed on), an
// end marker says so: "end/<seq>" (under the mode's prefix) names the trace and those
// chunks, and a restart skips that trace's part of them. Without it, a restart would
// bring the trace back in part: in stream mode a ledger whose merge over what is left
// reads differently from what went out (a dispatcher whose subagent came in a chunk
// that is gone), re-emitting its dispatchers with partial numbers as their newest
// version; in hold mode spans already passed on, sent again. A request whose chunk
// carries spans of a ledger that ended while the request was on its way writes a marker
// for them with the chunk, for the same reason.
//
// A marker lives as long as the last chunk it names: it is deleted in the batch that
// deletes that chunk. Its sequence number is drawn after theirs, so the low mark stays
// below it while it matters, and a restart, which reads the markers of [low, high)
// before the chunks, sees it.

// chunkHold is a trace's hold on a stored chunk (a zero id: a batch's, of no one
// trace). Forgetting holds whose chunks live on writes a marker for their traces.
type chunkHold struct {
	id  pcommon.TraceID
	seq uint64
}

func (p *persister) endKey(seq uint64) string { return fmt.Sprintf("%send/%016x", p.prefix, seq) }

// appendEnd encodes one entry of a marker: the trace id, the count, the chunks.
func appendEnd(b []byte, id pcommon.TraceID, seqs ...uint64) []byte {
	b = append(b, id[:]...)
	b = protowire.AppendVarint(b, uint64(len(seqs)))
	for _, s := range seqs {
		b = protowire.AppendVarint(b, s)
	}
	return b
}

// parseEnd calls fn for each (trace, chunk) a marker names.
func parseEnd(b []byte, fn func(id pcommon.TraceID, seq uint64)) error {
	for len(b) > 0 {
		var id pcommon.TraceID
		if len(b) < len(id) {
			return errors.New("end marker: short trace id")
		}
		copy(id[:], b)
		b = b[len(id):]
		n, w := protowire.ConsumeVarint(b)
		if w < 0 {
			return errors.New("end marker: bad count")
		}
		b = b[w:]
		for ; n > 0; n-- {
			s, w := protowire.ConsumeVarint(b)
			if w < 0 {
				return errors.New("end marker: bad sequence number")
			}
			b = b[w:]
			fn(id, s)
		}
	}
	return nil
}

// forget counts holds off their chunks, deletes the chunks nothing holds any more, and
// writes one marker for the traces whose chunks live on (held by other traces); drop
// deletes chunks outright.
func (p *persister) forget(ctx context.Context, holds []chunkHold, drop ...uint64) error {
	if len(holds)+len(drop) == 0 {
		return nil
	}
	// p.mu serialises this with write: a chunk is deleted either here (written, and let
	// go of by every holder) or by its own write (drawn, not written yet), never deleted
	// here and stored after
	p.mu.Lock()
	defer p.mu.Unlock()
	ops, top := p.forgetOps(nil, holds, drop...)
	return p.apply(ctx, ops, top, nil)
}

// forgetOps is forget's work short of applying it: it appends to ops the deletions and
// the marker, and returns them with the "high" they need (p.mu held).
func (p *persister) forgetOps(ops []*storage.Operation, holds []chunkHold, drop ...uint64) ([]*storage.Operation, uint64) {
	var marker []byte
	var named []uint64
	p.refMu.Lock()
	// every hold first: a chunk two of them let go of is named by neither
	for _, h := range holds {
		p.refs[h.seq]--
	}
	for _, s := range drop {
		p.refs[s] = 0
	}
	for i := 0; i < len(holds); {
		id, from := holds[i].id, len(named)
		for ; i < len(holds) && holds[i].id == id; i++ {
			if s := holds[i].seq; p.lives(s) && !id.IsEmpty() {
				named = append(named, s)
			}
		}
		if len(named) > from {
			marker = appendEnd(marker, id, named[from:]...)
		}
	}
	for _, h := range holds {
		if _, counted := p.refs[h.seq]; counted && !p.lives(h.seq) {
			ops = p.deleteChunk(ops, h.seq) // takes it out of refs: once each
		}
	}
	for _, s := range drop {
		if _, counted := p.refs[s]; counted {
			ops = p.deleteChunk(ops, s)
		}
	}
	p.refMu.Unlock()
	top := p.high
	if len(named) > 0 {
		m := p.next.Add(1) - 1 // not live: the chunks it names hold the low mark below it
		ops = append(ops, storage.SetOperation(p.endKey(m), marker))
		p.nameChunks(m, named)
		top = max(top, m+1)
	}
	return ops, top
}

// lives reports whether chunk s stays: held, or drawn and not written yet (its write
// decides; p.refMu held).
func (p *persister) lives(s uint64) bool {
	_, drawn := p.drawn[s]
	return p.refs[s] > 0 || drawn
}

// deleteChunk appends the deletion of chunk s, and of every marker whose last chunk it
// was (p.mu and p.refMu held).
func (p *persister) deleteChunk(ops []*storage.Operation, s uint64) []*storage.Operation {
	delete(p.refs, s)
	delete(p.unwritten, s)
	ops = append(ops, storage.DeleteOperation(p.chunkKey(s)))
	for _, m := range p.endsOn[s] {
		if p.endLeft[m]--; p.endLeft[m] <= 0 {
			delete(p.endLeft, m)
			ops = append(ops, storage.DeleteOperation(p.endKey(m)))
		}
	}
	delete(p.endsOn, s)
	return ops
}

// nameChunks records that marker m names chunks (p.mu held).
func (p *persister) nameChunks(m uint64, chunks []uint64) {
	p.endLeft[m] += len(chunks)
	for _, s := range chunks {
		p.endsOn[s] = append(p.endsOn[s], m)
	}
}

// apply runs ops in one batch after what earlier failed batches left (p.retry:
// deletions and markers), and raises "high" to top. When the batch fails, ops wait in
// p.retry for the next batch; with keep, only those it keeps (a chunk's write waits in
// p.unwritten instead). p.mu held.
func (p *persister) apply(ctx context.Context, ops []*storage.Operation, top uint64, keep func(*storage.Operation) bool) error {
	all := slices.Concat(p.retry, ops)
	top = max(top, p.retryHigh)
	if top > p.high {
		all = append(all, storage.SetOperation(p.prefix+keyHigh, u64(top)))
	}
	if len(all) == 0 {
		return nil
	}
	if err := p.client.Batch(ctx, all...); err != nil {
		for _, op := range ops {
			if keep == nil || keep(op) {
				p.retry = append(p.retry, op)
			}
		}
		p.retryHigh = top
		p.noteWaiting()
		return err
	}
	p.high = top
	p.retry, p.retryHigh = nil, 0
	p.noteWaiting()
	return nil
}

// readEnds reads the markers of [low, high): which trace's part of which chunk a
// restart skips, and the chunks each marker names.
func (p *persister) readEnds(ctx context.Context) (map[endedChunk]struct{}, map[uint64][]uint64, error) {
	skip := map[endedChunk]struct{}{}
	markers := map[uint64][]uint64{}
	var errs []error
	for seq := p.low; seq < p.high; seq++ {
		b, err := p.client.Get(ctx, p.endKey(seq))
		if err != nil {
			return nil, nil, fmt.Errorf("storage: reading the end markers: %w", err)
		}
		if b == nil {
			continue
		}
		var named []uint64
		if err := parseEnd(b, func(id pcommon.TraceID, s uint64) {
			skip[endedChunk{id, s}] = struct{}{}
			named = append(named, s)
		}); err != nil {
			errs = append(errs, fmt.Errorf("storage: end marker %d: %w", seq, err))
		}
		markers[seq] = named
	}
	return skip, markers, errors.Join(errs...)
}

// endedChunk is a trace's part of a chunk that a restart skips.
type endedChunk struct {
	id  pcommon.TraceID
	seq uint64
}

// settleAtStart keeps, of the markers read at start, those naming a chunk something
// holds (a restored ledger; a chunk left for the next start), and deletes the rest with
// the chunks read that nothing holds.
func (p *persister) settleAtStart(ctx context.Context, markers map[uint64][]uint64, read []uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ops []*storage.Operation
	p.refMu.Lock()
	for _, s := range read {
		if p.refs[s] <= 0 {
			delete(p.refs, s)
			ops = append(ops, storage.DeleteOperation(p.chunkKey(s)))
		}
	}
	for m, named := range markers {
		var live []uint64
		for _, s := range named {
			if p.refs[s] > 0 {
				live = append(live, s)
			}
		}
		if len(live) == 0 {
			ops = append(ops, storage.DeleteOperation(p.endKey(m)))
			continue
		}
		p.nameChunks(m, live)
	}
	p.refMu.Unlock()
	return p.apply(ctx, ops, p.high, nil)
}

// removeEnded takes out of chunk seq's spans those of traces a marker says let go of
// it, and reports whether it took any.
func removeEnded(td ptrace.Traces, seq uint64, skip map[endedChunk]struct{}) bool {
	if len(skip) == 0 {
		return false
	}
	removed := false
	spaniter.RemoveIf(td, func(sp ptrace.Span) bool {
		_, ended := skip[endedChunk{sp.TraceID(), seq}]
		removed = removed || ended
		return ended
	})
	return removed
}
