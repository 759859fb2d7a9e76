// Package vendortest holds what both vendor exporters' tests and benchmarks need: a
// transport that answers without a network, fresh trace ids for a reused batch, the
// per-batch push benchmark, the stock otlphttp exporter they are measured against, and
// the cost step's pricing of a batch.
package vendortest

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/pricing"
)

// Discard is a transport that reads every request body and answers status with "{}",
// without a network: a benchmark through it times only the exporter's own work.
type Discard int

// RoundTrip implements http.RoundTripper.
func (d Discard) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: int(d), Body: io.NopCloser(strings.NewReader("{}")), Header: http.Header{}, Request: r}, nil
}

// Renumber gives every trace of the batch fresh ids (n in the low 8 bytes), as new traces
// would have, so an exporter that remembers traces sees new ones.
func Renumber(td ptrace.Traces, n uint64) {
	for sp := range spaniter.All(td) {
		tid := sp.TraceID()
		binary.BigEndian.PutUint64(tid[8:], n)
		sp.SetTraceID(pcommon.TraceID(tid))
	}
}

// BenchPush times push on src, renumbered before each call (outside the timer) so every
// call sees new traces as a live stream would, and reports spans/s besides -benchmem's
// per-batch B/op and allocs/op.
func BenchPush(b *testing.B, src ptrace.Traces, push func(context.Context, ptrace.Traces) error) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		Renumber(src, uint64(i)+1)
		b.StartTimer()
		if err := push(ctx, src); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*src.SpanCount())/b.Elapsed().Seconds(), "spans/s")
}

// StockOTLPHTTP starts the stock otlphttp exporter sending to url without a queue or
// retries, as the vendor exporters are set up to be compared with it; configure changes
// the rest (compression, encoding). The caller shuts it down.
func StockOTLPHTTP(b *testing.B, url string, configure func(*otlphttpexporter.Config)) exporter.Traces {
	b.Helper()
	f := otlphttpexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlphttpexporter.Config)
	cfg.ClientConfig.Endpoint = url
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.Enabled = false
	if configure != nil {
		configure(cfg)
	}
	e, err := f.CreateTraces(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
	require.NoError(b, err)
	require.NoError(b, e.Start(context.Background(), componenttest.NewNopHost()))
	return e
}

// PriceModelCalls writes a cost on every model call of td from the default price table
// and returns the sum of their own cost, so an exporter test has priced spans to send.
// It is simpler than the cost step (genaicost): it prices by model only (model, when
// set, for every call; empty, each call's request model), without the provider, the
// response model or the 1-hour cache-write split, which the tests' spans do not carry.
func PriceModelCalls(t testing.TB, td ptrace.Traces, model string) float64 {
	t.Helper()
	tab, err := pricing.New(pricing.Layer{Name: "default", Rows: pricing.DefaultRows()})
	require.NoError(t, err)
	var sum float64
	for sp := range spaniter.All(td) {
		u, ok := genai.UsageFromMap(sp.Attributes())
		if !ok || !genai.IsModelCallSpan(sp.Name(), sp.Attributes()) {
			continue
		}
		m := model
		if m == "" {
			m = genai.StringAttr(sp.Attributes(), genai.AttrRequestModel)
		}
		row, ok := tab.Lookup("", m, time.Now())
		require.True(t, ok, m)
		c := pricing.Compute(pricing.Split(u, 0), row)
		genai.PutCost(sp.Attributes(), c, genai.CostSourceTable)
		sum += c.Total
	}
	return sum
}

// ConsumeReadOnly hands td to exp read-only, as a fan-out does: any write to the batch
// panics, which fails the test at the write.
func ConsumeReadOnly(t *testing.T, exp exporter.Traces, td ptrace.Traces) {
	t.Helper()
	td.MarkReadOnly()
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
}

// SameBytes fails unless got encodes (OTLP protobuf) to exactly the bytes want does:
// the same spans, attributes and order.
func SameBytes(t *testing.T, want, got ptrace.Traces) {
	t.Helper()
	var m ptrace.ProtoMarshaler
	w, err := m.MarshalTraces(want)
	require.NoError(t, err)
	g, err := m.MarshalTraces(got)
	require.NoError(t, err)
	require.Equal(t, w, g, "the batches differ")
}

// SlowFirstPost is a server in front of the vendor fake at target that holds the first
// POST it gets for delay before passing it on (a slow vendor answering one push late),
// and passes everything else at once. It returns the server's URL.
func SlowFirstPost(t testing.TB, target string, delay time.Duration) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var posts atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && posts.Add(1) == 1 {
			time.Sleep(delay)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL
}
