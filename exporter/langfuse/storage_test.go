package langfuse

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
	"github.com/agentmeter/agentmeter/internal/filestoragetest"
)

// extHost hands out storage extensions.
type extHost = filestoragetest.Host

// fileStorage starts a real file_storage extension in dir with max_size maxSize.
func fileStorage(t *testing.T, dir string, maxSize int64) (component.ID, component.Component) {
	t.Helper()
	id, host := filestoragetest.Start(t, dir, maxSize)
	return id, host[id]
}

// fillQueue starts the exporter on a persistent queue in ext against a Langfuse that
// answers 503, and sends padded agent traces until the exporter refused three of them;
// every refusal must be retryable. It returns the exporter and the accepted batches.
func fillQueue(t *testing.T, srv *langfusefake.Server, id component.ID, ext component.Component) (exporter.Traces, int) {
	t.Helper()
	srv.FailWith(&langfusefake.Response{Status: http.StatusServiceUnavailable, Body: `{"message":"down"}`})
	cfg := testConfig(srv)
	q := vendorhttp.DefaultQueueConfig()
	q.StorageID = &id
	cfg.QueueConfig = configoptional.Some(q)
	cfg.RetryConfig.MaxElapsedTime = 0 // retry until Langfuse is back
	exp, err := NewFactory().CreateTraces(context.Background(), exportertest.NewNopSettings(componentType), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), extHost{id: ext}))
	pad := strings.Repeat("x", 2048)
	accepted, refused := 0, 0
	for i := 0; i < 2000 && refused < 3; i++ {
		td, _, _ := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		for k := 0; k < spans.Len(); k++ {
			spans.At(k).Attributes().PutStr("pad", pad)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := exp.ConsumeTraces(ctx, td)
		cancel()
		if err != nil {
			assert.False(t, consumererror.IsPermanent(err), "a full queue or store refuses retryably: %v", err)
			refused++
			continue
		}
		accepted++
	}
	require.Equal(t, 3, refused, "the queue filled and refused")
	return exp, accepted
}

// drain lets Langfuse take requests again and waits until n observations arrived.
func drain(t *testing.T, srv *langfusefake.Server, exp exporter.Traces, n int) {
	t.Helper()
	srv.FailWith(nil)
	deadline := time.Now().Add(60 * time.Second)
	for len(srv.Observations()) < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, exp.Shutdown(context.Background()))
	assert.Equal(t, n, len(srv.Observations()), "nothing accepted is lost")
}

// With the default queue on a real file_storage (the shipped config's, 64 MiB max_size)
// and Langfuse down, senders fill the queue until it refuses them, retryably; the bbolt
// file stays bounded by the queue's 8 MiB of encoded spans, far under max_size; and
// everything accepted arrives once Langfuse is back.
func TestPersistentQueueIsBoundedOnDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("fills an 8 MiB persistent queue")
	}
	dir := t.TempDir()
	id, ext := fileStorage(t, dir, 64<<20)
	srv := langfusefake.New(t)
	exp, accepted := fillQueue(t, srv, id, ext)
	var size int64
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	for _, p := range files {
		st, err := os.Stat(p)
		require.NoError(t, err)
		size += st.Size()
	}
	t.Logf("%d batches (%d spans) queued; storage files %d bytes", accepted, accepted*9, size)
	assert.Less(t, size, int64(32<<20), "the file is bounded by the queue's bytes")
	drain(t, srv, exp, accepted*9)
}

// After a restart the sending queue on disk is sent, each span as the exporter sends
// it directly: what this version queued while Langfuse was down (shaped once, stored,
// read back), and what an earlier version left there on an upgrade (batches in the
// collector's own encoding, shaped as they are read).
func TestPersistentQueueIsSentAfterARestart(t *testing.T) {
	// the earlier version: a queue of pdata batches in front of a Langfuse that is down
	earlier := func(set exporter.Settings, cfg *Config) (exporter.Traces, error) {
		down := func(context.Context, ptrace.Traces) error { return errors.New("langfuse is down") }
		return vendorhttp.NewTraces(context.Background(), set, cfg, vendorhttp.Sender{Push: down}, cfg.RetryConfig, cfg.QueueConfig)
	}
	this := func(set exporter.Settings, cfg *Config) (exporter.Traces, error) {
		return NewFactory().CreateTraces(context.Background(), set, cfg)
	}
	for name, first := range map[string]func(exporter.Settings, *Config) (exporter.Traces, error){"this version": this, "an earlier version": earlier} {
		t.Run(name, func(t *testing.T) {
			id, ext := fileStorage(t, t.TempDir(), 64<<20)
			srv := langfusefake.New(t)
			srv.FailWith(&langfusefake.Response{Status: http.StatusServiceUnavailable, Body: `{"message":"down"}`})
			cfg := testConfig(srv)
			q := vendorhttp.DefaultQueueConfig()
			q.StorageID = &id
			cfg.QueueConfig = configoptional.Some(q)
			cfg.RetryConfig.MaxElapsedTime = 0
			set := exportertest.NewNopSettings(componentType) // one ID: the queue's storage is named by it
			exp, err := first(set, cfg)
			require.NoError(t, err)
			require.NoError(t, exp.Start(context.Background(), extHost{id: ext}))
			want := ptrace.NewTraces()
			for range 3 {
				td, _, _ := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
				td.ResourceSpans().At(0).CopyTo(want.ResourceSpans().AppendEmpty())
				require.NoError(t, exp.ConsumeTraces(context.Background(), td))
			}
			require.NoError(t, exp.Shutdown(context.Background()))

			srv.FailWith(nil)
			second, err := this(set, cfg)
			require.NoError(t, err)
			require.NoError(t, second.Start(context.Background(), extHost{id: ext}))
			got := srv.WaitForObservations(t, 27, 30*time.Second)
			require.NoError(t, second.Shutdown(context.Background()))
			assert.Len(t, got, 27, "every span accepted before the restart, once")
			assert.Empty(t, srv.Problems())

			direct := langfusefake.New(t)
			exp2, _ := started(t, testConfig(direct))
			require.NoError(t, exp2.ConsumeTraces(context.Background(), want))
			assert.Equal(t, langfusefake.ByID(direct.WaitForObservations(t, 27, 10*time.Second)), langfusefake.ByID(got))
		})
	}
}
