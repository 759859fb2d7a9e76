package subagentmerge

// Gather mode with queued delivery and storage: which traces went out, on disk.
//
// A released trace is remembered for late_span_window (its tombstone): a later version
// of one of its spans then goes on at once as an update of the span the sink has (a
// LangSmith PATCH), a late span as a new one. The tombstones are in memory. So that a
// restart keeps this, each delivery the next consumer took writes which traces it sent
// (a record), in the transaction that lets go of their chunks; the records past
// late_span_window are deleted by later deliveries. A restart rebuilds a tombstone for
// each trace a record names: it knows the trace went out, not which spans, so every later
// version of a span of it goes as an update. A trace whose release was placed but never
// written (its request was not answered, the sender sends it again) has no record, and
// its spans are held again as they come.

import (
	"context"
	"encoding/binary"
	"fmt"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// Keys of the records: the range of their numbers on disk, and each record.
const (
	keySentLow  = "sentlow"
	keySentHigh = "senthigh"
)

func (p *persister) sentKey(n uint64) string { return fmt.Sprintf("%ssent/%016x", p.prefix, n) }

// sentRecord is a record on disk: its number and when the delivery was taken.
type sentRecord struct {
	n  uint64
	at int64
}

// sentLow writes the lowest record number on disk: the first record kept, or the next
// one when none is (p.mu held, or at start).
func (p *persister) sentLow() *storage.Operation {
	low := p.sentNext
	if len(p.sent) > 0 {
		low = p.sent[0].n
	}
	return storage.SetOperation(p.prefix+keySentLow, u64(low))
}

// forgetSent is forget of a delivery's holds, the next consumer having taken it, with
// the record of the traces it sent (ids) and the deletion of the records older than
// window, in one transaction.
func (p *persister) forgetSent(ctx context.Context, holds []chunkHold, ids []pcommon.TraceID, now, window int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ops, top := p.forgetOps(nil, holds)
	n := 0
	for ; n < len(p.sent); n++ {
		// one stamped ahead of the clock (a clock stepped back) counts from now, or it
		// would keep every record behind it until the clock caught up
		r := &p.sent[n]
		r.at = min(r.at, now)
		if r.at > now-window {
			break
		}
		ops = append(ops, storage.DeleteOperation(p.sentKey(r.n)))
	}
	if n > 0 {
		p.sent = p.sent[n:]
		ops = append(ops, p.sentLow())
	}
	if len(ids) > 0 {
		v := make([]byte, 8, 8+16*len(ids))
		binary.BigEndian.PutUint64(v, uint64(now))
		for _, id := range ids {
			v = append(v, id[:]...)
		}
		ops = append(ops, storage.SetOperation(p.sentKey(p.sentNext), v), storage.SetOperation(p.prefix+keySentHigh, u64(p.sentNext+1)))
		p.sent = append(p.sent, sentRecord{p.sentNext, now})
		p.sentNext++
	}
	return p.apply(ctx, ops, top, nil) // failed, they go with the next batch
}

// recordsDeliveries says whether deliveries are recorded: with queued delivery, storage
// and tombstones (late_span_window) to rebuild from them.
func (p *subagentMerge) recordsDeliveries() bool {
	return p.store != nil && p.queued && p.window > 0
}

// forgetDelivered lets go of the chunks of a delivery the next consumer took (seqs), and
// with queued delivery records the traces it sent.
func (p *subagentMerge) forgetDelivered(ctx context.Context, seqs []chunkHold) {
	if !p.recordsDeliveries() {
		p.forgetOnDisk(ctx, seqs)
		return
	}
	var ids []pcommon.TraceID
	seen := map[pcommon.TraceID]struct{}{}
	for _, h := range seqs {
		if _, ok := seen[h.id]; !ok && !h.id.IsEmpty() {
			seen[h.id] = struct{}{}
			ids = append(ids, h.id)
		}
	}
	if err := p.store.forgetSent(ctx, seqs, ids, p.now(), p.window); err != nil {
		p.logger.Warn("storage: deleting the chunks of passed-on traces failed", zap.Error(err))
	}
}

// recordTaken records the traces of td that the next consumer took whole, rest (what it
// did not take) aside, with queued delivery: they reached the sink whatever becomes of
// the rest, which goes again with their chunks.
func (p *subagentMerge) recordTaken(ctx context.Context, td, rest ptrace.Traces) {
	if !p.recordsDeliveries() {
		return
	}
	left := map[pcommon.TraceID]struct{}{}
	for sp := range spaniter.All(rest) {
		left[sp.TraceID()] = struct{}{}
	}
	var ids []pcommon.TraceID
	for sp := range spaniter.All(td) {
		id := sp.TraceID()
		if _, ok := left[id]; !ok && !id.IsEmpty() {
			left[id] = struct{}{} // once
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	if err := p.store.forgetSent(ctx, nil, ids, p.now(), p.window); err != nil {
		p.logger.Warn("storage: recording the traces a partly taken send delivered failed", zap.Error(err))
	}
}

// restoreSent reads the records at start: each trace a record within late_span_window
// names gets a tombstone again (sent.go's comment), as of its delivery. Records past it
// are deleted.
func (p *subagentMerge) restoreSent(ctx context.Context) error {
	st := p.store
	low, err := st.getUint(ctx, st.prefix+keySentLow)
	if err != nil {
		return fmt.Errorf("storage: reading the deliveries' bounds: %w", err)
	}
	high, err := st.getUint(ctx, st.prefix+keySentHigh)
	if err != nil {
		return fmt.Errorf("storage: reading the deliveries' bounds: %w", err)
	}
	st.sentNext = high
	now := p.now()
	var ops []*storage.Operation
	for n := low; n < high; n++ {
		b, err := st.client.Get(ctx, st.sentKey(n))
		if err != nil {
			return fmt.Errorf("storage: reading a delivery: %w", err)
		}
		if b == nil {
			continue
		}
		at := int64(0)
		if len(b) >= 8 && (len(b)-8)%16 == 0 {
			at = min(int64(binary.BigEndian.Uint64(b)), now) // ahead of the clock: from now
		}
		if at <= now-p.window {
			ops = append(ops, storage.DeleteOperation(st.sentKey(n))) // past the window, or torn
			continue
		}
		st.sent = append(st.sent, sentRecord{n, at})
		for b = b[8:]; len(b) >= 16; b = b[16:] {
			id := pcommon.TraceID(b[:16])
			s := &p.shards[shardIndex(id)]
			s.mu.Lock()
			if s.released[id] == nil {
				s.addTombstone(id, spanSet{}, nil, at, p.window, p.maxTombstones)
				if t := s.released[id]; t != nil {
					t.delivered = true
				}
			}
			s.mu.Unlock()
		}
	}
	if len(ops) > 0 {
		ops = append(ops, st.sentLow())
		if err := st.client.Batch(ctx, ops...); err != nil {
			return fmt.Errorf("storage: deleting deliveries past late_span_window: %w", err)
		}
	}
	return nil
}
