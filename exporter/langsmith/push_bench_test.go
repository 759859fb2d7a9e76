package langsmith

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/exporter/langsmith/internal/ingest"
	"github.com/agentmeter/agentmeter/internal/envconfig"
)

// discard answers every request 202 after reading its body, without a network: the
// benchmark below times only the exporter's own work.
type discard struct{}

func (discard) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusAccepted, Body: io.NopCloser(strings.NewReader("{}")), Header: http.Header{}, Request: r}, nil
}

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
	c, err := ingest.NewClient(&http.Client{Transport: discard{}}, srv.URL, "k", "", ingest.CompressionNone, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	e.client = c
	src := benchBatch(20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		renumber(src, uint64(i)+1) // new traces each time, as a live stream has
		b.StartTimer()
		if err := e.push(ctx, src); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*src.SpanCount())/b.Elapsed().Seconds(), "spans/s")
}
