//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor/faulty"
)

const badInputKey = "au-key-SECRET-b4d1"

// badInputRig is one collector with the OTLP receiver and the agentusage receiver
// (with an API key), both limited to 4 MiB bodies, into the file exporter.
type badInputRig struct {
	otlp, au, out, metrics string
	c                      *Collector
}

func startBadInputRig(t *testing.T) *badInputRig {
	t.Helper()
	dir := t.TempDir()
	r := &badInputRig{
		otlp: fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		au:   fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		out:  filepath.Join(dir, "traces.jsonl"),
	}
	tel := FreePort(t)
	r.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", tel)
	r.c = StartIn(t, dir, fmt.Sprintf(`
receivers:
  otlp:
    protocols:
      http: {endpoint: %q, max_request_body_size: 4194304}
  agentusage:
    endpoint: %q
    max_request_body_size: 4194304
    api_keys: [%s]
exporters:
  file: {path: %q, format: json, flush_interval: 100ms}
service:
  telemetry:
    logs: {level: debug}
    metrics:
      level: detailed
      readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]
  pipelines:
    traces: {receivers: [otlp, agentusage], exporters: [file]}
`, r.otlp, r.au, badInputKey, r.out, tel), r.au)
	return r
}

func post(t *testing.T, url, ctype string, body []byte, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", ctype)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "the receiver answers (no crash, no reset)")
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// validRecord is a native usage record whose source_run_id marks it.
func validRecord(marker string) string {
	return fmt.Sprintf(`{"run_id":"run-%s","source_run_id":%q,"model_name":"gpt-4o","input_tokens":10,"output_tokens":2}`, marker, marker)
}

// A corpus of malformed requests to both receivers: each gets a clean 4xx (never a 5xx,
// a reset or a crash), and a valid request sent right after each one is kept. Inside a
// batch, the valid records next to a bad one are kept too (207).
func TestReliabilityMalformedInput(t *testing.T) {
	r := startBadInputRig(t)
	usage := "http://" + r.au + "/v1/usage"
	otlpURL := "http://" + r.otlp + "/v1/traces"
	big := strings.Repeat("a", 10<<20)
	auth := []string{"x-api-key", badInputKey}
	bad := "\xff\xfe\xfd"

	type tc struct {
		name   string
		url    string
		ctype  string
		body   string
		status int // exact expected status
	}
	cases := []tc{
		{"native: bad JSON", usage, "application/json", `{"run_id":`, 400},
		{"native: not an object", usage, "application/json", `"just a string"`, 400},
		{"native: wrong types", usage, "application/json", `{"run_id":5,"source_run_id":["x"],"input_tokens":"ten"}`, 400},
		{"native: negative tokens", usage, "application/json", `{"run_id":"r","source_run_id":"neg","input_tokens":-5,"output_tokens":1}`, 400},
		{"native: huge tokens", usage, "application/json", `{"run_id":"r","source_run_id":"huge","input_tokens":1e40,"output_tokens":1}`, 400},
		{"native: tokens past int64", usage, "application/json", `{"run_id":"r","source_run_id":"big","input_tokens":9223372036854775808,"output_tokens":1}`, 400},
		{"native: total mismatch", usage, "application/json", `{"run_id":"r","source_run_id":"tot","input_tokens":4,"output_tokens":1,"total_tokens":9}`, 400},
		{"native: cache above input", usage, "application/json", `{"run_id":"r","source_run_id":"c","input_tokens":4,"output_tokens":1,"cache_read_tokens":9}`, 400},
		{"native: trace id of wrong length", usage, "application/json", `{"trace_id":"abc123","run_id":"r","source_run_id":"tid"}`, 400},
		{"native: trace id 33 hex", usage, "application/json", `{"trace_id":"0123456789abcdef0123456789abcdef0","run_id":"r","source_run_id":"tid33"}`, 400},
		{"native: missing ids", usage, "application/json", `{"input_tokens":1}`, 400},
		{"native: 10 MB attribute", usage, "application/json", `{"run_id":"r","source_run_id":"big","model_name":"` + big + `"}`, 413},
		// encoding/json replaces invalid UTF-8 with U+FFFD: accepted, checked below
		{"native: invalid UTF-8 id", usage, "application/json", `{"run_id":"utf` + bad + `","source_run_id":"utf` + bad + `"}`, 200},
		{"native: bad timestamp", usage, "application/json", `{"run_id":"r","source_run_id":"ts","end_time":"yesterday"}`, 400},
		{"native: gzip that is not", usage, "application/json", `not gzip`, 400},
		{"langsmith: run id not a UUID", "http://" + r.au + "/runs", "application/json", `{"id":"not-a-uuid","name":"x","run_type":"llm","start_time":"2026-11-30T00:00:00Z"}`, 400},
		{"langsmith: bad multipart", "http://" + r.au + "/runs/multipart", "multipart/form-data; boundary=xyz", "--xyz\r\nbroken", 400},
		{"langfuse: ingestion not JSON", "http://" + r.au + "/api/public/ingestion", "application/json", `[{]`, 400},
		{"langfuse: OTLP garbage", "http://" + r.au + "/api/public/otel/v1/traces", "application/x-protobuf", "\x0a\xff\xff\xff\xff\x0f", 400},
		{"otlp: garbage protobuf", otlpURL, "application/x-protobuf", "\x0a\xff\xff\xff\xff\x0f", 400},
		{"otlp: bad JSON", otlpURL, "application/json", `{"resourceSpans":[{`, 400},
		{"otlp: trace id of wrong length", otlpURL, "application/json", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"abcd","spanId":"0102030405060708","name":"x"}]}]}]}`, 400},
		{"otlp: span id of wrong length", otlpURL, "application/json", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"01","name":"x"}]}]}]}`, 400},
		{"otlp: wrong types", otlpURL, "application/json", `{"resourceSpans":"many"}`, 400},
		{"otlp: 10 MB attribute", otlpURL, "application/json", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"x","attributes":[{"key":"k","value":{"stringValue":"` + big + `"}}]}]}]}]}`, 400}, // upstream otlpreceiver: 400 "request body too large"
		{"otlp: unsupported content type", otlpURL, "text/plain", `hello`, 415},
	}
	kept := 0
	for i, c := range cases {
		hdr := auth
		if c.name == "native: gzip that is not" {
			hdr = append(append([]string(nil), auth...), "Content-Encoding", "gzip")
		}
		status, body := post(t, c.url, c.ctype, []byte(c.body), hdr...)
		assert.Equal(t, c.status, status, "%s: %s", c.name, body)
		assert.Less(t, status, 500, "%s: a client error, never a server error", c.name)
		assert.NotContains(t, body, "goroutine", "%s: no stack in the answer", c.name)
		// a valid neighbour right after: kept
		st, b := post(t, usage, "application/json", []byte(validRecord(fmt.Sprintf("ok-%d", i))), auth...)
		require.Equal(t, 200, st, "neighbour after %s: %s", c.name, b)
		kept++
		exited, err := r.c.Exited()
		require.False(t, exited, "the collector exited after %s: %v", c.name, err)
	}

	// in one batch, the bad records are refused by index and the good ones kept
	st, b := post(t, usage, "application/json", []byte(`[`+validRecord("batch-a")+`,{"run_id":"r","source_run_id":"bad","input_tokens":-1},`+validRecord("batch-b")+`]`), auth...)
	assert.Equal(t, 207, st, b)
	assert.Contains(t, b, "input_tokens", "the error names the field")
	kept += 2
	// an OTLP neighbour with invalid UTF-8 in an attribute value is still a span: pdata
	// keeps the bytes, the receiver accepts it, the file exporter writes it (JSON escapes)
	td, tid, _ := otlpWithAttr(t, "agentmeter.note", "x"+bad)
	require.NoError(t, SendOTLPHTTP(t.Context(), r.otlp, td))

	spans := WaitForSpans(t, r.out, kept+1, 30*time.Second)
	markers := map[string]bool{}
	for _, sp := range spans {
		markers[Str(sp, genai.AttrRunID)] = true
	}
	for i := range cases {
		assert.True(t, markers[fmt.Sprintf("run-ok-%d", i)], "neighbour %d kept", i)
	}
	assert.True(t, markers["run-batch-a"] && markers["run-batch-b"], "valid records of a mixed batch kept")
	found := false
	for _, sp := range spans {
		if sp.TraceID() == tid {
			found = true
		}
	}
	assert.True(t, found, "the span with invalid UTF-8 passed")
	assert.True(t, markers["utf\uFFFD\uFFFD\uFFFD"], "the native record's invalid UTF-8 became U+FFFD, never raw bytes: %v", markers)
	for _, sp := range spans {
		for _, bad := range []string{"neg", "huge", "big", "tot", "tid", "tid33", "ts"} {
			assert.NotEqual(t, bad, Str(sp, "agentmeter.source_run_id"), "a refused record became a span")
		}
	}
	m, err := faulty.Scrape(r.metrics)
	require.NoError(t, err)
	assert.NotContains(t, r.c.Logs(), badInputKey)
	assert.NotContains(t, m.Raw, badInputKey)
	assert.NotContains(t, r.c.Logs(), "panic")
	ReliabilityRow(t, fmt.Sprintf("malformed input: %d bad requests (bad JSON, wrong types, negative/huge/overflowing tokens, 10 MB attributes, invalid UTF-8, ids of wrong length, broken multipart/protobuf/gzip)", len(cases)),
		"clean 400/413/415 naming the field, no 5xx, no crash; the valid request after each one and the valid records of a mixed batch (207) are kept. Invalid UTF-8 is not refused: in native JSON it is replaced by U+FFFD (encoding/json), inside an OTLP attribute value it is passed on as is",
		fmt.Sprintf("%d valid neighbours", kept), "0", "0", "n/a", "")
}

// otlpWithAttr is one span carrying key=value.
func otlpWithAttr(t *testing.T, key, value string) (td ptrace.Traces, tid pcommon.TraceID, sid pcommon.SpanID) {
	t.Helper()
	td = ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	tid = pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	sid = pcommon.SpanID{9, 9, 9, 9, 9, 9, 9, 9}
	sp.SetTraceID(tid)
	sp.SetSpanID(sid)
	sp.SetName("utf8")
	sp.Attributes().PutStr(key, value)
	return td, tid, sid
}
