package subagentmerge

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/internal/storageclient"
)

// With `storage` set, what the buffer holds is also written, before ConsumeTraces
// acknowledges it, through a storage extension (file_storage), so a restart after a
// crash picks up where the killed process stopped:
//
//   - the spans one request leaves buffered are one chunk (OTLP protobuf: the
//     concatenation of the bytes the buffer keeps in memory for each trace), stored
//     under "chunk/<seq>" with a sequence number from one counter: one write per
//     request, however many traces it extends; stored compressed, a large one in
//     pieces (storageclient.Packed: bbolt rewrites a value's neighbours on every
//     write, and agent spans compress several times);
//   - "high" is one past the highest sequence number written, "low" at most the lowest
//     still live; both only grow;
//   - a chunk counts the buffered traces it holds spans of; it is deleted once the
//     consumer after this processor accepted the last of them (with persistent sending
//     queues: once they are in their queue on disk); a trace accepted while others
//     still hold its chunks is marked as gone from them (persist_ends.go);
//   - at start, every chunk in [low, high) is read back and buffered again, in order.
//
// A write that fails (a full or failing disk) is an error back to the sender: the OTLP
// receiver answers with a retryable status. The spans of that request stay buffered in
// memory and go on when their trace is released; their chunk is written with the next
// write that succeeds (the sweeper retries each second), so only a crash while the disk
// still fails loses them.
const (
	keyLow  = "low"
	keyHigh = "high"
)

// Key prefixes: hold mode stores spans under the bare keys, stream mode its ledgers
// under "ledger/" (ledgerstore.go), so the two never read each other's chunks.
const (
	prefixHold   = ""
	prefixStream = "ledger/"
)

func (p *persister) chunkKey(seq uint64) string { return fmt.Sprintf("%schunk/%016x", p.prefix, seq) }

type persister struct {
	client storage.Client
	prefix string
	next   atomic.Uint64 // next sequence number

	mu   sync.Mutex // serialises writes, so "high" only grows
	high uint64     // last "high" written
	low  uint64     // last "low" written
	// refs counts, per chunk, the buffered traces holding spans of it. It has its own
	// lock (taken after mu, never held across I/O): ref runs under a shard lock, which
	// must not wait for a write's disk I/O.
	refMu sync.Mutex
	refs  map[uint64]int
	// drawn are the numbers drawn and not written yet (or given back): a chunk its
	// holders all let go of before its write is not deleted then, but by the write, and
	// markers name it meanwhile (a holder counted after may still have it written)
	drawn map[uint64]struct{}
	// unwritten are chunks a write failed to store, retried with the next write
	unwritten map[uint64][]byte
	// retry are the deletions and end markers a failed batch did not apply, and the
	// "high" it was to write: the next batch applies them first
	retry     []*storage.Operation
	retryHigh uint64
	// waiting says unwritten or retry may hold something (set under mu), so flush need
	// not take mu, held across every write's I/O, when nothing waits
	waiting atomic.Bool
	// stream mode's end markers (persist_ends.go): how many chunks each names that are
	// still on disk, and the markers naming each chunk
	endLeft map[uint64]int
	endsOn  map[uint64][]uint64
	// gather mode's records of deliveries on disk, oldest first, and the next record's
	// number (sent.go)
	sent     []sentRecord
	sentNext uint64
}

// newPersister reads the bounds of the chunks stored under prefix.
func newPersister(ctx context.Context, client storage.Client, prefix string) (*persister, error) {
	p := &persister{client: client, prefix: prefix, refs: map[uint64]int{}, drawn: map[uint64]struct{}{},
		unwritten: map[uint64][]byte{}, endLeft: map[uint64]int{}, endsOn: map[uint64][]uint64{}}
	var err error
	if p.low, err = p.getUint(ctx, p.prefix+keyLow); err == nil {
		p.high, err = p.getUint(ctx, p.prefix+keyHigh)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: reading the buffer's bounds: %w", err)
	}
	p.next.Store(p.high)
	return p, nil
}

// eachChunk calls fn with each chunk on disk, from "low" to "high", in the order
// written. It stops at the first read that fails, and returns its error.
func (p *persister) eachChunk(ctx context.Context, fn func(seq uint64, b []byte)) error {
	for seq := p.low; seq < p.high; seq++ {
		b, err := p.client.Get(ctx, p.chunkKey(seq))
		if err != nil {
			return err
		}
		if b != nil {
			fn(seq, b)
		}
	}
	return nil
}

func (p *persister) getUint(ctx context.Context, key string) (uint64, error) {
	b, err := p.client.Get(ctx, key)
	if err != nil || len(b) == 0 {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("key %q holds %d bytes, want 8", key, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// draw returns the next sequence number, live from this moment: the low mark does not
// pass it until it is written (or given back unheld: undraw) and its holders, counted
// on it by ref, let it go (forget). A number drawn and only then counted could be passed by a low
// mark that a later number, written meanwhile, moved up.
func (p *persister) draw() uint64 {
	p.refMu.Lock()
	defer p.refMu.Unlock()
	seq := p.next.Add(1) - 1
	if _, ok := p.refs[seq]; !ok {
		p.refs[seq] = 0
	}
	p.drawn[seq] = struct{}{}
	return seq
}

// undraw gives back a drawn number nothing came to hold.
func (p *persister) undraw(seq uint64) {
	p.refMu.Lock()
	delete(p.drawn, seq)
	if p.refs[seq] <= 0 {
		delete(p.refs, seq)
	}
	p.refMu.Unlock()
}

// minLive is the lowest sequence number still live (drawn, or held by a buffered trace,
// a ledger or an unsent batch), and whether there is one. A holder's numbers are in no
// particular order (requests draw them in one order and reach a trace's shard in
// another), so this asks the counts, not the holders.
func (p *persister) minLive() (uint64, bool) {
	p.refMu.Lock()
	defer p.refMu.Unlock()
	lowest, any := uint64(0), false
	for seq := range p.refs {
		if !any || seq < lowest {
			lowest, any = seq, true
		}
	}
	return lowest, any
}

// ref counts one more buffered trace holding spans of chunk seq.
func (p *persister) ref(seq uint64) {
	p.refMu.Lock()
	p.refs[seq]++
	p.refMu.Unlock()
}

// write stores one request's chunk (none: only retry earlier failed ones) and the new
// "high" in one transaction, together with every chunk an earlier write failed to store
// whose traces are still buffered: once the disk works again, what was acknowledged in
// the meantime (the senders' retries were duplicates) is on disk too. unheld are the
// traces with spans in the chunk whose ledgers ended before they could hold it: an end
// marker goes with the chunk for them (persist_ends.go).
func (p *persister) write(ctx context.Context, seq uint64, data []byte, unheld ...pcommon.TraceID) error {
	return p.writeForgetting(ctx, []chunkWrite{{seq, data, unheld}}, nil)
}

// flush writes what earlier failed writes left (chunks waiting in unwritten, deletions
// and markers in retry), if anything: a request that dropped duplicates calls it before
// it is answered with success, since it acknowledges spans it did not write (a refused
// request's, whose chunk may wait in unwritten), so that they are not only in memory
// once the disk works again. Cheap when nothing waits (waiting).
func (p *persister) flush(ctx context.Context) error {
	if !p.waiting.Load() {
		return nil
	}
	return p.write(ctx, 0, nil)
}

// chunkWrite is one chunk a write stores (write's seq, data and unheld).
type chunkWrite struct {
	seq    uint64
	data   []byte
	unheld []pcommon.TraceID
}

// writeForgetting is write of several chunks and forget(holds) in one transaction: a
// request that ended ledgers for room lets go of their chunks, and marks them ended in
// those that live on, in the transaction of its own chunk instead of one more; a
// request of gather mode writes what it holds and what it queues in one.
func (p *persister) writeForgetting(ctx context.Context, chunks []chunkWrite, holds []chunkHold) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// the holds first: a chunk may be among them (a ledger ending for room holds what
	// its request writes), and its write then sees whether anything still holds it
	var ops []*storage.Operation
	top := p.high
	if len(holds) > 0 {
		ops, top = p.forgetOps(ops, holds)
	}
	var sets []*storage.Operation // the chunks: they wait in unwritten when the batch fails
	var markers []*storage.Operation
	for i := range chunks {
		c := &chunks[i]
		if c.data == nil {
			continue
		}
		p.refMu.Lock()
		delete(p.drawn, c.seq)
		gone := p.refs[c.seq] <= 0
		if gone {
			// its holders let go of it before this write: nothing may read it back, and
			// the markers naming it go with it
			ops = p.deleteChunk(ops, c.seq)
		}
		p.refMu.Unlock()
		if gone {
			c.data = nil
			continue
		}
		sets = append(sets, storage.SetOperation(p.chunkKey(c.seq), c.data))
		top = max(top, c.seq+1)
		if len(c.unheld) > 0 {
			var b []byte
			for _, id := range c.unheld {
				b = appendEnd(b, id, c.seq)
			}
			m := p.next.Add(1) - 1
			markers = append(markers, storage.SetOperation(p.endKey(m), b))
			p.nameChunks(m, slices.Repeat([]uint64{c.seq}, len(c.unheld)))
			top = max(top, m+1)
		}
	}
	for s, d := range p.unwritten {
		sets = append(sets, storage.SetOperation(p.chunkKey(s), d))
		top = max(top, s+1)
	}
	ops = append(append(ops, sets...), markers...)
	// the rest (deletions, markers) waits in p.retry
	err := p.apply(ctx, ops, top, func(op *storage.Operation) bool { return !slices.Contains(sets, op) })
	if err != nil {
		for _, c := range chunks {
			if c.data != nil {
				p.unwritten[c.seq] = bytes.Clone(c.data) // the caller reuses data
			}
		}
		p.noteWaiting()
		return err
	}
	clear(p.unwritten)
	p.noteWaiting()
	return nil
}

// noteWaiting records whether anything waits for the next write (p.mu held).
func (p *persister) noteWaiting() { p.waiting.Store(len(p.unwritten)+len(p.retry) > 0) }

// advanceLow writes "low" = the lowest live sequence number (minLive: of the ledgers,
// the buffered traces, the unsent queue and the numbers drawn and not written yet;
// "high" when nothing is live). Both are read under p.mu:
// a chunk drawn after minLive is at or above "high" then, and cannot be written (which
// raises "high") before "low" is.
func (p *persister) advanceLow(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	minLive, anyLive := p.minLive()
	low := p.high
	if anyLive {
		low = min(low, minLive)
	}
	if low <= p.low {
		return nil
	}
	if err := p.client.Set(ctx, p.prefix+keyLow, u64(low)); err != nil {
		return err
	}
	p.low = low
	return nil
}

func (p *persister) close(ctx context.Context) error { return p.client.Close(ctx) }

// flushFailed writes what earlier failed writes left, if anything, before a request
// that dropped duplicates is answered (persister.flush), in every mode: the request
// refused for them is acknowledged by its retry, which may write nothing of its own. It
// refuses the request when that fails too.
func (p *subagentMerge) flushFailed(ctx context.Context) error {
	if p.store == nil {
		return nil
	}
	if err := p.store.flush(ctx); err != nil {
		p.logger.Error("storage: writing what a failed write left failed; refusing the request (retryable)", zap.Error(err))
		return fmt.Errorf("subagentmerge: storing what a failed write left: %w", err)
	}
	return nil
}

// restore buffers again every chunk a previous process left, in the order written.
func (m *subagentMerge) restore(ctx context.Context) error {
	st := m.store
	var errs []error
	restored, chunks := 0, 0
	// the markers first: they name chunks before them (persist_ends.go)
	skip, markers, err := st.readEnds(ctx)
	if skip == nil {
		return err
	}
	if err != nil {
		errs = append(errs, err)
	}
	if m.queued {
		// before the chunks: their spans of traces delivered before go on as such (and
		// without late_span_window, records a run with it left are deleted)
		if err := m.restoreSent(ctx); err != nil {
			return err
		}
	}
	err = st.eachChunk(ctx, func(seq uint64, b []byte) {
		td, err := m.unmarshaler.UnmarshalTraces(b)
		if err != nil {
			// bytes only this processor wrote: a torn or foreign value; skip it, loudly
			errs = append(errs, fmt.Errorf("storage: chunk %d does not decode, skipped: %w", seq, err))
			return
		}
		chunks++
		if removeEnded(td, seq, skip) && td.SpanCount() == 0 {
			m.forgetOnDisk(ctx, nil, seq) // only spans of traces passed on before
			return
		}
		restored += td.SpanCount()
		if err := m.consume(ctx, td, int64(seq)); err != nil {
			errs = append(errs, err)
		}
	})
	if err != nil {
		return fmt.Errorf("storage: reading buffered spans: %w", err)
	}
	if err := st.settleAtStart(ctx, markers, nil); err != nil {
		errs = append(errs, fmt.Errorf("storage: deleting end markers: %w", err))
	}
	if chunks > 0 {
		m.logger.Info("restored buffered spans from storage", zap.Int("spans", restored), zap.Int("chunks", chunks))
	}
	if len(errs) > 0 {
		m.logger.Error("restoring buffered spans", zap.Error(errors.Join(errs...)))
	}
	return nil
}

// startStorage opens the storage extension and restores what a previous process left:
// in stream mode its ledgers, then any spans a hold-mode process left buffered (they
// were acknowledged and never passed on, so they go on now, through the ledgers); in
// hold mode its buffer.
func (m *subagentMerge) startStorage(ctx context.Context, host component.Host) error {
	client, err := storageclient.Open(ctx, host, *m.cfg.Storage, component.KindProcessor, m.id)
	if err != nil {
		return err
	}
	client = storageclient.Packed(client)
	prefix := prefixHold
	if m.stream {
		prefix = prefixStream
	}
	if m.store, err = newPersister(ctx, client, prefix); err != nil {
		_ = client.Close(ctx)
		return err
	}
	if !m.stream {
		return m.restore(ctx)
	}
	if err := m.restoreStream(ctx); err != nil {
		return err
	}
	held, err := newPersister(ctx, client, prefixHold)
	if err != nil {
		return err
	}
	skip, markers, err := held.readEnds(ctx)
	if err != nil {
		m.logger.Error("reading what a hold-mode process passed on; its chunks go on whole", zap.Error(err))
	}
	var drop, left []uint64
	for seq := held.low; seq < held.high; seq++ {
		b, err := held.client.Get(ctx, held.chunkKey(seq))
		if err != nil {
			left = append(left, seq) // unread: it stays for the next start
			continue
		}
		if b == nil {
			continue
		}
		if td, err := m.unmarshaler.UnmarshalTraces(b); err == nil {
			removeEnded(td, seq, skip)
			if err := m.consumeStream(ctx, td); err != nil {
				m.logger.Error("passing on spans a hold-mode process left buffered", zap.Error(err))
				left = append(left, seq)
				continue
			}
		}
		drop = append(drop, seq)
	}
	if len(drop) > 0 {
		m.logger.Info("passed on the spans a hold-mode process left buffered", zap.Int("chunks", len(drop)))
	}
	for _, s := range left {
		held.ref(s) // stays for the next start, and the markers naming it with it
	}
	return held.settleAtStart(ctx, markers, drop)
}
