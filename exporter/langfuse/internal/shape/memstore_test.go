package shape

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
// store: the same traces, in the same order, with the same values, whatever batches
// came (new traces, values added, traces only seen again, traces forgotten past the
// bound) and however many times the log was rewritten whole on the way.
func TestTraceValuesOnDiskReadBackAsInMemory(t *testing.T) {
	for seed := range int64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), traceValuesClient)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			s := NewShaper(5)
			require.NoError(t, s.Attach(ctx, open()))
			for range 300 {
				var batch []traceInfo
				for range 1 + rng.IntN(3) {
					ti := traceInfo{id: pcommon.TraceID{byte(1 + rng.IntN(12))}}
					switch rng.IntN(4) {
					case 0:
						ti.rootName = fmt.Sprint("root-", rng.IntN(3))
					case 1:
						ti.user = fmt.Sprint("user-", rng.IntN(3))
					case 2:
						ti.tags = []string{fmt.Sprint("tag-", rng.IntN(2))}
					} // 3: seen again, nothing new
					batch = append(batch, ti)
				}
				s.mem.remember(batch)
				require.NoError(t, s.Write(ctx))
			}
			var want []traceInfo
			s.mem.traces.Each(func(_ pcommon.TraceID, ti traceInfo) { want = append(want, ti) })
			require.NoError(t, s.Detach(ctx))

			again := NewShaper(5)
			require.NoError(t, again.Attach(ctx, open()))
			defer func() { require.NoError(t, again.Detach(ctx)) }()
			var got []traceInfo
			again.mem.traces.Each(func(_ pcommon.TraceID, ti traceInfo) { got = append(got, ti) })
			assert.Equal(t, want, got)
		})
	}
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
	s.mem.remember(batchOf(3))
	disk.Fail = true
	require.Error(t, s.Write(ctx))
	disk.Fail = false
	require.NoError(t, s.Detach(ctx), "what is not on disk yet is written at the end")

	again := NewShaper(10)
	require.NoError(t, again.Attach(ctx, open()))
	defer func() { require.NoError(t, again.Detach(ctx)) }()
	got, ok := again.mem.traces.Get(pcommon.TraceID{1})
	require.True(t, ok, "written with the next write")
	assert.Equal(t, "root-b", got.rootName)
	_, ok = again.mem.traces.Get(pcommon.TraceID{3})
	assert.True(t, ok, "written when the exporter stopped")
}

// slowStore holds its first write until released, then fails it; it counts the writes
// that succeed.
type slowStore struct {
	storage.Client
	entered, release chan struct{}
	first            sync.Once
	ok               atomic.Int32
}

func (s *slowStore) Batch(ctx context.Context, ops ...*storage.Operation) error {
	held := false
	s.first.Do(func() { held = true })
	if held {
		close(s.entered)
		<-s.release
		return errors.New("disk full")
	}
	if err := s.Client.Batch(ctx, ops...); err != nil {
		return err
	}
	s.ok.Add(1)
	return nil
}

func (s *slowStore) Walk(ctx context.Context, fn storage.WalkFunc) error {
	return s.Client.(storage.Walker).Walk(ctx, fn)
}

// A Write returns once what its batch brought is on disk, also when another Write was
// writing the same values and failed: a batch is queued (and acknowledged) only after.
func TestTraceValuesWriteWaitsForTheWriteInProgress(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), traceValuesClient)
	ctx := context.Background()
	s := NewShaper(10)
	disk := &slowStore{Client: open(), entered: make(chan struct{}), release: make(chan struct{})}
	require.NoError(t, s.Attach(ctx, disk))
	defer func() { require.NoError(t, s.Detach(ctx)) }()

	s.mem.remember(batchOf(1)) // batch A
	aDone := make(chan error, 1)
	go func() { aDone <- s.Write(ctx) }()
	<-disk.entered
	s.mem.remember(batchOf(1)) // batch B: the same values, nothing new
	type result struct {
		err    error
		writes int32
	}
	bDone := make(chan result, 1)
	go func() {
		err := s.Write(ctx)
		bDone <- result{err, disk.ok.Load()}
	}()
	time.Sleep(20 * time.Millisecond) // B would have returned by now, had it not waited
	close(disk.release)
	require.ErrorContains(t, <-aDone, "disk full")
	b := <-bDone
	require.NoError(t, b.err)
	assert.Equal(t, int32(1), b.writes, "B returned once its values were on disk, written by itself after A failed")
}
