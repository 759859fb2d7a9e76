package subagentmerge

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
)

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
