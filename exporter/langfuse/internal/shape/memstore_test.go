package shape

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/internal/filestoragetest"
)

func TestTraceValuesEncoding(t *testing.T) {
	for _, ti := range []traceInfo{
		{id: pcommon.TraceID{1}},
		{id: pcommon.TraceID{2}, name: "research", rootName: "lead-agent", session: "s-1", user: "u-1", env: "prod",
			leadModel: "gpt-5", leadModelAt: 1234567890123, hasLeadModel: true, tags: []string{"a", "b,c", ""}},
		{id: pcommon.TraceID{3}, tags: []string{}}, // tags set empty: not the same as none
	} {
		got, err := decodeTraceValues(string(ti.id[:]), encodeTraceValues(&ti))
		require.NoError(t, err)
		assert.Equal(t, ti, got)
	}
	good := encodeTraceValues(&traceInfo{name: "x", tags: []string{"t"}})
	for _, v := range [][]byte{nil, {9}, good[:len(good)-1], append(append([]byte(nil), good...), 0)} {
		_, err := decodeTraceValues(string(make([]byte, 16)), v)
		assert.Error(t, err, "%v", v)
	}
	_, err := decodeTraceValues("short", good)
	assert.Error(t, err)
}

// batchOf is the traces a plan of one batch found: each with a root name.
func batchOf(ids ...byte) []traceInfo {
	var out []traceInfo
	for _, id := range ids {
		out = append(out, traceInfo{id: pcommon.TraceID{id}, rootName: "root-" + string('a'+id)})
	}
	return out
}

// What plans taught the memory is written, read back by a new memory on the same store,
// kept within the bound on disk too, and a damaged entry is dropped at start.
func TestTraceValuesOnDisk(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), traceValuesClient)
	ctx := context.Background()
	c := open()
	require.NoError(t, c.Set(ctx, "damaged", []byte{1, 2}))
	s := NewShaper(2)
	require.NoError(t, s.Attach(ctx, c))
	s.mem.remember(batchOf(1, 2))
	require.NoError(t, s.Write(ctx))
	s.mem.remember([]traceInfo{{id: pcommon.TraceID{2}, user: "u-2"}}) // adds to trace 2
	s.mem.remember(batchOf(3))                                         // forgets trace 1
	require.NoError(t, s.Write(ctx))
	require.NoError(t, s.Detach(ctx))

	again := NewShaper(2)
	c = open()
	require.NoError(t, again.Attach(ctx, c))
	defer func() { require.NoError(t, again.Detach(ctx)) }()
	assert.Equal(t, 2, again.Traces())
	_, ok := again.mem.traces.Get(pcommon.TraceID{1})
	assert.False(t, ok, "forgotten on disk too")
	got, ok := again.mem.traces.Get(pcommon.TraceID{2})
	require.True(t, ok)
	assert.Equal(t, "root-c", got.rootName)
	assert.Equal(t, "u-2", got.user, "the last write holds what the memory added")
	n := 0
	require.NoError(t, c.(storage.Walker).Walk(ctx, func(string, []byte) ([]*storage.Operation, error) { n++; return nil, nil }))
	assert.Equal(t, 2, n, "the damaged entry and the forgotten trace are gone")
}

// failingStore fails every write.
type failingStore struct{ storage.Client }

func (failingStore) Batch(context.Context, ...*storage.Operation) error {
	return errors.New("disk full")
}

// A write that fails is made again by the next one.
func TestTraceValuesFailedWriteGoesWithTheNext(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), traceValuesClient)
	ctx := context.Background()
	c := open()
	s := NewShaper(10)
	require.NoError(t, s.Attach(ctx, c))
	s.mem.store = failingStore{c}
	s.mem.remember(batchOf(1))
	require.ErrorContains(t, s.Write(ctx), "disk full")
	s.mem.store = c // the disk is back
	require.NoError(t, s.Write(ctx))
	id := pcommon.TraceID{1}
	v, err := c.Get(ctx, string(id[:]))
	require.NoError(t, err)
	got, err := decodeTraceValues(string(id[:]), v)
	require.NoError(t, err)
	assert.Equal(t, "root-b", got.rootName)
	require.NoError(t, s.Detach(ctx))
}
