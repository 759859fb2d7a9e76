package vendorhttp

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/internal/storageclient"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

var queueStorageID = component.MustNewID("file_storage")

// agentBatch is n spans that repeat their keys and values, as agent spans do.
func agentBatch(n int, run int) ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i := range n {
		sp := ss.Spans().AppendEmpty()
		sp.SetName("chat gpt-4o")
		sp.SetSpanID([8]byte{byte(run), byte(i), 1})
		sp.SetTraceID([16]byte{byte(run), 1})
		a := sp.Attributes()
		a.PutStr("gen_ai.operation.name", "chat")
		a.PutStr("gen_ai.request.model", "gpt-4o-2024-08-06")
		a.PutInt("gen_ai.usage.input_tokens", int64(100+i))
		a.PutInt("gen_ai.usage.output_tokens", int64(20+i))
		a.PutStr("agentmeter.agent.name", "lead_agent")
	}
	return td
}

// queuedExporter is an exporter whose vendor is down until up is set, with a
// persistent queue in st; it counts the spans its vendor took. Without packing it is
// exporterhelper's own, as an older version of ours built it.
func queuedExporter(t *testing.T, st *storagetest.Storage, packing bool, up *atomic.Bool, took *atomic.Int64) func() {
	t.Helper()
	q := DefaultQueueConfig()
	q.StorageID = &queueStorageID
	q.NumConsumers = 1
	retry := configretry.NewDefaultBackOffConfig()
	retry.InitialInterval, retry.MaxInterval = 5*time.Millisecond, 10*time.Millisecond
	push := func(_ context.Context, td ptrace.Traces) error {
		if !up.Load() {
			return errors.New("vendor down")
		}
		took.Add(int64(td.SpanCount()))
		return nil
	}
	set := exportertest.NewNopSettings(component.MustNewType("vendor"))
	ctx := context.Background()
	var start func(context.Context, component.Host) error
	var consume func(context.Context, ptrace.Traces) error
	var shutdown func(context.Context) error
	if packing {
		exp, err := NewTraces(ctx, set, &struct{}{}, Sender{Push: push}, retry, configoptional.Some(q))
		require.NoError(t, err)
		start, consume, shutdown = exp.Start, exp.ConsumeTraces, exp.Shutdown
	} else {
		exp, err := exporterhelper.NewTraces(ctx, set, &struct{}{}, push, exporterhelper.WithRetry(retry), exporterhelper.WithQueue(configoptional.Some(q)))
		require.NoError(t, err)
		start, consume, shutdown = exp.Start, exp.ConsumeTraces, exp.Shutdown
	}
	require.NoError(t, start(ctx, st.Host(queueStorageID)))
	for run := range 4 {
		require.NoError(t, consume(ctx, agentBatch(50, run)))
	}
	return func() { require.NoError(t, shutdown(ctx)) }
}

func waitFor(t *testing.T, took *atomic.Int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for took.Load() < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, want, took.Load())
}

// The queue's requests are on disk compressed; after a restart the queue reads them
// back and every span reaches the vendor once.
func TestPersistentQueueStoresRequestsCompressed(t *testing.T) {
	st := storagetest.New()
	var up atomic.Bool
	var took atomic.Int64
	stop := queuedExporter(t, st, true, &up, &took)
	stop() // the vendor never answered: everything is still queued on disk

	items := 0
	for i := range 4 {
		v, err := st.Named("traces").Get(context.Background(), strconv.Itoa(i))
		require.NoError(t, err)
		if v == nil {
			continue
		}
		items++
		raw, err := storageclient.Packed(st.Named("traces")).Get(context.Background(), strconv.Itoa(i))
		require.NoError(t, err)
		assert.Less(t, 3*len(v), len(raw), "item %d is stored compressed: agent spans compress several times", i)
	}
	require.Positive(t, items)

	up.Store(true)
	stop = queuedExporter(t, st, true, &up, &took)
	waitFor(t, &took, 8*50) // the 4 queued before the restart and the 4 sent after it
	stop()
}

// What an older version queued (exporterhelper's values as they are) is read after an
// upgrade and delivered, beside what the new version queues packed.
func TestPersistentQueueReadsWhatAnOlderVersionQueued(t *testing.T) {
	st := storagetest.New()
	var up atomic.Bool
	var took atomic.Int64
	stop := queuedExporter(t, st, false, &up, &took)
	stop()
	v, err := st.Named("traces").Get(context.Background(), "0")
	require.NoError(t, err)
	require.NotNil(t, v)
	packed, err := storageclient.Packed(st.Named("traces")).Get(context.Background(), "0")
	require.NoError(t, err)
	require.Equal(t, v, packed, "the older version stored it as it is")

	up.Store(true)
	stop = queuedExporter(t, st, true, &up, &took)
	waitFor(t, &took, 8*50)
	stop()
}

// A persistent queue never changes or keeps the caller's batch, so the exporter says so
// (the collector then hands it a batch it shares with other consumers, uncloned); a
// batching queue in memory merges the caller's requests, so that one does not.
func TestPersistentQueueLeavesTheBatchAlone(t *testing.T) {
	set := exportertest.NewNopSettings(component.MustNewType("vendor"))
	ctx := context.Background()
	var took atomic.Int64
	push := func(_ context.Context, td ptrace.Traces) error {
		took.Add(int64(td.SpanCount()))
		return nil
	}
	batching := func(q exporterhelper.QueueBatchConfig) exporterhelper.QueueBatchConfig {
		q.Batch = configoptional.Some(*q.Batch.GetOrInsertDefault()) // as the shipped config's batch: {...}
		return q
	}
	mem := batching(DefaultQueueConfig())
	exp, err := NewTraces(ctx, set, &struct{}{}, Sender{Push: push}, configretry.NewDefaultBackOffConfig(), configoptional.Some(mem))
	require.NoError(t, err)
	assert.True(t, exp.Capabilities().MutatesData, "an in-memory batching queue merges the caller's requests")

	st := storagetest.New()
	q := batching(DefaultQueueConfig())
	q.StorageID = &queueStorageID
	exp, err = NewTraces(ctx, set, &struct{}{}, Sender{Push: push}, configretry.NewDefaultBackOffConfig(), configoptional.Some(q))
	require.NoError(t, err)
	require.False(t, exp.Capabilities().MutatesData)
	require.NoError(t, exp.Start(ctx, st.Host(queueStorageID)))
	in := agentBatch(50, 1)
	var m ptrace.ProtoMarshaler
	want, err := m.MarshalTraces(in)
	require.NoError(t, err)
	in.MarkReadOnly() // a write to it would panic
	require.NoError(t, exp.ConsumeTraces(ctx, in))
	waitFor(t, &took, 50)
	require.NoError(t, exp.Shutdown(ctx))
	got, err := m.MarshalTraces(in)
	require.NoError(t, err)
	assert.Equal(t, want, got, "the caller's batch is as it was")
}
