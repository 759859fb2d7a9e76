package langsmith

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/internal/envconfig"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
)

// sinkServer is the one loopback server both exporters send to: it reads every body
// and answers 200 (/info gets the SaaS-like batch config).
func sinkServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/info" {
			_, _ = io.WriteString(w, `{"batch_ingest_config":{"use_multipart_endpoint":true,"size_limit":100,"size_limit_bytes":20971520}}`)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
}

// benchBatch is tracesPerBatch agent traces (8 spans each) in one ptrace.Traces.
func benchBatch(tracesPerBatch int) ptrace.Traces {
	td := ptrace.NewTraces()
	for i := 0; i < tracesPerBatch; i++ {
		one, _ := fakevendor.AgentTrace(byte(i), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Second))
		one.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	return td
}

// newBenchExporters builds the LangSmith exporter with compression comp and the stock
// otlphttp JSON exporter with otlpComp ("": its own default).
func newBenchExporters(b *testing.B, url string, comp, otlpComp configcompression.Type) (ls, otlp exporter.Traces) {
	b.Helper()
	lsCfg := newDefaultConfig(envconfig.FromMap(map[string]string{"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "k"}))
	lsCfg.ClientConfig.Endpoint = url
	lsCfg.ClientConfig.Compression = comp
	lsCfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	lsCfg.RetryConfig.Enabled = false
	ls, err := NewFactory().CreateTraces(context.Background(), exportertest.NewNopSettings(componentType), lsCfg)
	require.NoError(b, err)
	require.NoError(b, ls.Start(context.Background(), componenttest.NewNopHost()))
	return ls, stockJSON(b, url, otlpComp)
}

// benchmarkAgainstOTLPHTTP sends the same spans to the same loopback server through both
// exporters, interleaved per iteration so machine noise hits both alike, and reports
// spans/s of each and their ratio (langsmith / otlphttp).
func benchmarkAgainstOTLPHTTP(b *testing.B, comp configcompression.Type) {
	srv := sinkServer()
	defer srv.Close()
	ls, otlp := newBenchExporters(b, srv.URL, comp, comp)
	defer func() {
		_ = ls.Shutdown(context.Background())
		_ = otlp.Shutdown(context.Background())
	}()
	runInterleaved(b, ls, otlp)
}

// Each exporter with its own default compression (langsmith zstd, otlphttp gzip).
func BenchmarkVsOTLPHTTPDefaults(b *testing.B) {
	b.Run("zstd_vs_gzip", func(b *testing.B) {
		srv := sinkServer()
		defer srv.Close()
		benchmarkDefaults(b, srv.URL)
	})
}

func benchmarkDefaults(b *testing.B, url string) {
	ls, otlp := newBenchExporters(b, url, configcompression.TypeZstd, "") // each at its default compression
	defer func() {
		_ = ls.Shutdown(context.Background())
		_ = otlp.Shutdown(context.Background())
	}()
	runInterleaved(b, ls, otlp)
}

// stockJSON is the stock otlphttp exporter sending JSON, as LangSmith's ingest does, with
// comp (empty: otlphttp's default).
func stockJSON(b *testing.B, url string, comp configcompression.Type) exporter.Traces {
	return vendortest.StockOTLPHTTP(b, url, func(c *otlphttpexporter.Config) {
		c.Encoding = otlphttpexporter.EncodingJSON
		if comp != "" {
			c.ClientConfig.Compression = comp
		}
	})
}

func runInterleaved(b *testing.B, ls, otlp exporter.Traces) {
	td := benchBatch(64)
	spans := td.SpanCount()
	var lsTime, otlpTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		vendortest.Renumber(td, uint64(i))
		t0 := time.Now()
		if err := ls.ConsumeTraces(context.Background(), td); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := otlp.ConsumeTraces(context.Background(), td); err != nil {
			b.Fatal(err)
		}
		lsTime += t1.Sub(t0)
		otlpTime += time.Since(t1)
	}
	b.StopTimer()
	lsRate := float64(spans*b.N) / lsTime.Seconds()
	otlpRate := float64(spans*b.N) / otlpTime.Seconds()
	b.ReportMetric(lsRate, "langsmith_spans/s")
	b.ReportMetric(otlpRate, "otlphttp_json_spans/s")
	b.ReportMetric(lsRate/otlpRate, "ratio")
}

// Same compression on both sides.
func BenchmarkVsOTLPHTTPSameCompression(b *testing.B) {
	for _, comp := range []configcompression.Type{"none", configcompression.TypeGzip, configcompression.TypeZstd} {
		b.Run(string(comp), func(b *testing.B) { benchmarkAgainstOTLPHTTP(b, comp) })
	}
}
