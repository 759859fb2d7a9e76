package vendorhttp

import (
	"context"
	"errors"
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

// What a push let out is on disk before it is sent, and a Revisions attached to the same
// store after a restart drops the older versions.
func TestRevisionsOnDiskSurviveARestart(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), revisionsClient)
	ctx := context.Background()
	r := NewRevisions(10)
	require.NoError(t, r.Attach(ctx, open()))
	keep, done, err := r.Begin(ctx, []Version{{key(1), 2}, {key(2), 0}}, false)
	done()
	require.NoError(t, err)
	assert.Nil(t, keep)
	require.NoError(t, r.Detach(ctx))

	again := NewRevisions(10)
	require.NoError(t, again.Attach(ctx, open()))
	defer func() { require.NoError(t, again.Detach(ctx)) }()
	assert.Equal(t, 1, again.Len(), "the re-emission only")
	keep, done, err = again.Begin(ctx, []Version{{key(1), 1}, {key(1), 0}, {key(2), 0}}, false)
	done()
	require.NoError(t, err)
	assert.Equal(t, []bool{false, false, true}, keep)
}

// walk lists what c holds.
func walk(t *testing.T, c storage.Client) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, c.(storage.Walker).Walk(context.Background(), func(k string, v []byte) ([]*storage.Operation, error) {
		out[k] = append([]byte(nil), v...)
		return nil, nil
	}))
	return out
}

// Past the bound the entry forgotten from memory is deleted on disk in the same write,
// and an entry that is not a revision (a damaged file) is deleted at start.
func TestRevisionsOnDiskKeepTheBound(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), revisionsClient)
	ctx := context.Background()
	c := open()
	require.NoError(t, c.Set(ctx, "damaged", []byte{1}))
	r := NewRevisions(2)
	require.NoError(t, r.Attach(ctx, c))
	assert.NotContains(t, walk(t, c), "damaged")
	for i := byte(1); i <= 3; i++ {
		_, done, err := r.Begin(ctx, []Version{{key(i), int64(i)}}, false)
		done()
		require.NoError(t, err)
	}
	held := walk(t, c)
	assert.Len(t, held, 2)
	assert.NotContains(t, held, revKey(key(1)), "forgotten first")
	assert.Equal(t, revValue(3), held[revKey(key(3))])
	require.NoError(t, r.Detach(ctx))
}

// failingClient fails every write.
type failingClient struct{ storage.Client }

func (failingClient) Batch(context.Context, ...*storage.Operation) error {
	return errors.New("disk full")
}

// A push whose revisions cannot be written is not sent: Begin fails, retryably, and the
// same push tried again once the disk takes writes goes out and is written.
func TestRevisionsNotWrittenFailThePush(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), revisionsClient)
	ctx := context.Background()
	c := open()
	r := NewRevisions(10)
	require.NoError(t, r.Attach(ctx, c))
	r.store = failingClient{c} // the disk fails
	_, done, err := r.Begin(ctx, []Version{{key(1), 2}}, false)
	done()
	require.ErrorContains(t, err, "disk full")
	assert.False(t, consumererror.IsPermanent(err))

	r.store = c // the disk is back
	keep, done, err := r.Begin(ctx, []Version{{key(1), 2}}, false)
	done()
	require.NoError(t, err)
	assert.Nil(t, keep, "the retry goes out")
	assert.Equal(t, revValue(2), walk(t, c)[revKey(key(1))])
	require.NoError(t, r.Detach(ctx))
}

// Concurrent pushes re-emitting the same span leave its newest revision on disk: the
// writes land in the order the memory changed.
func TestRevisionsOnDiskConcurrentPushes(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), revisionsClient)
	ctx := context.Background()
	c := open()
	r := NewRevisions(100)
	require.NoError(t, r.Attach(ctx, c))
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
	assert.Equal(t, revValue(known), walk(t, c)[revKey(key(1))])
	require.NoError(t, r.Detach(ctx))
}
