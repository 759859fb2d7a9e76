package subagentmerge

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/storageclient"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

func chunkAt(seq uint64) string { return fmt.Sprintf("chunk/%016x", seq) }

// A chunk goes to the store compressed, and is what the process held once unpacked.
func TestStoredChunksAreCompressed(t *testing.T) {
	st := storagetest.New()
	p, _ := startWithStorage(t, st, defaultTestConfig())
	in := withoutRoot(buildParallel())
	n := in.SpanCount()
	require.NoError(t, p.ConsumeTraces(context.Background(), in))

	stored, err := st.Get(context.Background(), chunkAt(0))
	require.NoError(t, err)
	require.NotNil(t, stored)
	raw, err := storageclient.Packed(st).Get(context.Background(), chunkAt(0))
	require.NoError(t, err)
	assert.Less(t, len(stored), len(raw), "compressed: agent spans repeat their keys")
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(raw)
	require.NoError(t, err)
	assert.Equal(t, n, td.SpanCount())
	kill(p)
}

// A store an older version wrote (chunks as they are) is read as it was written after
// an upgrade; the chunks written from then on are compressed, and a
// later restart reads both kinds. Both traces end merged exactly.
func TestStoreAnOlderVersionWroteIsReadAfterAnUpgrade(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	older, newer := buildParallel(), buildOneTask()
	raw, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(withoutRoot(older))
	require.NoError(t, err)
	require.NoError(t, st.Set(ctx, chunkAt(0), raw))
	require.NoError(t, st.Set(ctx, "high", u64(1)))

	p1, _ := startWithStorage(t, st, defaultTestConfig())
	assert.Equal(t, int64(older.SpanCount()-1), p1.nSpans.Load(), "the older chunk is read as written")
	require.NoError(t, p1.ConsumeTraces(ctx, withoutRoot(newer)))
	newRaw, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(withoutRoot(newer))
	require.NoError(t, err)
	stored, err := st.Get(ctx, chunkAt(1))
	require.NoError(t, err)
	assert.Less(t, len(stored), len(newRaw), "the chunk written after the upgrade is compressed")
	again, err := st.Get(ctx, chunkAt(0))
	require.NoError(t, err)
	assert.Equal(t, raw, again, "the older chunk is left as it was")
	kill(p1)

	p2, sink := startWithStorage(t, st, defaultTestConfig())
	assert.Equal(t, int64(older.SpanCount()+newer.SpanCount()-2), p2.nSpans.Load(), "both kinds are read back")
	require.NoError(t, p2.ConsumeTraces(ctx, only(older, isLocalRoot)))
	require.NoError(t, p2.ConsumeTraces(ctx, only(newer, isLocalRoot)))
	require.Equal(t, older.SpanCount()+newer.SpanCount(), sink.SpanCount())
	out := canonical(sink.AllTraces()...)
	assertSubagent(t, spanByCalls(t, out, "call_a", "call_b"), genai.Usage{Input: 30, Output: 12}, 2, "call_a", "call_b")
	assertSubagent(t, spanByCalls(t, out, "call_task_1"), genai.Usage{Input: 10, Output: 5}, 1, "call_task_1")
	assert.Zero(t, st.Count("chunk/"), "passed-on traces leave nothing on disk")
	require.NoError(t, p2.Shutdown(ctx))
}

// A stored chunk that does not decompress (torn, or written by something else) does
// not decode either: it is skipped at start, the other chunks are restored.
func TestStoredChunkThatDoesNotDecompressIsSkipped(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	p1, _ := startWithStorage(t, st, defaultTestConfig())
	require.NoError(t, p1.ConsumeTraces(ctx, withoutRoot(buildParallel())))
	require.NoError(t, p1.ConsumeTraces(ctx, withoutRoot(buildOneTask())))
	kill(p1)
	// the compressed chunk cut short
	stored, err := st.Get(ctx, chunkAt(0))
	require.NoError(t, err)
	require.NoError(t, st.Set(ctx, chunkAt(0), stored[:len(stored)/2]))

	p2, sink := startWithStorage(t, st, defaultTestConfig())
	assert.Equal(t, int64(buildOneTask().SpanCount()-1), p2.nSpans.Load(), "the good chunk is restored")
	require.NoError(t, p2.ConsumeTraces(ctx, only(buildOneTask(), isLocalRoot)))
	assertSubagent(t, spanByCalls(t, canonical(sink.AllTraces()...), "call_task_1"), genai.Usage{Input: 10, Output: 5}, 1, "call_task_1")
	require.NoError(t, p2.Shutdown(ctx))
}
