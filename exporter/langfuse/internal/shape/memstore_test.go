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

// order lists the traces m holds, oldest first.
func order(m *TraceMemory) []traceInfo {
	var out []traceInfo
	m.traces.Each(func(_ pcommon.TraceID, ti traceInfo) { out = append(out, ti) })
	return out
}

// readBack is what a restarted memory of bound max reads from c as it stands.
func readBack(t *testing.T, c storage.Client, max int) []traceInfo {
	t.Helper()
	probe := NewShaper(max)
	require.NoError(t, probe.Attach(context.Background(), c))
	return order(probe.mem)
}

// What plans taught the memory is read back by a new memory on the same store after
// every write that went through: the same traces, in the same order, with the same
// values, whatever came (new traces, values added, traces only seen again, the same
// trace in several batches between two writes, traces forgotten past the bound, writes
// that failed, the log rewritten whole on the way).
func TestTraceValuesOnDiskReadBackAsInMemory(t *testing.T) {
	for seed := range int64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), traceValuesClient)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			const bound = 5
			s := NewShaper(bound)
			disk := &filestoragetest.Flaky{Client: open()}
			require.NoError(t, s.Attach(ctx, disk))
			for range 300 {
				for range 1 + rng.IntN(3) { // batches planned while another wrote
					var batch []traceInfo
					for range 1 + rng.IntN(3) {
						ti := traceInfo{id: pcommon.TraceID{byte(1 + rng.IntN(9))}}
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
				}
				disk.Fail = rng.IntN(8) == 0
				if err := s.Write(ctx); err != nil {
					require.True(t, disk.Fail, "%v", err)
					assert.Empty(t, s.mem.seen, "nothing piles up while the disk fails")
					continue
				}
				require.Equal(t, order(s.mem), readBack(t, disk.Client, bound))
			}
			disk.Fail = false
			want := order(s.mem)
			require.NoError(t, s.Detach(ctx))
			assert.Equal(t, want, readBack(t, open(), bound))
		})
	}
}

// A write that fails is made again by the next one, as the whole memory; while the
// disk fails nothing piles up.
func TestTraceValuesFailedWriteGoesWithTheNext(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), traceValuesClient)
	ctx := context.Background()
	s := NewShaper(10)
	disk := &filestoragetest.Flaky{Client: open()}
	require.NoError(t, s.Attach(ctx, disk))
	s.mem.remember(batchOf(1))
	disk.Fail = true
	require.ErrorContains(t, s.Write(ctx), "disk full")
	for i := range 100 {
		s.mem.remember(batchOf(byte(10 + i%5)))
		require.Error(t, s.Write(ctx))
	}
	assert.Empty(t, s.mem.seen)
	assert.Empty(t, s.mem.dirty)
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
