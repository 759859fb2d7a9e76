package agentusage

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/agentmeter/agentmeter/genai"
)

// huge is a label-bound value far past genai.MaxLabelBytes (the report that led to the
// bound sent 10 MB; 1 MB shows the same).
var huge = strings.Repeat("m", 1<<20)

// overLimit is the shortest refused value.
var overLimit = strings.Repeat("m", genai.MaxLabelBytes+1)

// Every face refuses a label-bound field longer than genai.MaxLabelBytes, naming it,
// and nothing of the refused item reaches the pipeline; a value at the bound passes.
func TestNativeRefusesLongLabelValues(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	for field, v := range map[string]string{"model_name": huge, "provider": overLimit, "caller": "subagent:" + overLimit} {
		rec := map[string]any{"run_id": "r", "source_run_id": "s", "input_tokens": 1, field: v}
		b, _ := json.Marshal(rec)
		code, _, resp := do(t, http.MethodPost, url+"/v1/usage", "application/json", b, nil)
		require.Equal(t, http.StatusBadRequest, code, field)
		assert.Contains(t, resp, field+": is ", field)
		assert.Contains(t, resp, "a label-bound field holds at most 256", field)
	}
	assert.Zero(t, sink.SpanCount())
	atLimit := strings.Repeat("m", genai.MaxLabelBytes)
	b, _ := json.Marshal(map[string]any{"run_id": "r", "source_run_id": "s", "input_tokens": 1, "model_name": atLimit})
	code, _, resp := do(t, http.MethodPost, url+"/v1/usage", "application/json", b, nil)
	require.Equal(t, http.StatusOK, code, resp)
	assert.Len(t, spansNamed(sink, "chat "+atLimit), 1)
}

func TestLangSmithRefusesLongLabelValues(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	run := func(id string, mut func(m map[string]any)) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(lsRun(id, "", "llm", true)), &m))
		mut(m)
		return m
	}
	post := []any{
		run("01a22a31-cdeb-7000-8000-037a8c6bd3c0", func(m map[string]any) {
			m["extra"].(map[string]any)["metadata"].(map[string]any)["ls_model_name"] = huge
		}),
		run("01a22a31-cdeb-7000-8000-037a8c6bd3c1", func(m map[string]any) {
			m["outputs"].(map[string]any)["llm_output"] = map[string]any{"model_name": overLimit}
		}),
		run("01a22a31-cdeb-7000-8000-037a8c6bd3c2", func(m map[string]any) { m["name"] = overLimit }),
		run("01a22a31-cdeb-7000-8000-037a8c6bd3c3", func(m map[string]any) { m["tags"] = []string{"subagent:" + overLimit} }),
		run("01a22a31-cdeb-7000-8000-037a8c6bd3c4", func(m map[string]any) {}),
	}
	b, _ := json.Marshal(map[string]any{"post": post})
	code, _, resp := do(t, http.MethodPost, url+"/runs/batch", "application/json", b, nil)
	require.Equal(t, http.StatusMultiStatus, code, resp)
	for _, want := range []string{
		"post[0].extra: metadata.ls_model_name: is 1048576 bytes long",
		"post[1].outputs: model_name: is 257 bytes long",
		"post[2].name: is 257 bytes long",
		"post[3].tags: [0]: is 266 bytes long",
	} {
		assert.Contains(t, resp, want)
	}
	assert.Equal(t, 1, sink.SpanCount(), "only the good run")
}

func TestLangfuseIngestionRefusesLongLabelValues(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	gen := func(id string, body map[string]any) map[string]any {
		b := map[string]any{"id": id, "traceId": "t1", "startTime": "2026-01-02T03:04:05Z", "endTime": "2026-01-02T03:04:06Z",
			"model": "gpt-4o", "usageDetails": map[string]any{"input": 1}}
		for k, v := range body {
			b[k] = v
		}
		return map[string]any{"id": "e-" + id, "type": "generation-create", "body": b}
	}
	batch := []any{
		gen("g0", map[string]any{"model": huge}),
		gen("g1", map[string]any{"metadata": map[string]any{"provider": overLimit}}),
		gen("g2", map[string]any{"metadata": map[string]any{"caller": overLimit}}),
		map[string]any{"id": "e-t3", "type": "tool-create", "body": map[string]any{"id": "t3", "traceId": "t1", "name": overLimit,
			"startTime": "2026-01-02T03:04:05Z"}},
	}
	b, _ := json.Marshal(map[string]any{"batch": batch})
	code, _, resp := do(t, http.MethodPost, url+"/api/public/ingestion", "application/json", b, nil)
	require.Equal(t, http.StatusMultiStatus, code, resp)
	var got struct {
		Successes []struct{ ID string }
		Errors    []struct{ ID, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(resp), &got))
	assert.Empty(t, got.Successes)
	require.Len(t, got.Errors, 4)
	for i, want := range []string{"batch[0].body.model: is 1048576 bytes long", "batch[1].body.metadata.provider: is 257",
		"batch[2].body.metadata.caller: is 257", "batch[3].body.name: is 257"} {
		assert.Contains(t, got.Errors[i].Message, want)
	}
	assert.Zero(t, sink.SpanCount())
}

func TestLangfuseOTLPRefusesLongLabelValues(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	for _, tc := range []struct{ key, value, want string }{
		{"langfuse.observation.model.name", huge, "resourceSpans[0].scopeSpans[0].spans[0]: " + genai.AttrRequestModel + ": is 1048576 bytes long"},
		{genai.AttrProviderName, overLimit, "spans[0]: " + genai.AttrProviderName + ": is 257"},
		{"langfuse.observation.metadata.caller", overLimit, "spans[0]: " + genai.AttrCaller + ": is 257"},
	} {
		td := otlpTraces()
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr(tc.key, tc.value)
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		require.NoError(t, err)
		code, _, resp := do(t, http.MethodPost, url+"/api/public/otel/v1/traces", "application/x-protobuf", b, nil)
		require.Equal(t, http.StatusBadRequest, code, tc.key)
		assert.Contains(t, resp, tc.want, tc.key)
	}
	td := otlpTraces()
	td.ResourceSpans().At(0).Resource().Attributes().PutStr(genai.AttrServiceName, overLimit)
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	code, _, resp := do(t, http.MethodPost, url+"/api/public/otel/v1/traces", "application/x-protobuf", b, nil)
	require.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "resourceSpans[0].resource.service.name: is 257")
	assert.Zero(t, sink.SpanCount())
}
