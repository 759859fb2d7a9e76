package telemetry

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
)

// A run with nothing listening must not hang and must warn exactly once.
func TestNoCollectorDoesNotHangAndWarnsOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	var warn bytes.Buffer
	p, err := Setup(context.Background(), Options{Enabled: true, ExportTimeout: 300 * time.Millisecond, Warnings: &warn})
	require.NoError(t, err)
	defer otel.SetTracerProvider(otel.GetTracerProvider())
	tr := p.TracerProvider().Tracer("t")
	for range 3 {
		_, s := tr.Start(context.Background(), "x")
		s.End()
		_ = p.ForceFlush(context.Background())
	}
	start := time.Now()
	p.Shutdown(context.Background())
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, 1, strings.Count(warn.String(), "warning"), warn.String())
	assert.True(t, p.Warned())
}

// A blackholed collector (accepts, never answers) is bounded by the export timeout.
func TestHangingCollectorIsBounded(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	var warn bytes.Buffer
	p, err := Setup(context.Background(), Options{Enabled: true, ExportTimeout: 200 * time.Millisecond, Warnings: &warn})
	require.NoError(t, err)
	_, s := p.TracerProvider().Tracer("t").Start(context.Background(), "x")
	s.End()
	start := time.Now()
	p.Shutdown(context.Background())
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Contains(t, warn.String(), "span export failed")
}

func TestExportsToCollectorWithResource(t *testing.T) {
	var hits atomic.Int64
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b := new(bytes.Buffer)
		_, _ = b.ReadFrom(r.Body)
		body.Store(b.String())
		assert.Equal(t, "/v1/traces", r.URL.Path)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	var warn bytes.Buffer
	p, err := Setup(context.Background(), Options{Enabled: true, ServiceName: "svc-x", Warnings: &warn})
	require.NoError(t, err)
	_, s := p.TracerProvider().Tracer("t").Start(context.Background(), "hello")
	s.End()
	p.Shutdown(context.Background())
	assert.Equal(t, int64(1), hits.Load())
	b := body.Load().(string)
	assert.Contains(t, b, "svc-x")
	assert.Contains(t, b, "deployment.environment")
	assert.Empty(t, warn.String())
}

func TestDisabled(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	p, err := Setup(context.Background(), Options{Enabled: true})
	require.NoError(t, err)
	_, s := p.TracerProvider().Tracer("t").Start(context.Background(), "x")
	assert.False(t, s.SpanContext().IsValid(), "no-op provider")
	p.Shutdown(context.Background())
}

func TestContextHelpers(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, "lead_agent", CallerFrom(ctx))
	ctx = WithCaller(WithRun(ctx, Run{ThreadID: "t", RunID: "r"}), "subagent:a")
	assert.Equal(t, "subagent:a", CallerFrom(ctx))
	kv := CommonAttributes(ctx, CallerFrom(ctx))
	assert.Len(t, kv, 3, "no enduser.id when the user is unknown")
	assert.False(t, ContentCapture(ctx))
	assert.True(t, ContentCapture(WithContentCapture(ctx, true)))
}

// An exporter error quoted in a log line is cut without cutting a character in two.
func TestRedactKeepsUTF8(t *testing.T) {
	got := redact(errors.New(strings.Repeat("é", 200) + "\nsecond line"))
	assert.Equal(t, strings.Repeat("é", 150)+"...", got)
}
