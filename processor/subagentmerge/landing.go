package subagentmerge

// Queued delivery: the calls on their way to a released trace's lane, in order.
//
// A call places a trace's spans under its shard's lock, and queues what goes on on the
// trace's lane after, outside the lock (it encodes and stores it first). Two calls with
// spans of the same released trace could so reach the lane in the other order than they
// were placed: a correction before the release it corrects, or before the late span it
// is a later version of. LangSmith then gets the patch of a run before its post, refuses
// it (the run does not exist yet), and keeps the post without the correction. So each
// call that releases a trace, or passes on spans of a released one, takes a slot on the
// trace when it places them (its shard's landings); a call that is ready fills its
// slot, and the filled slots at the front go on the lane, in the order taken.

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// landing is the calls on their way to a released trace's lane, in the order they
// placed its spans.
type landing struct {
	slots []*slot
}

// slot is one call's place in a landing: filled once the call is ready, with its batch
// of the trace's spans (none for a release, which the call queues with its other
// traces' and fills after).
type slot struct {
	l      *landing
	b      *unsentBatch
	filled bool
}

// landingOf is a slot and its trace.
type landingOf struct {
	id pcommon.TraceID
	s  *slot
}

// following is what one call passes on of a released trace (its slot s): its refs cut
// out of the batch's encoding (idx) and those that go as first emissions.
type following struct {
	id         pcommon.TraceID
	s          *slot
	idx, first []int32
}

// encodedFollow is a following, encoded.
type encodedFollow struct {
	id    pcommon.TraceID
	s     *slot
	enc   []byte
	spans int
}

// takeSlot takes the next slot of released trace id (its shard s locked) for a call
// with spans of it to queue. nil without queued delivery, or when nothing is known of
// the trace's release (late_span_window 0, or past it).
func (p *subagentMerge) takeSlot(s *shard, id pcommon.TraceID) *slot {
	if !p.queued {
		return nil
	}
	l := s.landings[id]
	if l == nil {
		_, gone := s.gone[id]
		if s.released[id] == nil && !gone {
			return nil
		}
		l = &landing{}
		s.landings[id] = l
	}
	sl := &slot{l: l}
	l.slots = append(l.slots, sl)
	return sl
}

// fill fills sl, a slot of trace id, with b (nil: what the call had is queued already),
// and queues the filled slots at the front of its landing on the trace's lane, under
// the trace's shard lock, so that a call that finds the landing empty (and queues later)
// comes after them.
func (p *subagentMerge) fill(id pcommon.TraceID, sl *slot, b *unsentBatch) {
	if sl == nil {
		return
	}
	s := &p.shards[shardIndex(id)]
	lane := laneOf(id)
	pushed := false
	s.mu.Lock()
	sl.b, sl.filled = b, true
	l := sl.l
	n := 0
	for n < len(l.slots) && l.slots[n].filled {
		if q := l.slots[n].b; q != nil {
			p.deliver.queues[lane].push(*q)
			pushed = true
		}
		l.slots[n].b = nil
		n++
	}
	l.slots = l.slots[n:]
	if len(l.slots) == 0 && s.landings[id] == l {
		delete(s.landings, id)
	}
	s.mu.Unlock()
	if pushed {
		p.deliver.poke(lane)
	}
}

// frontFollows moves the spans of each released trace whose slot is at the front of its
// landing (no call placed spans of it before this one and is still on its way: the
// usual case) into their lane's batch; the slot is filled empty once that batch is
// queued (enqueue). Only the others go as a batch of their own, each. A slot at the
// front stays there until filled, so the check holds until then.
func (p *subagentMerge) frontFollows(sc *scratch) {
	for k := range sc.follows {
		fo := &sc.follows[k]
		s := &p.shards[shardIndex(fo.id)]
		s.mu.Lock()
		front := fo.s.l.slots[0] == fo.s
		s.mu.Unlock()
		if !front {
			continue
		}
		lane := laneOf(fo.id)
		sc.rest[lane] = append(sc.rest[lane], fo.idx...)
		sc.restFirst[lane] = append(sc.restFirst[lane], fo.first...)
		fo.idx, fo.first = nil, nil
	}
}
