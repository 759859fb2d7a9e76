package vendorhttp

import (
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/genai"
)

// SpanKey names one span at a vendor: both vendors key a run or an observation by it.
type SpanKey struct {
	Trace pcommon.TraceID
	Span  pcommon.SpanID
}

// Version is one emission of a span: Rev 0 for the first, ≥1 for a re-emission
// (genai.IsReemission; a corrected span without a revision counts as revision 1).
type Version struct {
	Key SpanKey
	Rev int64
}

// VersionOf reads the version of a span from its attributes.
func VersionOf(key SpanKey, attrs pcommon.Map) Version {
	rev := genai.MergeRevision(attrs)
	if rev == 0 && genai.IsReemission(attrs) {
		rev = 1
	}
	return Version{Key: key, Rev: rev}
}

// NewVersion is VersionOf from the span's merge revision and merge status, for readers
// that walk the attributes once.
func NewVersion(key SpanKey, rev int64, mergeStatus string) Version {
	if rev == 0 && mergeStatus == genai.MergeCorrected {
		rev = 1
	}
	return Version{Key: key, Rev: rev}
}

// DefaultMaxRevisions bounds how many re-emitted spans an exporter remembers: a
// re-emission is a dispatching model call or a task tool call, a few per agent run, so
// this covers the runs of many hours at once.
const DefaultMaxRevisions = 100_000

// Revisions remembers the newest revision of each re-emitted span an exporter has let
// out, so an older version that reaches the exporter later (several queue consumers, a
// retry, a restart of the merge) is not sent over a newer one: neither vendor orders the
// versions of a span by anything the exporter can set; each keeps the one it received
// last. The same revision again is let out (a retry of the same data is idempotent at
// both vendors).
//
// It holds at most max spans (a few dozen bytes each); past that the span remembered
// first is forgotten first, and an older version of it arriving after that would be sent.
// It is in memory only: after a restart the order of versions still queued on disk is
// what the queue hands out. Safe for concurrent use.
type Revisions struct {
	mu   sync.Mutex
	revs *Bounded[SpanKey, int64]
}

// NewRevisions remembers at most max spans (max ≤ 0: DefaultMaxRevisions).
func NewRevisions(max int) *Revisions {
	if max <= 0 {
		max = DefaultMaxRevisions
	}
	return &Revisions{revs: NewBounded[SpanKey, int64](max)}
}

// Len is the number of spans remembered.
func (r *Revisions) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.revs.Len()
}

// Keep decides, for the versions of one batch in batch order, which go out, and records
// the re-emissions kept. Within the batch only the newest version of a re-emitted span
// is kept (the last of equal ones); across batches a re-emission older than one let out
// before is dropped. A first emission (Rev 0) of a span whose re-emission is in the
// batch or was let out before is kept only when keepFirst: LangSmith needs its post to
// create the run the patches update, Langfuse would replace the newer row with it.
// keep is nil when every version goes out (the common case: no re-emission anywhere).
func (r *Revisions) Keep(vs []Version, keepFirst bool) (keep []bool) {
	var newest map[SpanKey]int // index of the newest re-emission of each key in the batch
	for i, v := range vs {
		if v.Rev == 0 {
			continue
		}
		if newest == nil {
			newest = map[SpanKey]int{}
		}
		if j, ok := newest[v.Key]; !ok || vs[j].Rev <= v.Rev {
			newest[v.Key] = i
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if newest == nil && r.revs.Len() == 0 {
		return nil
	}
	for i, v := range vs {
		known, seen := r.revs.Get(v.Key)
		ok := true
		switch {
		case v.Rev == 0:
			_, inBatch := newest[v.Key]
			ok = keepFirst || (!seen && !inBatch)
		case newest[v.Key] != i || (seen && v.Rev < known):
			ok = false
		default:
			r.revs.Put(v.Key, v.Rev)
		}
		if !ok {
			if keep == nil {
				keep = make([]bool, len(vs))
				for j := range i {
					keep[j] = true
				}
			}
			continue
		}
		if keep != nil {
			keep[i] = true
		}
	}
	return keep
}
