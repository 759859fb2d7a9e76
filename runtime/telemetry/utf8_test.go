package telemetry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// "你好" cut after four bytes: the second character in part, as a byte-count cut leaves it.
var cutChinese = "你好"[:4]

// A span with a string that is not UTF-8 goes out with U+FFFD for its invalid bytes, and
// the spans batched with it go too: the OTLP exporter would refuse the whole batch
// ("string field contains invalid UTF-8"), model calls' usage included.
func TestSpansLeaveAsValidUTF8(t *testing.T) {
	var mu sync.Mutex
	var got []ptrace.Traces
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, req.Traces())
		mu.Unlock()
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	var warnings bytes.Buffer
	p, err := Setup(context.Background(), Options{Enabled: true, Warnings: &warnings})
	require.NoError(t, err)
	tr := p.TracerProvider().Tracer("test")

	_, chat := tr.Start(context.Background(), "chat model")
	chat.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", 1200))
	chat.End()
	_, tool := tr.Start(context.Background(), "execute_tool web_fetch\xff")
	tool.SetAttributes(
		attribute.String("gen_ai.tool.call.result", "页面"+cutChinese),
		attribute.StringSlice("tags", []string{"ok", "bad\xfe"}),
		attribute.Slice("nested", attribute.MapValue(attribute.String("k\xff", "v"+cutChinese))),
		attribute.Int("n", 7),
	)
	tool.AddEvent("fetched\xff", trace.WithAttributes(attribute.String("url", "https://example.com/\xc3")))
	tool.SetStatus(codes.Error, "超时"+cutChinese)
	tool.End()
	p.Shutdown(context.Background())

	assert.Empty(t, warnings.String())
	spans := map[string]ptrace.Span{}
	mu.Lock()
	for _, td := range got {
		rss := td.ResourceSpans()
		for i := range rss.Len() {
			sss := rss.At(i).ScopeSpans()
			for j := range sss.Len() {
				for k := range sss.At(j).Spans().Len() {
					sp := sss.At(j).Spans().At(k)
					spans[sp.Name()] = sp
				}
			}
		}
	}
	mu.Unlock()
	require.Len(t, spans, 2, "both spans of the batch arrive")
	in, _ := spans["chat model"].Attributes().Get("gen_ai.usage.input_tokens")
	assert.Equal(t, int64(1200), in.Int())
	sp, ok := spans["execute_tool web_fetch\ufffd"]
	require.True(t, ok, "the name with U+FFFD for its invalid byte")
	want := map[string]any{
		"gen_ai.tool.call.result": "页面你\ufffd",
		"tags":                    []any{"ok", "bad\ufffd"},
		"nested":                  []any{map[string]any{"k\ufffd": "v你\ufffd"}},
		"n":                       int64(7),
	}
	attrs := sp.Attributes().AsRaw()
	delete(attrs, "langsmith.span.dotted_order") // the placement every span gets (placement.go)
	assert.Equal(t, want, attrs)
	assert.Equal(t, "超时你\ufffd", sp.Status().Message())
	require.Equal(t, 1, sp.Events().Len())
	assert.Equal(t, "fetched\ufffd", sp.Events().At(0).Name())
	assert.Equal(t, map[string]any{"url": "https://example.com/\ufffd"}, sp.Events().At(0).Attributes().AsRaw())
	for _, s := range []string{sp.Name(), sp.Status().Message()} {
		assert.True(t, utf8.ValidString(s))
	}
}

// Spans that are valid UTF-8 go to the exporter as they are, in the slice they came in.
func TestValidSpansAreNotCopied(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, a := tp.Tracer("t").Start(context.Background(), "a")
	a.SetAttributes(attribute.String("k", "你好"), attribute.StringSlice("s", []string{"x"}))
	a.End()
	_, b := tp.Tracer("t").Start(context.Background(), "b")
	b.SetAttributes(attribute.String("k", cutChinese))
	b.End()
	spans := rec.Ended()

	valid := spans[:1]
	assert.Same(t, &valid[0], &validUTF8(valid)[0])

	out := validUTF8(spans)
	require.Len(t, out, 2)
	assert.Same(t, spans[0], out[0], "the valid span is passed on itself")
	assert.Equal(t, []attribute.KeyValue{attribute.String("k", "你\ufffd")}, out[1].Attributes())
	assert.Equal(t, cutChinese, spans[1].Attributes()[0].Value.AsString(), "the span itself is not changed")
}
