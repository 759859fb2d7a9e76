package vendorhttp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/genai"
)

func key(n byte) SpanKey { return SpanKey{Trace: pcommon.TraceID{1}, Span: pcommon.SpanID{n}} }

func TestVersionOf(t *testing.T) {
	m := pcommon.NewMap()
	assert.Equal(t, int64(0), VersionOf(key(1), m).Rev)
	m.PutStr(genai.AttrMergeStatus, genai.MergeCorrected)
	assert.Equal(t, int64(1), VersionOf(key(1), m).Rev, "corrected without a revision is a re-emission")
	m.PutInt(genai.AttrMergeRevision, 4)
	assert.Equal(t, Version{key(1), 4}, VersionOf(key(1), m))
}

func TestRevisionsKeep(t *testing.T) {
	r := NewRevisions(10)
	// nothing re-emitted anywhere: no work, everything goes
	assert.Nil(t, r.keepNow([]Version{{key(1), 0}, {key(2), 0}}, false))

	// revision 2 arrives first: sent
	assert.Nil(t, r.keepNow([]Version{{key(1), 2}}, false))
	// then revision 1 and the first emission: neither may replace revision 2 at Langfuse
	assert.Equal(t, []bool{false, false, true}, r.keepNow([]Version{{key(1), 1}, {key(1), 0}, {key(2), 0}}, false))
	// LangSmith keeps the first emission (its post creates the run), never the old patch
	assert.Equal(t, []bool{false, true}, r.keepNow([]Version{{key(1), 1}, {key(1), 0}}, true))
	// the same revision again (a retry) goes out again
	assert.Nil(t, r.keepNow([]Version{{key(1), 2}}, false))
	// a newer one goes out and becomes the bar
	assert.Nil(t, r.keepNow([]Version{{key(1), 3}}, false))
	assert.Equal(t, []bool{false}, r.keepNow([]Version{{key(1), 2}}, false))

	// within one batch only the newest version of a span goes out, in any order
	assert.Equal(t, []bool{false, true, false, false}, r.keepNow([]Version{{key(5), 1}, {key(5), 3}, {key(5), 2}, {key(5), 0}}, false))
	assert.Equal(t, []bool{false, true, false, true}, r.keepNow([]Version{{key(6), 1}, {key(6), 3}, {key(6), 2}, {key(6), 0}}, true))
	assert.Equal(t, []bool{false, true}, r.keepNow([]Version{{key(7), 2}, {key(7), 2}}, false), "the last of equal ones")
}

func TestRevisionsForgetTheOldestPastTheBound(t *testing.T) {
	r := NewRevisions(3)
	for i := byte(1); i <= 5; i++ {
		r.keepNow([]Version{{key(i), 2}}, false)
	}
	assert.Equal(t, 3, r.Len())
	// 1 and 2 were forgotten: their old versions pass; 3..5 are still guarded
	assert.Nil(t, r.keepNow([]Version{{key(1), 1}}, false))
	assert.Equal(t, []bool{false}, r.keepNow([]Version{{key(5), 1}}, false))
	assert.Equal(t, 3, r.Len())
}

func TestRevisionsConcurrent(t *testing.T) {
	r := NewRevisions(0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				r.keepNow([]Version{{key(byte(i)), int64(g + 1)}, {key(byte(i)), 0}}, g%2 == 0)
			}
		}()
	}
	wg.Wait()
	// whatever the interleaving, the highest revision is the bar for every span
	for i := range 200 {
		assert.Equal(t, []bool{false}, r.keepNow([]Version{{key(byte(i)), 7}}, false))
	}
}

// A push carrying a re-emission waits until the pushes of its trace in flight when it
// came were answered, so an earlier version cannot land after it; pushes of other
// traces, and pushes of first emissions only, never wait.
func TestBeginOrdersAReemissionAfterItsTrace(t *testing.T) {
	r := NewRevisions(10)
	ctx := context.Background()
	other := SpanKey{Trace: pcommon.TraceID{2}, Span: pcommon.SpanID{1}}
	keep, firstDone, err := r.Begin(ctx, []Version{{key(1), 0}, {key(2), 0}}, false)
	assert.NoError(t, err)
	assert.Nil(t, keep)
	_, otherDone, err := r.Begin(ctx, []Version{{other, 0}}, false) // never waits
	assert.NoError(t, err)
	_, again, err := r.Begin(ctx, []Version{{key(3), 0}}, false) // first emissions never wait
	assert.NoError(t, err)
	again()

	admitted := make(chan []bool)
	go func() {
		keep, done, err := r.Begin(ctx, []Version{{key(1), 2}}, false)
		assert.NoError(t, err)
		done()
		admitted <- keep
	}()
	select {
	case <-admitted:
		t.Fatal("the re-emission went out while its trace's first emission was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	otherDone() // another trace answered: still waiting
	select {
	case <-admitted:
		t.Fatal("admitted by another trace's answer")
	case <-time.After(50 * time.Millisecond):
	}
	firstDone()
	select {
	case keep := <-admitted:
		assert.Nil(t, keep, "revision 2 goes out")
	case <-time.After(MaxReemissionWait):
		t.Fatal("the re-emission was never admitted")
	}

	// a push waits only for the traces of its re-emitted spans, not for the other traces
	// it carries
	_, busyOther, _ := r.Begin(ctx, []Version{{other, 0}}, false)
	quick := make(chan struct{})
	go func() {
		_, done, err := r.Begin(ctx, []Version{{key(1), 4}, {other, 0}}, false)
		assert.NoError(t, err)
		done()
		close(quick)
	}()
	select {
	case <-quick:
	case <-time.After(MaxReemissionWait / 2):
		t.Fatal("waited for a trace it does not re-emit")
	}
	busyOther()
	assert.Empty(t, r.pushes, "every push released its traces")
}

// A push that begins while a re-emission waits sees its version: an older one is not
// sent, and the re-emission does not wait for it (a trace whose pushes keep coming does
// not hold it).
func TestBeginWaitsOnlyForPushesBeforeIt(t *testing.T) {
	r := NewRevisions(10)
	ctx := context.Background()
	_, firstDone, err := r.Begin(ctx, []Version{{key(1), 0}}, true)
	assert.NoError(t, err)
	admitted := make(chan struct{})
	go func() {
		_, done, err := r.Begin(ctx, []Version{{key(1), 3}}, true)
		assert.NoError(t, err)
		done()
		close(admitted)
	}()
	assert.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.pushes) == 2
	}, time.Second, time.Millisecond, "the re-emission is waiting")

	keep, laterDone, err := r.Begin(ctx, []Version{{key(1), 2}, {key(2), 0}}, true)
	assert.NoError(t, err)
	assert.Equal(t, []bool{false, true}, keep, "revision 2 after revision 3 came is not sent")
	firstDone()
	select {
	case <-admitted:
	case <-time.After(MaxReemissionWait / 2):
		t.Fatal("the re-emission waited for a push that began after it")
	}
	laterDone()
	assert.Empty(t, r.pushes)
}

// A wait cut short sends nothing: Begin says why (retryable), and done still releases
// the push; its retry, once the push it waited for was answered, goes out.
func TestBeginCutShortSendsNothing(t *testing.T) {
	r := NewRevisions(10)
	_, busy, err := r.Begin(context.Background(), []Version{{key(1), 0}}, true)
	assert.NoError(t, err)
	wctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	keep, done, err := r.Begin(wctx, []Version{{key(1), 5}}, true)
	assert.ErrorIs(t, err, ErrOlderInFlight)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, keep)
	done()
	busy()
	assert.Empty(t, r.pushes, "every push released its traces")

	keep, done, err = r.Begin(context.Background(), []Version{{key(1), 5}}, true)
	assert.NoError(t, err, "the retry")
	assert.Nil(t, keep)
	done()
}

// Past its bound a Bounded forgets the key put least recently: a key put again (a trace
// still being written, a span re-emitted again) stays.
func TestBoundedForgetsTheLeastRecentlyPut(t *testing.T) {
	b := NewBounded[int, string](3)
	for i := 1; i <= 3; i++ {
		b.Put(i, "v")
	}
	b.Put(1, "again") // 1 is now the newest
	b.Put(4, "v")     // 2 leaves
	_, ok := b.Get(2)
	assert.False(t, ok)
	v, ok := b.Get(1)
	assert.True(t, ok)
	assert.Equal(t, "again", v)
	b.Put(5, "v") // 3 leaves
	b.Put(6, "v") // 1 leaves
	for k, want := range map[int]bool{1: false, 3: false, 4: true, 5: true, 6: true} {
		_, ok := b.Get(k)
		assert.Equal(t, want, ok, "key %d", k)
	}
	assert.Equal(t, 3, b.Len())

	one := NewBounded[int, int](1)
	one.Put(1, 1)
	one.Put(1, 2)
	one.Put(2, 3)
	_, ok = one.Get(1)
	assert.False(t, ok)
	v2, _ := one.Get(2)
	assert.Equal(t, 3, v2)
}

// keepNow is keep for a test without a store.
func (r *Revisions) keepNow(vs []Version, keepFirst bool) []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	keep, _ := r.keep(vs, keepFirst)
	return keep
}
