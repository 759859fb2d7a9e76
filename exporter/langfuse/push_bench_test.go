package langfuse

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/internal/envconfig"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// discard answers every request 200 after reading its body, without a network: the
// benchmarks below time only the exporter's own work.
type discard struct{}

func (discard) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Header: http.Header{}, Request: r}, nil
}

// BenchmarkPush is the exporter's work per batch of 20 agent runs (180 spans) without
// the network and without compression: shaping, encoding, splicing. Read with -benchmem:
// B/op and allocs/op are the per-batch cost; spans/s the rate.
func BenchmarkPush(b *testing.B) {
	cfg := newConfig(envconfig.FromMap(nil))
	cfg.Enabled, cfg.PublicKey, cfg.SecretKey = true, "pk-lf-bench", "sk-lf-bench"
	cfg.Compression = "none"
	e, err := newExporter(cfg, exportertest.NewNopSettings(componentType))
	if err != nil {
		b.Fatal(err)
	}
	e.client = &http.Client{Transport: discard{}}
	src := traceBatch(20)
	ctx := context.Background()
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

// renumber gives every trace of the batch fresh ids, as new traces would have.
func renumber(td ptrace.Traces, n uint64) {
	for sp := range spaniter.All(td) {
		tid := sp.TraceID()
		binary.BigEndian.PutUint64(tid[8:], n)
		sp.SetTraceID(pcommon.TraceID(tid))
	}
}
