package langfuse

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// extHost hands out storage extensions.
type extHost map[component.ID]component.Component

func (h extHost) GetExtensions() map[component.ID]component.Component { return h }

// With the default queue on a real file_storage (the shipped config's, 64 MiB max_size)
// and Langfuse down, senders fill the queue until it refuses them, retryably; the bbolt
// file stays bounded by the queue's 8 MiB of encoded spans, far under max_size; and
// everything accepted arrives once Langfuse is back.
func TestPersistentQueueIsBoundedOnDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("fills an 8 MiB persistent queue")
	}
	dir := t.TempDir()
	f := filestorage.NewFactory()
	fcfg := f.CreateDefaultConfig().(*filestorage.Config)
	fcfg.Directory, fcfg.Compaction.Directory = dir, dir
	fcfg.MaxSize = 64 << 20
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), fcfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), extHost{}))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	id := component.NewID(f.Type())

	srv := langfusefake.New(t)
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
			assert.False(t, consumererror.IsPermanent(err), "a full queue refuses retryably: %v", err)
			refused++
			continue
		}
		accepted++
	}
	require.Equal(t, 3, refused, "the queue filled and refused")
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

	srv.FailWith(nil)
	deadline := time.Now().Add(60 * time.Second)
	for len(srv.Observations()) < accepted*9 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, exp.Shutdown(context.Background()))
	assert.Equal(t, accepted*9, len(srv.Observations()), "nothing accepted is lost")
}
