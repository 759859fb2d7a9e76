package vendorhttp

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/internal/filestoragetest"
)

func revisionsStore(t *testing.T) func() storage.Client {
	return filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), revisionsClient)
}

// begin runs one push through r, which must go.
func begin(t *testing.T, r *Revisions, vs ...Version) []bool {
	t.Helper()
	keep, done, err := r.Begin(context.Background(), vs, false)
	done()
	require.NoError(t, err)
	return keep
}

// reopened is a new Revisions of bound max on what open gives, as after a restart.
func reopened(t *testing.T, open func() storage.Client, max int) *Revisions {
	t.Helper()
	r := NewRevisions(max)
	require.NoError(t, r.Attach(context.Background(), open()))
	t.Cleanup(func() { require.NoError(t, r.Detach(context.Background())) })
	return r
}

// What a push let out is on disk before it is sent, and a Revisions attached to the same
// store after a restart drops the older versions.
func TestRevisionsOnDiskSurviveARestart(t *testing.T) {
	open := revisionsStore(t)
	ctx := context.Background()
	r := NewRevisions(10)
	require.NoError(t, r.Attach(ctx, open()))
	assert.Nil(t, begin(t, r, Version{key(1), 2}, Version{key(2), 0}))
	require.NoError(t, r.Detach(ctx))

	again := reopened(t, open, 10)
	assert.Equal(t, 1, again.Len(), "the re-emission only")
	assert.Equal(t, []bool{false, false, true}, begin(t, again, Version{key(1), 1}, Version{key(1), 0}, Version{key(2), 0}))
}

// Read back, the bound keeps the spans re-emitted last, as in memory; the records are
// rewritten whole once they hold more than twice the bound, and what they held before
// still reads the same.
func TestRevisionsOnDiskKeepTheBound(t *testing.T) {
	open := revisionsStore(t)
	ctx := context.Background()
	r := NewRevisions(3)
	require.NoError(t, r.Attach(ctx, open()))
	for i := byte(1); i <= 20; i++ {
		begin(t, r, Version{key(i%5 + 1), int64(i)})
	}
	assert.LessOrEqual(t, r.log.written, 2*3+3, "rewritten past twice the bound")
	want := map[SpanKey]int64{}
	r.revs.Each(func(k SpanKey, v int64) { want[k] = v })
	require.NoError(t, r.Detach(ctx))

	again := reopened(t, open, 3)
	got := map[SpanKey]int64{}
	again.revs.Each(func(k SpanKey, v int64) { got[k] = v })
	assert.Equal(t, want, got)
}

// A push whose revisions cannot be written is not sent: Begin fails, retryably, and the
// same push tried again once the disk takes writes goes out and is written.
func TestRevisionsNotWrittenFailThePush(t *testing.T) {
	open := revisionsStore(t)
	ctx := context.Background()
	r := NewRevisions(10)
	disk := &filestoragetest.Flaky{Client: open(), Fail: true}
	require.NoError(t, r.Attach(ctx, disk))
	_, done, err := r.Begin(ctx, []Version{{key(1), 2}}, false)
	done()
	require.ErrorContains(t, err, "disk full")
	assert.False(t, consumererror.IsPermanent(err))

	disk.Fail = false // the disk is back
	assert.Nil(t, begin(t, r, Version{key(1), 2}), "the retry goes out")
	require.NoError(t, r.Detach(ctx))
	rev, ok := reopened(t, open, 10).revs.Get(key(1))
	assert.True(t, ok)
	assert.EqualValues(t, 2, rev)
}

// Concurrent pushes re-emitting the same span leave its newest revision on disk: the
// writes land in the order the memory changed.
func TestRevisionsOnDiskConcurrentPushes(t *testing.T) {
	open := revisionsStore(t)
	ctx := context.Background()
	r := NewRevisions(100)
	require.NoError(t, r.Attach(ctx, open()))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				_, done, err := r.Begin(ctx, []Version{{SpanKey{Trace: pcommon.TraceID{byte(g + 1)}, Span: pcommon.SpanID{1}}, 0}, {key(1), int64(g*50 + i + 1)}}, false)
				done()
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	known, _ := r.revs.Get(key(1))
	require.NoError(t, r.Detach(ctx))
	onDisk, _ := reopened(t, open, 100).revs.Get(key(1))
	assert.Equal(t, known, onDisk)
}
