package langsmith

import (
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/pending"
)

// DefaultService is service.name when a run names no project (session_name).
const DefaultService = "langsmith"

// runInfo is what later runs need to know about an earlier one.
type runInfo struct {
	TraceID  string
	RunType  string
	Caller   string
	ThreadID string
	RunID    string
	Agent    string // agent name when the run became an invoke_agent span
	// AgentTag is the lc_agent_name/agent_name the enclosing agent's own run carried
	// (its name when it carried none): LangChain copies it into every run inside
	AgentTag string
	// ToolCallID of a tool run, for the subagent run it dispatched.
	ToolCallID string
}

// Translator turns run operations into spans. It keeps two bounded stores shared by
// all requests: runs POSTed without end_time, waiting for their PATCH (so a POST+PATCH
// pair becomes one span), and facts about recent runs (trace, type, caller) so a child
// or a late PATCH arriving in another request is still placed correctly.
type Translator struct {
	pending *pending.Store[Run]
	recent  *pending.Recent[runInfo] // runs seen, emitted or parked
	emitted *pending.Recent[bool]    // runs already turned into spans
}

// NewTranslator returns a translator holding unfinished runs for pendingTimeout, at
// most maxPending of them.
func NewTranslator(pendingTimeout time.Duration, maxPending int) *Translator {
	return &Translator{
		pending: pending.NewStore[Run](pendingTimeout, maxPending),
		recent:  pending.NewRecent[runInfo](4 * maxPending),
		emitted: pending.NewRecent[bool](4 * maxPending),
	}
}

// Plan is the outcome of one request: runs ready to become spans now, and runs to
// park until their PATCH. Nothing in the translator changes until Commit, so a
// request the pipeline refuses leaves no trace and the client's retry starts over.
type Plan struct {
	Complete []Run
	Park     []Run
	// Evict go on unfinished, as they are, in this request: held runs a full store
	// pushes out to hold Park (a refusal of the request leaves them held), and new
	// runs past max_pending that no held run can make room for
	Evict []Run
	t     *Translator
	buf   *[]Run // Complete's backing array, recycled by Release
}

// Plan merges ops with parked runs. A run is complete when it has an end_time.
func (t *Translator) Plan(ops []Op) *Plan {
	// runs in first-seen order, indexed by id (an index, not the Run, in the map:
	// a Run is large and most requests name each run once)
	at := make(map[string]int, len(ops))
	buf := runBufs.Get().(*[]Run)
	runs := (*buf)[:0]
	if cap(runs) < len(ops) {
		runs = make([]Run, 0, len(ops))
	}
	for k := range ops {
		op := &ops[k]
		i, seen := at[op.Run.ID]
		if !seen {
			if parked, isParked := t.pending.Get(op.Run.ID); isParked {
				at[op.Run.ID] = len(runs)
				runs = append(runs, parked)
				i, seen = len(runs)-1, true
			}
		}
		if !seen {
			at[op.Run.ID] = len(runs)
			runs = append(runs, op.Run)
			continue
		}
		// merged: what Prepare read no longer describes the run
		cur := &runs[i]
		if op.Patch {
			*cur = Merge(*cur, op.Run)
		} else {
			*cur = Merge(op.Run, *cur) // a re-sent POST never undoes a PATCH already seen
			cur.Posted = true
		}
		cur.prep = nil
	}
	// complete runs are compacted in place (order kept), the rest parked
	p := &Plan{t: t, buf: buf}
	n := 0
	for i := range runs {
		r := runs[i]
		// A PATCH whose POST we never saw waits for it (the SDKs may send them in
		// separate, concurrent requests), unless the POST was already emitted.
		_, emitted := t.emitted.Get(r.ID)
		if r.Ended() && (r.Posted || emitted) {
			runs[n] = r
			n++
		} else {
			p.Park = append(p.Park, r)
		}
	}
	clear(runs[n:]) // drop references the plan no longer holds
	p.Complete = runs[:n]
	sortByDottedOrder(p.Complete)
	p.Park, p.Evict = t.pending.MakeRoom(StorageKey, p.Complete, p.Park, nil)
	return p
}

// StorageKey is the key under which a held run is stored (the receiver's `storage`)
// and held: its id.
func StorageKey(r Run) string { return r.ID }

func runIDs(runs []Run) []string {
	ids := make([]string, len(runs))
	for i := range runs {
		ids[i] = runs[i].ID
	}
	return ids
}

func sortByDottedOrder(runs []Run) {
	slices.SortStableFunc(runs, func(x, y Run) int {
		a, b := x.DottedOrder, y.DottedOrder
		if a == "" || b == "" {
			// runs with a dotted_order first, the others after in their order
			switch {
			case a != "" && b == "":
				return -1
			case a == "" && b != "":
				return 1
			}
			return 0
		}
		return strings.Compare(a, b)
	})
}

// Build turns the plan's complete runs, and the runs it evicts, into spans.
func (p *Plan) Build() ptrace.Traces {
	if len(p.Evict) == 0 {
		return p.t.build(p.Complete, p.Park)
	}
	// runs this request holds or hands on unfinished still place their children
	td := p.t.build(p.Complete, slices.Concat(p.Park, p.Evict))
	p.t.BuildRuns(p.Evict).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	return td
}

// runBufs recycles the run lists of plans (see Plan.Release).
var runBufs = sync.Pool{New: func() any { return new([]Run) }}

// Release recycles the plan's run list once the request is done with the plan (after
// Commit and after its spans were built); the plan must not be used after. Optional.
func (p *Plan) Release() {
	if p.buf == nil || cap(p.Complete) > maxPooledLocal {
		return
	}
	runs := p.Complete[:cap(p.Complete)]
	clear(runs)
	*p.buf = runs[:0]
	runBufs.Put(p.buf)
	p.buf, p.Complete = nil, nil
}

// Commit records the plan after the pipeline accepted its spans: completed and evicted
// runs leave the pending store, unfinished ones enter it.
func (p *Plan) Commit(now time.Time) {
	p.t.pending.Remove(runIDs(p.Complete)...)
	p.t.pending.Remove(runIDs(p.Evict)...) // those it never held are not there
	for _, r := range p.Park {
		p.t.pending.Hold(r.ID, r.detach(), now) // MakeRoom made the room
	}
}

// Expired removes and returns parked runs older than the timeout.
func (t *Translator) Expired(now time.Time) []Run { return t.pending.Expired(now) }

// Drain removes and returns all parked runs (shutdown).
func (t *Translator) Drain() []Run { return t.pending.Drain() }

// Repark holds runs again (read back from storage at start) and returns those a full
// store pushed out for them.
func (t *Translator) Repark(runs []Run, now time.Time) []Run {
	return t.pending.Admit(StorageKey, runs, now)
}

// Hold holds runs without evicting any: those a plan made room for, and those that
// were held before and could not go on (the pipeline refused them), past max_pending
// if they must.
func (t *Translator) Hold(runs []Run, now time.Time) {
	for _, r := range runs {
		t.pending.Hold(r.ID, r, now)
	}
}

// Held splits runs by whether the translator holds a run of their id: held are the
// versions it holds, gone the runs it does not hold.
func (t *Translator) Held(runs []Run) (held, gone []Run) {
	for _, r := range runs {
		if h, ok := t.pending.Get(r.ID); ok {
			held = append(held, h)
		} else {
			gone = append(gone, r)
		}
	}
	return held, gone
}

// Pending is the number of parked runs.
func (t *Translator) Pending() int { return t.pending.Len() }

// BuildRuns turns runs (e.g. expired ones) into spans as they are.
func (t *Translator) BuildRuns(runs []Run) ptrace.Traces {
	sortByDottedOrder(runs)
	return t.build(runs, nil)
}

// dottedIDs returns the run ids of a dotted_order, root first.
func dottedIDs(dotted string) []string {
	if dotted == "" {
		return nil
	}
	segs := strings.Split(dotted, ".")
	out := make([]string, 0, len(segs))
	for _, s := range segs {
		if i := strings.IndexByte(s, 'Z'); i >= 0 && i+1 < len(s) {
			out = append(out, s[i+1:])
		}
	}
	return out
}
