package faulty

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

func TestDecodeLangSmithBatch(t *testing.T) {
	body := []byte(`{"post":[{"id":"a","outputs":{"usage_metadata":{"input_tokens":3,"output_tokens":4}}},{"id":"b"}],"patch":[{"id":"c","outputs":{}}]}`)
	var zbuf bytes.Buffer
	zw, err := zstd.NewWriter(&zbuf)
	require.NoError(t, err)
	_, _ = zw.Write(body)
	require.NoError(t, zw.Close())
	h := http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"zstd"}}
	items, err := decode(LangSmith, h, zbuf.Bytes())
	require.NoError(t, err)
	assert.Equal(t, []Item{{ID: "a", Tokens: 7}, {ID: "b"}, {ID: "c"}}, items)

	_, err = decode(LangSmith, http.Header{"Content-Type": {"application/json"}}, []byte(`{"post":[{}]}`))
	assert.ErrorContains(t, err, "without id")
	_, err = decode(LangSmith, http.Header{"Content-Type": {"text/plain"}}, []byte(`x`))
	assert.ErrorContains(t, err, "unexpected content type")
	_, err = decode(LangSmith, http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"br"}}, []byte(`x`))
	assert.ErrorContains(t, err, "unsupported Content-Encoding")
}

func TestDecodeLangSmithMultipartRejectsStrangeParts(t *testing.T) {
	body := "--b\r\nContent-Disposition: form-data; name=\"delete.x\"\r\n\r\n{}\r\n--b--\r\n"
	_, err := decode(LangSmith, http.Header{"Content-Type": {"multipart/form-data; boundary=b"}}, []byte(body))
	assert.ErrorContains(t, err, `multipart part "delete.x"`)
}

func TestDecodeOTLPGzipAndJSON(t *testing.T) {
	td := ptrace.NewTraces()
	AppendRun(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), 7, time.Now(), "")
	want := SpanItems(td)
	require.Len(t, want, 3)

	pb, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(pb)
	require.NoError(t, zw.Close())
	got, err := decode(Langfuse, http.Header{"Content-Type": {"application/x-protobuf"}, "Content-Encoding": {"gzip"}}, gz.Bytes())
	require.NoError(t, err)
	assert.Equal(t, want, got)

	js, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	require.NoError(t, err)
	got, err = decode(Langfuse, http.Header{"Content-Type": {"application/json"}}, js)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	_, err = decode(Langfuse, http.Header{"Content-Type": {"application/x-protobuf"}}, []byte{0x0a, 0xff})
	assert.ErrorContains(t, err, "otlp body")
	_, err = decode(Langfuse, http.Header{"Content-Encoding": {"gzip"}}, []byte("not gzip"))
	assert.ErrorContains(t, err, "gzip body")
}

func TestLangSmithRunID(t *testing.T) {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	AppendRun(spans, 1, time.Now(), "")
	root, child := spans.At(0), spans.At(1)
	tid := root.TraceID()
	assert.Equal(t, uuid(tid), LangSmithRunID(root), "a root run's id is the trace id")
	sid := child.SpanID()
	want := "00000000-0000-0000-" + sid.String()[:4] + "-" + sid.String()[4:]
	assert.Equal(t, want, LangSmithRunID(child), "a child's id is the span id in the low 8 bytes")
}
