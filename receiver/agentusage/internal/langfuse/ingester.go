package langfuse

import (
	"slices"
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/pending"
)

// traceInfo is what observations need from their trace-create.
type traceInfo struct {
	Name, SessionID, UserID, Caller, RunID string
}

// Ingester turns events into spans, holding observations created without an end
// time until their update (or a timeout), like the LangSmith face does for runs.
//
// A trace-create has no end, yet its span is the root of the trace: emitting it at
// once would let subagentmerge see "root present, every parent present" and release
// the trace before the SDK's later batches (with the subagents) arrive. So the root
// span is held until its trace has been quiet for RootIdle (any event of the trace
// restarts the wait), then emitted; it carries no usage, so the delay costs nothing
// but latency.
type Ingester struct {
	pending *pending.Store[Observation]
	roots   *pending.Store[Observation]
	traces  *pending.Recent[traceInfo]
}

// RootIdle is how long a Langfuse trace must be quiet before its root span is emitted
// (at most the pending timeout).
const RootIdle = 2 * time.Second

// NewIngester returns an ingester that parks unfinished observations for timeout.
func NewIngester(timeout time.Duration, maxPending int) *Ingester {
	return &Ingester{
		pending: pending.NewStore[Observation](timeout, maxPending),
		roots:   pending.NewStore[Observation](min(RootIdle, timeout), maxPending),
		traces:  pending.NewRecent[traceInfo](maxPending),
	}
}

// Plan is the outcome of one batch; nothing changes in the ingester until Commit.
type Plan struct {
	Complete []Observation
	Park     []Observation
	// Roots are the batch's trace-creates (merged with held ones), held until quiet.
	Roots []Observation
	// Evict go on as they are, in this batch: held observations and roots full stores
	// push out to hold Park and Roots (a refusal of the batch leaves them held), and
	// new ones past max_pending that nothing held can make room for
	Evict []Observation
	in    *Ingester
}

func entityKey(o Observation) string {
	if o.IsTrace {
		return "trace\x00" + o.ID
	}
	return "obs\x00" + o.ID
}

// Plan merges the batch's events per entity id (creates first, then updates, each by
// order of arrival, as Langfuse sorts them) with parked observations.
func (in *Ingester) Plan(events []Event) *Plan {
	sort.SliceStable(events, func(i, j int) bool { return !events[i].Update && events[j].Update })
	// one entry per entity, in order of first arrival; merged indexes it by entity key
	merged := make(map[string]int, len(events))
	batch := make([]Observation, 0, len(events))
	for _, ev := range events {
		if ev.Ignore {
			continue
		}
		k := entityKey(ev.Obs)
		if i, seen := merged[k]; seen {
			batch[i] = mergeObs(batch[i], ev.Obs)
			continue
		}
		var cur Observation
		var ok bool
		if ev.Obs.IsTrace {
			cur, ok = in.roots.Get(k)
		} else {
			cur, ok = in.pending.Get(k)
		}
		if ok {
			cur = mergeObs(cur, ev.Obs)
		} else {
			cur = ev.Obs
		}
		merged[k] = len(batch)
		batch = append(batch, cur)
	}
	// An observation also waits for its trace-create, which carries the session, user
	// and run that every span of the trace should have.
	known := map[string]bool{}
	for _, o := range batch {
		if o.IsTrace {
			known[o.ID] = true
		}
	}
	traceKnown := func(id string) bool {
		if known[id] {
			return true
		}
		_, ok := in.traces.Get(id)
		return ok
	}
	p := &Plan{in: in, Complete: make([]Observation, 0, len(batch))}
	for _, o := range batch {
		if o.IsTrace {
			p.Roots = append(p.Roots, o)
			continue
		}
		if o.finished() && traceKnown(o.TraceID) {
			p.Complete = append(p.Complete, o)
		} else {
			p.Park = append(p.Park, o)
		}
	}
	// observations parked earlier that only waited for a trace-create of this batch
	if len(known) > 0 {
		p.Complete = append(p.Complete, in.pending.Select(func(o Observation) bool {
			_, inBatch := merged[entityKey(o)]
			return known[o.TraceID] && o.finished() && !inBatch
		})...)
	}
	p.Park, p.Evict = in.pending.MakeRoom(entityKey, p.Complete, p.Park, p.Evict)
	p.Roots, p.Evict = in.roots.MakeRoom(entityKey, nil, p.Roots, p.Evict)
	return p
}

// Build turns the complete observations, and those the plan evicts, into spans.
func (p *Plan) Build() ptrace.Traces {
	for _, r := range p.Roots { // their attributes reach observations of this batch
		p.in.rememberTrace(r)
	}
	if len(p.Evict) == 0 {
		return p.in.build(p.Complete)
	}
	return p.in.build(slices.Concat(p.Complete, p.Evict))
}

func (in *Ingester) rememberTrace(o Observation) {
	runID, _ := o.Metadata["run_id"].(string)
	in.traces.Put(o.ID, traceInfo{Name: o.Name, SessionID: o.SessionID, UserID: o.UserID, Caller: genai.CallerFromTags(o.Tags), RunID: runID})
}

// Commit records the plan once the pipeline accepted its spans.
func (p *Plan) Commit(now time.Time) {
	for _, o := range p.Complete {
		p.in.pending.Remove(entityKey(o))
	}
	for _, o := range p.Evict { // those it never held are not there
		p.in.storeOf(o).Remove(entityKey(o))
	}
	for _, o := range p.Park { // MakeRoom made the room
		p.in.pending.Hold(entityKey(o), o, now)
	}
	for _, r := range p.Roots {
		p.in.roots.Hold(entityKey(r), r, now)
		p.in.roots.Touch(entityKey(r), now)
	}
	touched, some := "", false // a batch's observations mostly share one trace
	for _, group := range [][]Observation{p.Complete, p.Park} {
		for _, o := range group {
			if some && o.TraceID == touched {
				continue
			}
			p.in.roots.Touch(rootKey(o.TraceID), now)
			touched, some = o.TraceID, true
		}
	}
}

func rootKey(traceID string) string { return entityKey(Observation{IsTrace: true, ID: traceID}) }

// Expired removes and returns observations parked longer than the timeout and trace
// roots quiet for RootIdle.
func (in *Ingester) Expired(now time.Time) []Observation {
	return append(in.pending.Expired(now), in.roots.Expired(now)...)
}

// Drain removes and returns every parked observation and held root.
func (in *Ingester) Drain() []Observation {
	return append(in.pending.Drain(), in.roots.Drain()...)
}

// Repark holds observations and roots again and returns those full stores pushed out
// for them (Restore).
func (in *Ingester) Repark(obs []Observation, now time.Time) []Observation {
	var roots, others []Observation
	for _, o := range obs {
		if o.IsTrace {
			roots = append(roots, o)
		} else {
			others = append(others, o)
		}
	}
	return append(in.pending.Admit(entityKey, others, now), in.roots.Admit(entityKey, roots, now)...)
}

// Hold holds observations and trace roots without evicting any (Translator.Hold).
func (in *Ingester) Hold(obs []Observation, now time.Time) {
	for _, o := range obs {
		in.storeOf(o).Hold(entityKey(o), o, now)
	}
}

// storeOf is where o is held: trace roots until their trace is quiet, the others until
// their update.
func (in *Ingester) storeOf(o Observation) *pending.Store[Observation] {
	if o.IsTrace {
		return in.roots
	}
	return in.pending
}

// Held splits observations and trace roots by whether the ingester holds an entity of
// their key: held are the versions it holds, gone those it does not hold.
func (in *Ingester) Held(obs []Observation) (held, gone []Observation) {
	for _, o := range obs {
		if h, ok := in.storeOf(o).Get(entityKey(o)); ok {
			held = append(held, h)
		} else {
			gone = append(gone, o)
		}
	}
	return held, gone
}

// Pending is the number of parked observations and held roots.
func (in *Ingester) Pending() int { return in.pending.Len() + in.roots.Len() }

// StorageKey is the key under which a held observation or trace root is stored (the
// receiver's `storage`): one per entity, as the ingester holds them.
func StorageKey(o Observation) string { return entityKey(o) }

// Restore holds again observations and trace roots a previous process held (read back
// from storage at start): as Repark, and the roots' trace attributes are remembered,
// so observations of those traces complete as they would have before the restart.
func (in *Ingester) Restore(obs []Observation, now time.Time) []Observation {
	for _, o := range obs {
		if o.IsTrace {
			in.rememberTrace(o)
		}
	}
	return in.Repark(obs, now)
}
