package langsmith

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/exporter/langsmith/internal/ingest"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/envconfig"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// BenchmarkPush is the exporter's work per batch of 20 agent runs (160 spans) without
// the network and without compression: mapping spans to runs, encoding the runs and
// writing the multipart body. Read with -benchmem: B/op and allocs/op per batch.
func BenchmarkPush(b *testing.B) {
	e := benchPushExporter(b)
	vendortest.BenchPush(b, benchBatch(20), e.push)
}

// BenchmarkPushWithCorrections is BenchmarkPush with one span in eight a merge's
// re-emission (a patch after the posts): a batch behind a stream merge, whose runs the
// exporter puts in order before it encodes them.
func BenchmarkPushWithCorrections(b *testing.B) {
	e := benchPushExporter(b)
	td := benchBatch(20)
	i := 0
	for sp := range spaniter.All(td) {
		if i%8 == 7 {
			sp.Attributes().PutInt(genai.AttrMergeRevision, 1)
		}
		i++
	}
	vendortest.BenchPush(b, td, e.push)
}

// benchPushExporter is the exporter BenchPush drives: no compression, and a client that
// discards every request (202).
func benchPushExporter(b *testing.B) *lsExporter {
	b.Helper()
	srv := sinkServer()
	b.Cleanup(srv.Close)
	cfg := newDefaultConfig(envconfig.FromMap(map[string]string{"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "k"}))
	cfg.ClientConfig.Endpoint = srv.URL
	cfg.ClientConfig.Compression = "none"
	e := newExporter(cfg, exportertest.NewNopSettings(componentType))
	ctx := context.Background()
	if err := e.start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.shutdown(ctx) })
	c, err := ingest.NewClient(&http.Client{Transport: vendortest.Discard(http.StatusAccepted)}, srv.URL, "k", "", ingest.CompressionNone, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	e.client = c
	return e
}
