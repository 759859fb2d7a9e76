package vendorhttp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/genai"
)

// SpanKey names one span at a vendor: both vendors key a run or an observation by it.
type SpanKey struct {
	Trace pcommon.TraceID
	Span  pcommon.SpanID
}

// Version is one emission of a span: Rev 0 for the first, ≥1 for a re-emission
// (genai.Version.Rank).
type Version struct {
	Key SpanKey
	Rev int64
}

// VersionOf reads the version of a span from its attributes.
func VersionOf(key SpanKey, attrs pcommon.Map) Version {
	return Version{Key: key, Rev: genai.ReemissionOf(attrs).Rank()}
}

// NewVersion is VersionOf from the span's merge revision and merge status, for readers
// that walk the attributes once.
func NewVersion(key SpanKey, rev int64, mergeStatus string) Version {
	return Version{Key: key, Rev: genai.Version{Revision: rev, Corrected: mergeStatus == genai.MergeCorrected}.Rank()}
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
// Deciding what goes out is not enough when several queue consumers send at once: a
// version let out by a push still in flight could land after a newer one. So a push
// that carries a re-emission (Begin) records its versions at once, then waits until
// every push of the re-emitted span's trace that was in flight when it came was answered
// (those decided what they send before its versions were recorded, so an older version
// may be among them); pushes that begin after it see its versions and drop older ones,
// so they are not waited for, and a trace whose spans keep coming does not hold it. A
// wait cut short (MaxReemissionWait, the push's context) sends nothing: the push fails,
// retryably, and its retry goes after. Pushes of first emissions only never wait.
//
// It holds at most max spans (a few dozen bytes each); past that the span re-emitted
// least recently is forgotten first, and an older version of it arriving after that
// would be sent.
// Behind a persistent sending queue it is on disk as well (revstore.go); otherwise in
// memory only, and after a restart the order of versions still queued is what the queue
// hands out. Safe for concurrent use.
type Revisions struct {
	mu   sync.Mutex
	revs *Bounded[SpanKey, int64]
	// log holds revs on disk (nil: memory only). wmu is taken under mu and held while
	// a push's changes are written, so the writes land in the order the memory changed.
	log    *EntryLog
	wmu    sync.Mutex
	pushes map[uint64][]pcommon.TraceID // the pushes in flight and their traces
	next   uint64                       // the next push's id
	idle   chan struct{}                // closed (and replaced) whenever a push is answered
}

// MaxReemissionWait bounds how long a push carrying a re-emission waits for the pushes
// of its trace that were in flight when it came: past it, it fails retryably
// (ErrOlderInFlight) instead of going out, so a consumer is not held long.
const MaxReemissionWait = 5 * time.Second

// ErrOlderInFlight is why a push carrying a re-emission did not go out: a push of its
// trace that may hold an older version was still in flight. It is retryable.
var ErrOlderInFlight = errors.New("a push of the same trace that may hold an older version of a re-emitted span is still in flight; sent later, so as not to land before it")

// NewRevisions remembers at most max spans (max ≤ 0: DefaultMaxRevisions).
func NewRevisions(max int) *Revisions {
	if max <= 0 {
		max = DefaultMaxRevisions
	}
	return &Revisions{revs: NewBounded[SpanKey, int64](max), pushes: map[uint64][]pcommon.TraceID{}, idle: make(chan struct{})}
}

// Begin is keep for a push that is about to be sent. A push carrying a re-emission then
// waits, at most MaxReemissionWait or until ctx ends, until the pushes of its
// re-emitted spans' traces that were in flight when it came were answered; a wait cut
// short is err (ErrOlderInFlight, or ctx's error), and then nothing of the push may be
// sent. Every push holds its traces as in flight until done is called, once it was
// answered (or err said it must not be sent): call done in every case.
func (r *Revisions) Begin(ctx context.Context, vs []Version, keepFirst bool) (keep []bool, done func(), err error) {
	traces := tracesOf(vs, nil)
	r.mu.Lock()
	keep, written := r.keep(vs, keepFirst)
	// only the traces of the re-emissions that go out are waited for: a first emission of
	// one of those spans can be in flight only in a push of its trace
	reemitted := tracesOf(vs, func(i int) bool { return vs[i].Rev > 0 && (keep == nil || keep[i]) })
	var before []uint64
	if len(reemitted) > 0 {
		for id, ts := range r.pushes {
			if slices.ContainsFunc(ts, func(t pcommon.TraceID) bool { return slices.Contains(reemitted, t) }) {
				before = append(before, id)
			}
		}
	}
	id := r.next
	r.next++
	r.pushes[id] = traces
	l, rewrite := r.log, false
	if len(written) > 0 {
		r.wmu.Lock()
		if rewrite = l.Due(r.revs.Cap()); rewrite {
			written = r.all()
		}
	}
	r.mu.Unlock()
	done = func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.pushes, id)
		close(r.idle)
		r.idle = make(chan struct{})
	}
	if len(written) > 0 {
		var err error
		if rewrite {
			err = l.Rewrite(ctx, written)
		} else {
			err = l.Append(ctx, written)
		}
		r.wmu.Unlock()
		if err != nil {
			return keep, done, fmt.Errorf("storage: recording the revisions of re-emitted spans before sending them: %w", err)
		}
	}
	if len(before) == 0 {
		return keep, done, nil
	}
	deadline := time.NewTimer(MaxReemissionWait)
	defer deadline.Stop()
	r.mu.Lock()
	for r.anyInFlight(before) {
		idle := r.idle
		r.mu.Unlock()
		select {
		case <-idle:
		case <-deadline.C:
			return keep, done, ErrOlderInFlight
		case <-ctx.Done():
			return keep, done, fmt.Errorf("%w (%w)", ErrOlderInFlight, ctx.Err())
		}
		r.mu.Lock()
	}
	r.mu.Unlock()
	return keep, done, nil
}

// anyInFlight reports whether one of the pushes ids is in flight. r.mu is held.
func (r *Revisions) anyInFlight(ids []uint64) bool {
	for _, id := range ids {
		if _, ok := r.pushes[id]; ok {
			return true
		}
	}
	return false
}

// tracesOf lists the distinct traces of the versions in vs that pick picks (nil: all of
// them); spans of one trace usually sit together.
func tracesOf(vs []Version, pick func(i int) bool) []pcommon.TraceID {
	var out []pcommon.TraceID
	for i := range vs {
		if pick != nil && !pick(i) {
			continue
		}
		t := vs[i].Key.Trace
		if len(out) > 0 && out[len(out)-1] == t {
			continue
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// Len is the number of spans remembered.
func (r *Revisions) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.revs.Len()
}

// keep decides, for the versions of one batch in batch order, which go out, and records
// the re-emissions kept. Within the batch only the newest version of a re-emitted span
// is kept (the last of equal ones); across batches a re-emission older than one let out
// before is dropped. A first emission (Rev 0) of a span whose re-emission is in the
// batch or was let out before is kept only when keepFirst: LangSmith needs its post to
// create the run the patches update, Langfuse would replace the newer row with it.
// keep is nil when every version goes out (the common case: no re-emission anywhere).
// With a store, written is what it recorded, to write. r.mu is held.
func (r *Revisions) keep(vs []Version, keepFirst bool) (keep []bool, written []Entry) {
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
	if newest == nil && r.revs.Len() == 0 {
		return nil, nil
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
			written = r.put(v.Key, v.Rev, written)
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
	return keep, written
}
