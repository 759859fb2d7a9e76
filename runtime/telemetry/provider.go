package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentmeter/agentmeter/genai"
)

// Options configure Setup.
type Options struct {
	// Enabled false installs a no-op provider (OTEL_SDK_DISABLED=true and
	// OTEL_TRACES_EXPORTER=none do the same).
	Enabled bool
	// ServiceName is service.name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES set it.
	ServiceName    string
	ServiceVersion string
	// ExportTimeout bounds one export request (unless OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT
	// is set), the retries of one batch and the final flush in Shutdown. Default 5 s.
	ExportTimeout time.Duration
	// Warnings receives the single warning printed when export fails (default os.Stderr).
	Warnings io.Writer
	// Exporter replaces the OTLP/HTTP exporter (tests).
	Exporter sdktrace.SpanExporter
}

// Provider is the installed tracer provider.
type Provider struct {
	tp      trace.TracerProvider
	sdk     *sdktrace.TracerProvider
	timeout time.Duration
	warn    *onceWarner
}

// TracerProvider returns the provider (also installed globally by Setup).
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// Setup builds the tracer provider: OTLP/HTTP export configured by the standard OTEL_*
// variables (OTEL_EXPORTER_OTLP_ENDPOINT, ..._TRACES_ENDPOINT, ..._HEADERS, ..._TIMEOUT,
// OTEL_BSP_*, OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME), a batch span processor,
// bounded retries, the W3C trace-context propagator, and each span's LangSmith placement
// (placement.go). It installs the provider and the
// propagator globally and replaces the global OTel error handler with one that prints a
// single warning, so a run with no collector listening neither hangs nor floods stderr.
func Setup(ctx context.Context, o Options) (*Provider, error) {
	if o.ExportTimeout <= 0 {
		o.ExportTimeout = 5 * time.Second
	}
	if o.Warnings == nil {
		o.Warnings = os.Stderr
	}
	if o.ServiceName == "" {
		o.ServiceName = "agentmeter"
	}
	warn := &onceWarner{w: o.Warnings}
	if !o.Enabled || envTrue("OTEL_SDK_DISABLED") || strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		tp := noop.NewTracerProvider()
		otel.SetTracerProvider(tp)
		return &Provider{tp: tp, timeout: o.ExportTimeout, warn: warn}, nil
	}
	exp := o.Exporter
	if exp == nil {
		opts := []otlptracehttp.Option{otlptracehttp.WithRetry(otlptracehttp.RetryConfig{
			Enabled: true, InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: o.ExportTimeout,
		})}
		// The spec's default endpoint is http://localhost:4318; the Go exporter would use
		// https when no endpoint is configured, which a local collector does not speak.
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" &&
			os.Getenv("OTEL_EXPORTER_OTLP_INSECURE") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE") == "" {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if os.Getenv("OTEL_EXPORTER_OTLP_TIMEOUT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") == "" {
			opts = append(opts, otlptracehttp.WithTimeout(o.ExportTimeout))
		}
		var err error
		exp, err = otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: otlp/http exporter: %w", err)
		}
	}
	attrs := []attribute.KeyValue{attribute.String(genai.AttrServiceName, o.ServiceName)}
	if o.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", o.ServiceVersion))
	}
	// Later detectors win: our defaults first, then the OTEL_* environment.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(Placer()),
		sdktrace.WithBatcher(&warnExporter{SpanExporter: exp, warn: warn}, sdktrace.WithExportTimeout(o.ExportTimeout)),
	)
	otel.SetTracerProvider(sdk)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { warn.warn(err) }))
	return &Provider{tp: sdk, sdk: sdk, timeout: o.ExportTimeout, warn: warn}, nil
}

// Shutdown flushes pending spans and stops the provider, bounded by the export timeout
// (or ctx, whichever is earlier). A failed flush is reported once as a warning, not as
// an error: losing telemetry must never fail a run.
func (p *Provider) Shutdown(ctx context.Context) {
	if p.sdk == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout+time.Second)
	defer cancel()
	if err := p.sdk.Shutdown(ctx); err != nil {
		p.warn.warn(err)
	}
}

// ForceFlush exports pending spans now (bounded like Shutdown).
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout+time.Second)
	defer cancel()
	return p.sdk.ForceFlush(ctx)
}

// Warned reports whether the export warning was printed.
func (p *Provider) Warned() bool { return p.warn.done() }

type onceWarner struct {
	w    io.Writer
	once sync.Once
	mu   sync.Mutex
	hit  bool
}

func (o *onceWarner) warn(err error) {
	o.once.Do(func() {
		o.mu.Lock()
		o.hit = true
		o.mu.Unlock()
		fmt.Fprintf(o.w, "agentmeter: warning: span export failed, telemetry for this run may be lost (is an OTLP/HTTP collector listening? set OTEL_EXPORTER_OTLP_ENDPOINT): %v\n", redact(err))
	})
}

func (o *onceWarner) done() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hit
}

// redact keeps only the first line of an exporter error; header values (which may carry
// credentials) are never part of OTLP exporter errors, but response bodies can be long.
func redact(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "..." // no character cut in two
	}
	return s
}

// warnExporter hands the exporter spans in valid UTF-8 (utf8.go) and reports export
// errors through the one-shot warning.
type warnExporter struct {
	sdktrace.SpanExporter
	warn *onceWarner
}

func (w *warnExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := w.SpanExporter.ExportSpans(ctx, validUTF8(spans))
	if err != nil && !errors.Is(err, context.Canceled) {
		w.warn.warn(err)
	}
	return err
}

func envTrue(k string) bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(k))) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}
