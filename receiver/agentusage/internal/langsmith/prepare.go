package langsmith

import (
	"strings"
	"sync"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

// prepared holds what a run's record needs that depends on the run alone (not on
// the translator's stores): its indexed metadata, its parent, and the record's own
// fields (ids, times, the facts of a model or tool call; see ownRecord). Prepare
// computes it before the receiver takes the translator's lock, so that only the
// placement (Plan, parent lookups, the stores) and the span building run one request
// at a time. A run that Plan merges with another (a parked POST, a PATCH in the same
// request) drops it and is read afresh, so the spans are the same with or without
// Prepare.
type prepared struct {
	md       view
	runType  string // lower-cased run_type
	parentID string
	rec      record.Record
}

// Prepared is what Prepare read for one request's ops. Release gives its memory back
// for the next request once the ops are no longer used.
type Prepared struct {
	ops   []Op // the request's ops, recycled with the rest
	preps []prepared
	arena []idxField
	ids   spanIDs
}

// prepBufs recycles Prepared buffers: a request's prepared records are its biggest
// allocation after the spans themselves.
var prepBufs = sync.Pool{New: func() any { return new(Prepared) }}

// maxPooledPreps: bigger requests' buffers are left to the garbage collector.
const maxPooledPreps = 4096

// Prepare reads, for every op, what its record needs from the run alone. It is safe
// to call concurrently for different requests (it touches only ops) and optional:
// Build computes the same from runs without it. The ops point into the returned
// Prepared until its Release, which also recycles the ops slice itself (the decoders
// take their op lists from the same pool); a run parked by Plan.Commit keeps nothing
// of either.
func Prepare(ops []Op) *Prepared {
	pb := prepBufs.Get().(*Prepared)
	pb.ops = ops
	if cap(pb.preps) < len(ops) {
		pb.preps = make([]prepared, len(ops))
	}
	pb.preps = pb.preps[:len(ops)]
	if pb.arena == nil {
		pb.arena = make([]idxField, 0, 4*len(ops))
	}
	if pb.ids == nil {
		pb.ids = make(spanIDs, len(ops)+1)
	}
	for i := range ops {
		r := &ops[i].Run
		p := &pb.preps[i]
		p.md = indexedMetadata(r, &pb.arena)
		p.runType = strings.ToLower(r.RunType)
		p.parentID = parentIDOf(r)
		ownRecord(&p.rec, r, p.md, p.runType, p.parentID, pb.ids) // preps come zeroed
		r.prep = p
	}
	return pb
}

// Release recycles what Prepare allocated. Call it once, when the request's ops,
// plan and spans are done with (the spans keep no reference into it); a nil
// Prepared is fine.
func (pb *Prepared) Release() {
	if pb == nil || pb.preps == nil {
		return
	}
	if cap(pb.preps) > maxPooledPreps {
		return
	}
	putOps(pb.ops)
	pb.ops = nil
	clear(pb.preps)
	clear(pb.arena[:cap(pb.arena)])
	clear(pb.ids)
	pb.preps, pb.arena = pb.preps[:0], pb.arena[:0]
	prepBufs.Put(pb)
}

// opBufs recycles the op lists the decoders return (given back by Prepared.Release).
var opBufs = sync.Pool{New: func() any { return new([]Op) }}

// newOps returns an empty op list with room for n ops.
func newOps(n int) []Op {
	ops := *opBufs.Get().(*[]Op)
	if cap(ops) < n {
		return make([]Op, 0, n)
	}
	return ops[:0]
}

func putOps(ops []Op) {
	if ops == nil || cap(ops) > maxPooledPreps {
		return
	}
	ops = ops[:cap(ops)]
	clear(ops)
	ops = ops[:0]
	opBufs.Put(&ops)
}
