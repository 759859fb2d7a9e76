package subagentmerge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Stream mode: a ledger that was not extended or re-emitted for compact_after (doubled
// each time it thawed, below: hotChains) is frozen by the sweeper: its skeleton parts
// and its kept spans' encodings go into one S2 block. Most ledgers wait out
// wait_duration after their trace completed, in case late spans come, and a whole
// trace's parts compress several times (every span repeats the same attribute keys and
// resource), where a part on its own, a few hundred bytes, barely does. The first call
// that needs the bytes again (new spans of the trace, a re-emission, a refusal taken
// back) thaws it.
//
// The block is, in order:
//
//	uvarint(parts) { uvarint(len) part }
//	uvarint(kept)  { span id (8 bytes) uvarint(len) encoding }

var errFrozen = errors.New("subagentmerge: a frozen ledger does not thaw")

// freezeBuf is freeze's working memory: the ledger's bytes joined, then compressed.
// Only the compressed block's exact copy stays with the ledger, so the two buffers
// serve the next freeze (the sweeper freezes every idle ledger once, and a trace's
// bytes are most of what it allocates).
type freezeBuf struct{ raw, enc []byte }

var freezeBufs = sync.Pool{New: func() any { return new(freezeBuf) }}

func (fb *freezeBuf) put() {
	if cap(fb.raw) > maxPooledBytes || cap(fb.enc) > maxPooledBytes {
		return
	}
	freezeBufs.Put(fb)
}

// freeze packs l's bytes into l.cold (called under its shard's lock). A ledger with
// nothing to pack, or frozen already, is left as it is.
func (l *ledger) freeze() {
	if l.cold != nil || (len(l.skel) == 0 && len(l.kept) == 0) {
		return
	}
	fb := freezeBufs.Get().(*freezeBuf)
	defer fb.put()
	n := 2*binary.MaxVarintLen64 + int(l.skelLen+l.keptLen) + len(l.skel)*binary.MaxVarintLen32 + len(l.kept)*(8+binary.MaxVarintLen32)
	b := slices.Grow(fb.raw[:0], n)
	b = binary.AppendUvarint(b, uint64(len(l.skel)))
	for _, part := range l.skel {
		b = binary.AppendUvarint(b, uint64(len(part)))
		b = append(b, part...)
	}
	b = binary.AppendUvarint(b, uint64(len(l.kept)))
	for id, k := range l.kept {
		b = append(b, id[:]...)
		b = binary.AppendUvarint(b, uint64(len(k.enc)))
		b = append(b, k.enc...)
	}
	fb.raw = b
	if m := s2.MaxEncodedLen(len(b)); m > len(fb.enc) {
		fb.enc = make([]byte, m)
	}
	enc := s2.Encode(fb.enc, b)
	l.cold = append(make([]byte, 0, len(enc)), enc...) // exactly its length: it is what stays
	l.skel = nil
	l.dropFacts()
	for _, k := range l.kept {
		k.enc = nil
	}
}

// thaw unpacks l.cold back into l.skel and the kept spans (called under its shard's
// lock). The bytes are sub-slices of one buffer, capped, so nothing appends over a
// neighbour.
func (l *ledger) thaw() error {
	if l.cold == nil {
		return nil
	}
	b, err := s2.Decode(nil, l.cold)
	if err != nil {
		return fmt.Errorf("%w: %w", errFrozen, err)
	}
	next := func() ([]byte, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return nil, false
		}
		v := b[w : w+int(n) : w+int(n)]
		b = b[w+int(n):]
		return v, true
	}
	count := func() (int, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)) {
			return 0, false
		}
		b = b[w:]
		return int(n), true
	}
	parts, ok := count()
	skel := make([][]byte, 0, parts)
	for i := 0; ok && i < parts; i++ {
		var part []byte
		if part, ok = next(); ok {
			skel = append(skel, part)
		}
	}
	kept := 0
	if ok {
		kept, ok = count()
	}
	for i := 0; ok && i < kept; i++ {
		if ok = len(b) >= 8; !ok {
			break
		}
		id := pcommon.SpanID(b[:8])
		b = b[8:]
		var enc []byte
		if enc, ok = next(); ok {
			if k := l.kept[id]; k != nil {
				k.enc = enc
			}
		}
	}
	if !ok {
		return fmt.Errorf("%w: the block is cut short", errFrozen)
	}
	l.skel, l.cold = skel, nil
	return nil
}

// maxFreezeDoublings bounds how long a ledger stays thawed: compact_after times 2 to
// this power (64 s as shipped).
const maxFreezeDoublings = 6

// hotChains are a shard's thawed ledgers, one chain per number of thaws, each by
// hotSince: a ledger thawed n times freezes compact_after·2ⁿ after it was last needed.
// A long run whose steps come seconds apart (a model call, a tool) would otherwise be
// thawed and frozen again at every span: its whole ledger decompressed, its merge facts
// read again from the skeleton, and compressed again, a cost that grows with the run.
// Doubling keeps that to a few times in its life. A ledger never thawed freezes
// compact_after after its last use, and when the ledgers are over ledger_limit_mib every
// ledger idle that long freezes before any ends for room (freezeForRoom).
type hotChains [maxFreezeDoublings + 1]chain[ledger]

// remove takes l out of the chain it is in, if any.
func (h *hotChains) remove(l *ledger) { h[l.thaws].remove(l) }

// has reports whether l is in one of the chains.
func (h *hotChains) has(l *ledger) bool { return h[l.thaws].has(l) }

// warm thaws l for a call that reads or changes its bytes, and puts it back among its
// shard's thawed ledgers, to be frozen again later (called under s's lock). A ledger
// that ended meanwhile (a refused call's, taken back after another call ended it for
// room) is thawed only: its bytes are counted off already, and freezing it again would
// count them back.
func (p *subagentMerge) warm(s *shard, l *ledger, now int64) error {
	wasCold := l.cold != nil
	err := l.thaw()
	if s.led.byID[l.id] == l {
		s.led.hot.remove(l)
		if wasCold && l.thaws < maxFreezeDoublings {
			l.thaws++
		}
		l.hotSince = now
		s.led.hot[l.thaws].pushBack(l)
	}
	return err
}

// freezeIdle freezes the ledgers of s that were not needed for their time (compact_after
// doubled per thaw) at now, except those due to re-emit (their flush would thaw them at
// once). Called under s's lock.
func (p *subagentMerge) freezeIdle(s *shard, now int64) {
	p.freezeHot(s, func(n int) int64 { return now - p.compactAfter<<n })
}

// freezeForRoom freezes the ledgers of s not needed for compact_after at now, however
// often they thawed: room under ledger_limit_mib is taken back from idle thawed ledgers
// before a ledger ends for it (endOverCapacity). Called under s's lock.
func (p *subagentMerge) freezeForRoom(s *shard, now int64) {
	p.freezeHot(s, func(int) int64 { return now - p.compactAfter })
}

// freezeHot freezes, in each chain n of s, the ledgers thawed at or before cutoff(n).
func (p *subagentMerge) freezeHot(s *shard, cutoff func(n int) int64) {
	for n := range s.led.hot {
		hot := &s.led.hot[n]
		before := cutoff(n)
		for l := hot.head; l != nil && l.hotSince <= before; l = hot.head {
			hot.remove(l)
			if l.scheduled() {
				continue // its flush warms it again
			}
			l.freeze()
			p.ledgerBytes.Add(l.cost() - l.size)
			l.size = l.cost()
		}
	}
}
