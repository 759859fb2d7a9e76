package shape

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
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
		got, err := decodeTraceValues(ti.id[:], encodeTraceValues(&ti))
		require.NoError(t, err)
		assert.Equal(t, ti, got)
	}
	good := encodeTraceValues(&traceInfo{name: "x", tags: []string{"t"}})
	for _, v := range [][]byte{nil, {9}, good[:len(good)-1], append(append([]byte(nil), good...), 0)} {
		_, err := decodeTraceValues(make([]byte, 16), v)
		assert.Error(t, err, "%v", v)
	}
	_, err := decodeTraceValues([]byte("short"), good)
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

// What plans taught the memory is written and read back by a new memory on the same
// store, within the bound, each trace with all the memory knew of it.
func TestTraceValuesOnDisk(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), traceValuesClient)
	ctx := context.Background()
	s := NewShaper(2)
	require.NoError(t, s.Attach(ctx, open()))
	s.mem.remember(batchOf(1, 2))
	require.NoError(t, s.Write(ctx))
	s.mem.remember([]traceInfo{{id: pcommon.TraceID{2}, user: "u-2"}}) // adds to trace 2
	s.mem.remember(batchOf(3))                                         // forgets trace 1
	require.NoError(t, s.Write(ctx))
	for range 5 { // past twice the bound: rewritten whole
		s.mem.remember([]traceInfo{{id: pcommon.TraceID{3}, session: "s-3"}, {id: pcommon.TraceID{2}}})
		require.NoError(t, s.Write(ctx))
	}
	require.NoError(t, s.Detach(ctx))

	again := NewShaper(2)
	require.NoError(t, again.Attach(ctx, open()))
	defer func() { require.NoError(t, again.Detach(ctx)) }()
	assert.Equal(t, 2, again.Traces())
	_, ok := again.mem.traces.Get(pcommon.TraceID{1})
	assert.False(t, ok, "forgotten")
	got, ok := again.mem.traces.Get(pcommon.TraceID{2})
	require.True(t, ok)
	assert.Equal(t, "root-c", got.rootName)
	assert.Equal(t, "u-2", got.user, "the last write holds what the memory added")
	got, _ = again.mem.traces.Get(pcommon.TraceID{3})
	assert.Equal(t, "s-3", got.session)
}

// A write that fails is made again by the next one.
func TestTraceValuesFailedWriteGoesWithTheNext(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), traceValuesClient)
	ctx := context.Background()
	s := NewShaper(10)
	disk := &filestoragetest.Flaky{Client: open()}
	require.NoError(t, s.Attach(ctx, disk))
	s.mem.remember(batchOf(1))
	disk.Fail = true
	require.ErrorContains(t, s.Write(ctx), "disk full")
	disk.Fail = false // the disk is back
	s.mem.remember(batchOf(2))
	require.NoError(t, s.Write(ctx))
	require.NoError(t, s.Detach(ctx))

	again := NewShaper(10)
	require.NoError(t, again.Attach(ctx, open()))
	defer func() { require.NoError(t, again.Detach(ctx)) }()
	got, ok := again.mem.traces.Get(pcommon.TraceID{1})
	require.True(t, ok, "written with the next write")
	assert.Equal(t, "root-b", got.rootName)
}
