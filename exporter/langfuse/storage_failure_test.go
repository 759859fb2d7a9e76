package langfuse

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
	"github.com/agentmeter/agentmeter/internal/filestoragetest"
)

// failingFile is a real storage extension one of whose clients (a file of its own with
// file_storage) fails its writes while fail is set: a disk that is full for that file
// (it must grow) while the queue's file still has free pages, or a transient failure.
type failingFile struct {
	storage.Extension
	name     string
	fail     atomic.Bool
	failures atomic.Int32 // writes refused
	// onBatch, when set, sees every batch given to the client, before it is applied
	onBatch func(ops []*storage.Operation) error
}

func (f *failingFile) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	c, err := f.Extension.GetClient(ctx, kind, id, name)
	if err != nil || name != f.name {
		return c, err
	}
	return &failingClient{Client: c, f: f}, nil
}

type failingClient struct {
	storage.Client
	f *failingFile
}

func (c *failingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if c.f.fail.Load() {
		c.f.failures.Add(1)
		return errors.New("disk full")
	}
	if c.f.onBatch != nil {
		if err := c.f.onBatch(ops); err != nil {
			c.f.failures.Add(1)
			return err
		}
	}
	return c.Client.Batch(ctx, ops...)
}

func (c *failingClient) Walk(ctx context.Context, fn storage.WalkFunc) error {
	return c.Client.(storage.Walker).Walk(ctx, fn)
}

func unbatched(c *Config) {
	c.QueueConfig.Get().Batch = configoptional.None[exporterhelper.BatchConfig]()
}

// A push carrying a re-emission whose revision cannot be written is not sent and is
// retried; once the disk is back it goes out, and after a kill -9 a stale revision is
// not sent over it.
func TestRevisionsWriteFailsNothingSentThenKill(t *testing.T) {
	srv := langfusefake.New(t)
	dir := t.TempDir()
	id, ext := fileStorage(t, dir, 64<<20)
	ctx := context.Background()
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	chat := ids[langfusefake.RoleLeadChat1]
	disk := &failingFile{Extension: ext.(storage.Extension), name: "revisions"}
	exp := onStorage(t, srv, id, disk, unbatched, func(c *Config) {
		c.RetryConfig.InitialInterval, c.RetryConfig.MaxInterval, c.RetryConfig.MaxElapsedTime = 20*time.Millisecond, 50*time.Millisecond, 0
	})
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	require.NoError(t, exp.ConsumeTraces(ctx, td))
	waitRows(t, srv, chat.String())
	sent := len(srv.Requests())

	disk.fail.Store(true)
	require.NoError(t, exp.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 2, genai.Usage{Input: 9000, Output: 900})))
	require.Eventually(t, func() bool { return disk.failures.Load() >= 3 }, 10*time.Second, 5*time.Millisecond, "the push is retried")
	assert.Len(t, srv.Requests(), sent, "nothing is sent while its revision is not on disk")
	disk.fail.Store(false)
	waitInput(t, srv, chat.String(), 9000)

	killed := t.TempDir()
	require.NoError(t, os.CopyFS(killed, os.DirFS(dir)))
	id2, ext2 := fileStorage(t, killed, 64<<20)
	again := onStorage(t, srv, id2, ext2)
	defer func() { require.NoError(t, again.Shutdown(ctx)) }()
	staleRevision1Stays(t, srv, again, td, chat)
}

// The log's rewrite is one batch (one bbolt transaction): the new records and the
// deletion of the old ones land together or not at all. A rewrite that fails leaves the
// old records, which read back every revision let out.
func TestRevisionsRewriteIsAtomic(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), "revisions")
	ctx := context.Background()
	key := func(i int) vendorhttp.SpanKey {
		return vendorhttp.SpanKey{Trace: pcommon.TraceID{1}, Span: pcommon.SpanID{byte(i)}}
	}
	var failRewrite atomic.Bool
	var rewrites, failed int
	disk := &failingFile{}
	disk.onBatch = func(ops []*storage.Operation) error {
		sets, dels := 0, 0
		for _, op := range ops {
			switch op.Type {
			case storage.Set:
				sets++
			case storage.Delete:
				dels++
			}
		}
		if dels > 0 {
			rewrites++
			assert.Positive(t, sets, "a rewrite writes the new records in the batch that deletes the old")
			if failRewrite.Load() {
				failed++
				return errors.New("disk full")
			}
		}
		return nil
	}
	let := map[vendorhttp.SpanKey]int64{} // what went out
	r := vendorhttp.NewRevisions(4)
	require.NoError(t, r.Attach(ctx, &failingClient{Client: open(), f: disk}))
	for i := 1; i <= 200; i++ {
		failRewrite.Store(i%7 == 0)
		k := key(i%4 + 1)
		_, done, err := r.Begin(ctx, []vendorhttp.Version{{Key: k, Rev: int64(i)}}, false)
		done()
		if err == nil {
			let[k] = int64(i)
		}
	}
	require.Positive(t, failed)
	require.NoError(t, r.Detach(ctx)) // writes nothing: the same as a kill
	again := vendorhttp.NewRevisions(4)
	require.NoError(t, again.Attach(ctx, open()))
	defer func() { require.NoError(t, again.Detach(ctx)) }()
	for k, rev := range let {
		keep, done, err := again.Begin(ctx, []vendorhttp.Version{{Key: k, Rev: rev - 1}}, false)
		done()
		require.NoError(t, err)
		assert.Equal(t, []bool{false}, keep, "an older version than %d of %v is not sent after the restart", rev, k)
	}
	t.Logf("rewrites %d, failed %d", rewrites, failed)
}

// traceValuesFailThen sends td through an exporter whose trace-values file fails its
// writes, runs stop, and returns a copy of the storage as it is then (a kill -9 right
// after stop). A batch that is refused (nothing acknowledged) is sent again once the
// disk is back, as the sender would.
func traceValuesFailThen(t *testing.T, srv *langfusefake.Server, td ptrace.Traces, chat pcommon.SpanID, stop func(exp interface{ Shutdown(context.Context) error }, disk *failingFile) error) string {
	t.Helper()
	dir := t.TempDir()
	id, ext := fileStorage(t, dir, 64<<20)
	ctx := context.Background()
	disk := &failingFile{Extension: ext.(storage.Extension), name: "trace_values"}
	exp := onStorage(t, srv, id, disk)
	disk.fail.Store(true)
	if err := exp.ConsumeTraces(ctx, td); err != nil {
		assert.False(t, consumererror.IsPermanent(err), "refused retryably: %v", err)
		t.Logf("refused: %v", err)
		disk.fail.Store(false)
		require.NoError(t, exp.ConsumeTraces(ctx, td), "sent again once the disk is back")
	}
	waitRows(t, srv, chat.String())
	t.Logf("trace-values writes refused: %d", disk.failures.Load())
	killed := t.TempDir()
	var stopped atomic.Bool
	t.Cleanup(func() {
		if !stopped.Load() {
			_ = exp.Shutdown(ctx)
		}
	})
	if err := stop(shutdownOnce{exp, &stopped}, disk); err != nil {
		t.Logf("stop: %v", err)
	}
	require.NoError(t, os.CopyFS(killed, os.DirFS(dir)))
	return killed
}

type shutdownOnce struct {
	exp     interface{ Shutdown(context.Context) error }
	stopped *atomic.Bool
}

func (s shutdownOnce) Shutdown(ctx context.Context) error {
	s.stopped.Store(true)
	return s.exp.Shutdown(ctx)
}

// reemittedKeepsValues restarts the exporter on dir and checks that a re-emission of chat
// replaces its row with the trace values the first emission had.
func reemittedKeepsValues(t *testing.T, srv *langfusefake.Server, dir string, td ptrace.Traces, chat pcommon.SpanID) {
	t.Helper()
	ctx := context.Background()
	first := langfusefake.ByID(srv.Rows())[chat.String()]
	require.NotEmpty(t, first.TraceName)
	require.NotEmpty(t, first.Tags)
	id2, ext2 := fileStorage(t, dir, 64<<20)
	again := onStorage(t, srv, id2, ext2)
	defer func() { require.NoError(t, again.Shutdown(ctx)) }()
	require.NoError(t, again.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 1, genai.Usage{Input: 7000, Output: 700})))
	waitInput(t, srv, chat.String(), 7000)
	got := langfusefake.ByID(srv.Rows())[chat.String()]
	assert.Equal(t, first.TraceName, got.TraceName, "trace name kept")
	assert.Equal(t, first.Tags, got.Tags, "tags kept")
	assert.Equal(t, first.UserID, got.UserID, "user kept")
	assert.Equal(t, first.SessionID, got.SessionID, "session kept")
}

// The trace values' write fails (only their file) for a batch. Then the process is
// killed with the disk back, stopped with Shutdown with the disk back, or stopped with
// Shutdown while the disk still fails. A re-emission after the restart keeps the trace
// values either way.
func TestTraceValuesFailedWriteSurviveAStop(t *testing.T) {
	type stoppable = interface{ Shutdown(context.Context) error }
	for _, c := range []struct {
		name string
		stop func(exp stoppable, disk *failingFile) error
	}{
		{"kill", func(_ stoppable, disk *failingFile) error {
			disk.fail.Store(false)
			return nil // kill -9: nothing more
		}},
		{"shutdown", func(exp stoppable, disk *failingFile) error {
			disk.fail.Store(false)
			return exp.Shutdown(context.Background())
		}},
		{"shutdown while the disk fails", func(exp stoppable, _ *failingFile) error {
			return exp.Shutdown(context.Background())
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := langfusefake.New(t)
			td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
			chat := ids[langfusefake.RoleLeadChat1]
			dir := traceValuesFailThen(t, srv, td, chat, c.stop)
			reemittedKeepsValues(t, srv, dir, td, chat)
		})
	}
}

// Shutdown while a push carrying revision 2 waits for an in-flight push of revision
// 1 that Langfuse answers after MaxReemissionWait: Shutdown returns, and the row ends at
// revision 2 (after a restart if revision 2 stayed queued); revision 1 never lands after
// revision 2.
func TestShutdownWhileAReemissionWaits(t *testing.T) {
	srv := langfusefake.New(t)
	dir := t.TempDir()
	id, ext := fileStorage(t, dir, 64<<20)
	ctx := context.Background()
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	chat := ids[langfusefake.RoleLeadChat1]
	slow := vendortest.SlowFirstPost(t, srv.URL, vendorhttp.MaxReemissionWait+time.Second)
	exp := onStorage(t, srv, id, ext, unbatched, func(c *Config) {
		c.Endpoint = slow
		c.QueueConfig.Get().NumConsumers = 2
		c.RetryConfig.MaxElapsedTime = 0
	})
	require.NoError(t, exp.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 1, genai.Usage{Input: 1111})))
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, exp.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 2, genai.Usage{Input: 2222})))
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, exp.Shutdown(ctx)) })
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown hangs")
	}
	t.Logf("Shutdown took %v", time.Since(start))

	again := onStorage(t, srv, id, ext, unbatched)
	defer func() { require.NoError(t, again.Shutdown(ctx)) }()
	waitInput(t, srv, chat.String(), 2222)
	revision := func(o langfusefake.Observation) any { return o.Attributes[genai.AttrMergeRevision] }
	var order []any
	for _, o := range srv.Observations() {
		if o.ID == chat.String() {
			order = append(order, revision(o))
		}
	}
	t.Logf("versions received: %v", order)
	require.NotEmpty(t, order)
	assert.EqualValues(t, 2, order[len(order)-1], "revision 2 is received last")
}
