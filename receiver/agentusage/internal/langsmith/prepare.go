package langsmith

import (
	"strings"

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

// Prepare reads, for every op, what its record needs from the run alone. It is safe
// to call concurrently for different requests (it touches only ops) and optional:
// Build computes the same from runs without it.
func Prepare(ops []Op) {
	arena := make([]idxField, 0, 8*len(ops))
	preps := make([]prepared, len(ops))
	ids := make(spanIDs, len(ops)+1)
	for i := range ops {
		r := &ops[i].Run
		p := &preps[i]
		p.md = indexedMetadata(*r, &arena)
		p.runType = strings.ToLower(r.RunType)
		p.parentID = parentIDOf(*r)
		p.rec = ownRecord(*r, p.md, p.runType, ids)
		r.prep = p
	}
}
