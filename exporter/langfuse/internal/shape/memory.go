package shape

import (
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
)

// DefaultMaxTraces bounds how many traces' trace-level values a Shaper remembers.
const DefaultMaxTraces = 10_000

// Shaper plans batches with a memory of each trace's trace-level values (name, session,
// user, tags, environment, the lead agent's model) across batches. Langfuse replaces an
// observation's row whole with its newest version, so a re-emitted span sent alone must
// carry the trace name and tags its first emission got from spans batched with it; and
// with spans streamed as they end, a span in a later batch than its root still gets the
// root's trace name. Safe for concurrent use.
type Shaper struct{ mem *TraceMemory }

// NewShaper remembers at most maxTraces traces (≤ 0: DefaultMaxTraces).
func NewShaper(maxTraces int) *Shaper { return &Shaper{mem: newTraceMemory(maxTraces)} }

// Plan is NewPlan with the shaper's memory.
func (s *Shaper) Plan(td ptrace.Traces) *Plan { return newPlan(td, s.mem) }

// Traces is the number of traces remembered.
func (s *Shaper) Traces() int {
	s.mem.mu.Lock()
	defer s.mem.mu.Unlock()
	return s.mem.traces.Len()
}

// TraceMemory holds the trace-level values seen per trace, before defaults; the trace
// written to least recently is forgotten first once it holds max.
type TraceMemory struct {
	mu     sync.Mutex
	traces *vendorhttp.Bounded[pcommon.TraceID, traceInfo]
	// log keeps traces on disk (nil: memory only, memstore.go). Since the last write,
	// seen lists the traces of the batches in the order the memory took them (the order
	// on disk follows the memory's, so its bound keeps the same traces when read back),
	// and dirty those whose values changed; after a write failed, whole says the next
	// write is the whole memory instead, and they stay empty. wmu is held while a write
	// is made and stored, so writes go one at a time.
	log   *vendorhttp.EntryLog
	seen  []pcommon.TraceID
	dirty map[pcommon.TraceID]struct{}
	whole bool
	wmu   sync.Mutex
}

func newTraceMemory(max int) *TraceMemory {
	if max <= 0 {
		max = DefaultMaxTraces
	}
	return &TraceMemory{traces: vendorhttp.NewBounded[pcommon.TraceID, traceInfo](max), dirty: map[pcommon.TraceID]struct{}{}}
}

// remember fills what each batch trace lacks from what earlier batches saw of it, then
// keeps the union for later batches. A nil memory does nothing.
func (m *TraceMemory) remember(traces []traceInfo) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range traces {
		t := &traces[i]
		old, ok := m.traces.Get(t.id)
		if ok {
			t.fill(&old)
		}
		m.traces.Put(t.id, *t)
		if m.log == nil || m.whole {
			continue
		}
		m.seen = append(m.seen, t.id)
		if !ok || !t.sameValues(&old) {
			m.dirty[t.id] = struct{}{}
		}
	}
}

// sameValues reports whether t holds what o holds (fill only ever adds to it).
func (t *traceInfo) sameValues(o *traceInfo) bool {
	return t.name == o.name && t.rootName == o.rootName && t.session == o.session && t.user == o.user &&
		t.env == o.env && t.leadModel == o.leadModel && t.leadModelAt == o.leadModelAt &&
		t.hasLeadModel == o.hasLeadModel && (t.tags == nil) == (o.tags == nil) && slices.Equal(t.tags, o.tags)
}

// fill takes from old what t has not seen: each value as first seen, and the lead
// agent's model of the earliest call.
func (t *traceInfo) fill(old *traceInfo) {
	if t.name == "" {
		t.name = old.name
	}
	if t.rootName == "" {
		t.rootName = old.rootName
	}
	if t.session == "" {
		t.session = old.session
	}
	if t.user == "" {
		t.user = old.user
	}
	if t.tags == nil {
		t.tags = old.tags
	}
	if t.env == "" {
		t.env = old.env
	}
	if old.hasLeadModel && (!t.hasLeadModel || old.leadModelAt < t.leadModelAt) {
		t.leadModel, t.leadModelAt, t.hasLeadModel = old.leadModel, old.leadModelAt, true
	}
}
