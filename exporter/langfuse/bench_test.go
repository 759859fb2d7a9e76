package langfuse

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/internal/envconfig"
)

// BenchmarkVsOTLPHTTP sends the same agent-shaped batches (20 runs, 180 spans) through
// the langfuse exporter and the stock otlphttp exporter (v0.161.0), alternating request
// by request, to one loopback server that reads and discards each body. Both gzip and
// encode protobuf, neither queues nor retries. Only the ConsumeTraces calls are timed;
// each gets a fresh copy of the batch (the langfuse exporter shapes spans in place).
// Reports langfuse_spans/s, otlphttp_spans/s and their ratio (target >= 0.8).
func BenchmarkVsOTLPHTTP(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ctx := context.Background()

	lcfg := newConfig(envconfig.FromMap(nil))
	lcfg.Enabled, lcfg.Endpoint, lcfg.PublicKey, lcfg.SecretKey = true, srv.URL, "pk-lf-bench", "sk-lf-bench"
	lcfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	lcfg.RetryConfig.Enabled = false
	lf, err := NewFactory().CreateTraces(ctx, exportertest.NewNopSettings(componentType), lcfg)
	require.NoError(b, err)

	require.NoError(b, lf.Start(ctx, componenttest.NewNopHost()))
	otlp := vendortest.StockOTLPHTTP(b, srv.URL, nil)
	for _, e := range []exporter.Traces{lf, otlp} {
		defer func(e exporter.Traces) { require.NoError(b, e.Shutdown(ctx)) }(e)
	}

	src := traceBatch(20)
	spans := src.SpanCount()
	var lfTime, otlpTime time.Duration
	send := func(e exporter.Traces, acc *time.Duration) {
		td := ptrace.NewTraces()
		src.CopyTo(td)
		start := time.Now()
		if err := e.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
		*acc += time.Since(start)
	}
	// warm both connections and encoders
	send(lf, &lfTime)
	send(otlp, &otlpTime)
	lfTime, otlpTime = 0, 0

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			send(lf, &lfTime)
			send(otlp, &otlpTime)
		} else {
			send(otlp, &otlpTime)
			send(lf, &lfTime)
		}
	}
	b.StopTimer()
	lfRate := float64(spans*b.N) / lfTime.Seconds()
	otlpRate := float64(spans*b.N) / otlpTime.Seconds()
	b.ReportMetric(lfRate, "langfuse_spans/s")
	b.ReportMetric(otlpRate, "otlphttp_spans/s")
	b.ReportMetric(lfRate/otlpRate, "ratio")
}
