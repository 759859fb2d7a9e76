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
	"github.com/agentmeter/agentmeter/internal/envconfig"
)

// BenchmarkPush is the exporter's work per batch of 20 agent runs (160 spans) without
// the network and without compression: mapping spans to runs, encoding the runs and
// writing the multipart body. Read with -benchmem: B/op and allocs/op per batch.
func BenchmarkPush(b *testing.B) {
	srv := sinkServer()
	defer srv.Close()
	cfg := newDefaultConfig(envconfig.FromMap(map[string]string{"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "k"}))
	cfg.ClientConfig.Endpoint = srv.URL
	cfg.ClientConfig.Compression = "none"
	e := newExporter(cfg, exportertest.NewNopSettings(componentType))
	ctx := context.Background()
	if err := e.start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.shutdown(ctx) }()
	c, err := ingest.NewClient(&http.Client{Transport: vendortest.Discard(http.StatusAccepted)}, srv.URL, "k", "", ingest.CompressionNone, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	e.client = c
	vendortest.BenchPush(b, benchBatch(20), e.push)
}
