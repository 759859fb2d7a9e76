package agentusage

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// startReceiver runs the receiver on a free loopback port and returns its base URL.
func startReceiver(t *testing.T, next consumer.Traces, mut func(*Config)) (string, *usageReceiver) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.ServerConfig.NetAddr.Endpoint = freeAddr(t)
	if mut != nil {
		mut(cfg)
	}
	require.NoError(t, cfg.Validate())
	rcv, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(Type), cfg, next)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, rcv.Shutdown(context.Background())) })
	return "http://" + cfg.ServerConfig.NetAddr.Endpoint, rcv.(*usageReceiver)
}

func do(t *testing.T, method, url, contentType string, body []byte, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func allSpans(sink *consumertest.TracesSink) map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	for s := range spaniter.In(sink.AllTraces()) {
		out[s.Name()+"|"+s.SpanID().String()] = s
	}
	return out
}

func spansNamed(sink *consumertest.TracesSink, name string) []ptrace.Span {
	var out []ptrace.Span
	for k, s := range allSpans(sink) {
		if strings.HasPrefix(k, name+"|") {
			out = append(out, s)
		}
	}
	return out
}

const nativeRecord = `{"thread_id":"th1","run_id":"run1","source_run_id":"src-1","caller":"lead_agent",
 "model_name":"gpt-4o","provider":"openai","input_tokens":100,"output_tokens":20,"total_tokens":120,
 "cache_read_tokens":30,"reasoning_tokens":5,"response_tool_call_ids":["call_1"],
 "start_time":"2026-01-02T03:04:05Z","end_time":"2026-01-02T03:04:06.5Z","unknown_field":{"x":1}}`

func TestNativeRecordBecomesChatSpan(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	code, _, body := do(t, http.MethodPost, url+"/v1/usage", "application/json", []byte(nativeRecord), nil)
	require.Equal(t, http.StatusOK, code, body)
	chats := spansNamed(sink, "chat gpt-4o")
	require.Len(t, chats, 1)
	u, ok := genai.UsageFromMap(chats[0].Attributes())
	require.True(t, ok)
	assert.Equal(t, genai.Usage{Input: 100, Output: 20, CacheRead: 30, Reasoning: 5}, u)
	assert.Equal(t, []string{"call_1"}, genai.StringsFromMap(chats[0].Attributes(), genai.AttrResponseToolCallIDs))

	// a resend is the same span: same trace and span id
	first := chats[0]
	sink.Reset()
	code, _, _ = do(t, http.MethodPost, url+"/v1/usage", "application/json", []byte(nativeRecord), nil)
	require.Equal(t, http.StatusOK, code)
	again := spansNamed(sink, "chat gpt-4o")
	require.Len(t, again, 1)
	assert.Equal(t, first.TraceID(), again[0].TraceID())
	assert.Equal(t, first.SpanID(), again[0].SpanID())
}

func TestNativeBadNeighbourKeepsGoodRecords(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	body := `{"records":[` + nativeRecord + `,{"run_id":"r","input_tokens":-3},{"run_id":"r","source_run_id":"s","input_tokens":"many"}]}`
	code, _, resp := do(t, http.MethodPost, url+"/v1/usage", "application/json", []byte(body), nil)
	require.Equal(t, http.StatusMultiStatus, code, resp)
	assert.Contains(t, resp, "source_run_id: is required")
	assert.Contains(t, resp, "input_tokens: must be a non-negative integer")
	assert.Contains(t, resp, `"index":2`)
	assert.Len(t, spansNamed(sink, "chat gpt-4o"), 1)

	code, _, resp = do(t, http.MethodPost, url+"/v1/usage", "application/json", []byte(`[{"run_id":"r"}]`), nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "source_run_id")

	code, _, resp = do(t, http.MethodPost, url+"/v1/usage", "application/json", []byte(`not json`), nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "request body")
}

func TestBodyLimitIs413(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, func(c *Config) { c.ServerConfig.MaxRequestBodySize = 1024 })
	big := `{"records":[` + strings.Repeat(nativeRecord+",", 20) + nativeRecord + `]}`
	for _, path := range []string{"/v1/usage", "/runs/batch", "/api/public/ingestion", "/api/public/otel/v1/traces"} {
		code, _, resp := do(t, http.MethodPost, url+path, "application/json", []byte(big), nil)
		assert.Equal(t, http.StatusRequestEntityTooLarge, code, path+": "+resp)
	}
	// also when the size is only known after gzip decompression
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(big))
	require.NoError(t, zw.Close())
	code, _, resp := do(t, http.MethodPost, url+"/v1/usage", "application/json", gz.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	assert.Equal(t, http.StatusRequestEntityTooLarge, code, resp)
	assert.Equal(t, 0, sink.SpanCount())
}

func TestAuth(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, func(c *Config) {
		c.APIKeys = []configopaque.String{"ls-key", "sk-lf-secret"}
	})
	post := func(hdr map[string]string) int {
		code, _, _ := do(t, http.MethodPost, url+"/v1/usage", "application/json", []byte(nativeRecord), hdr)
		return code
	}
	assert.Equal(t, http.StatusUnauthorized, post(nil))
	assert.Equal(t, http.StatusUnauthorized, post(map[string]string{"x-api-key": "wrong"}))
	assert.Equal(t, http.StatusOK, post(map[string]string{"x-api-key": "ls-key"}))
	assert.Equal(t, http.StatusOK, post(map[string]string{"Authorization": "Bearer ls-key"}))
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/usage", strings.NewReader(nativeRecord))
	req.SetBasicAuth("pk-lf-public", "sk-lf-secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	req, _ = http.NewRequest(http.MethodPost, url+"/v1/usage", strings.NewReader(nativeRecord))
	req.SetBasicAuth("pk-lf-public", "nope")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.NotContains(t, string(body), "sk-lf-secret")
	// probes stay open, as at the vendors
	code, _, _ := do(t, http.MethodGet, url+"/info", "", nil, nil)
	assert.Equal(t, http.StatusOK, code)
	code, _, _ = do(t, http.MethodGet, url+"/api/public/health", "", nil, nil)
	assert.Equal(t, http.StatusOK, code)
}

func TestBackpressure(t *testing.T) {
	refused := consumertest.NewErr(errors.New("memory limiter: data refused"))
	url, _ := startReceiver(t, refused, func(c *Config) { c.RetryAfter = 2 * time.Second })
	for _, tc := range []struct {
		path, ct, body string
		want           int
	}{
		{"/v1/usage", "application/json", nativeRecord, http.StatusServiceUnavailable},
		{"/runs/batch", "application/json", `{"post":[` + lsRun("01a22a31-cdc6-7000-8000-016bd484a2ba", "", "llm", true) + `]}`, http.StatusServiceUnavailable},
		{"/api/public/ingestion", "application/json", lfBatch, http.StatusTooManyRequests},
		{"/api/public/otel/v1/traces", "application/json", otlpJSON(t), http.StatusServiceUnavailable},
	} {
		code, hdr, resp := do(t, http.MethodPost, url+tc.path, tc.ct, []byte(tc.body), nil)
		assert.Equal(t, tc.want, code, tc.path+": "+resp)
		assert.Equal(t, "2", hdr.Get("Retry-After"), tc.path)
	}

	permanent := consumertest.NewErr(consumererror.NewPermanent(errors.New("never")))
	url2, _ := startReceiver(t, permanent, nil)
	code, hdr, _ := do(t, http.MethodPost, url2+"/v1/usage", "application/json", []byte(nativeRecord), nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Empty(t, hdr.Get("Retry-After"))
}

// A refused PATCH must leave the parked POST in place, so the SDK's retry still
// produces one complete span.
func TestRefusedPatchKeepsParkedRun(t *testing.T) {
	sink := new(consumertest.TracesSink)
	gate := &switchable{next: sink}
	url, rcv := startReceiver(t, gate, nil)
	id := "01a22a31-cdeb-7000-8000-037a8c6bd3a0"
	code, _, resp := do(t, http.MethodPost, url+"/runs", "application/json", []byte(lsRun(id, "", "llm", false)), nil)
	require.Equal(t, http.StatusAccepted, code, resp)
	assert.Equal(t, 0, sink.SpanCount(), "an unfinished run is parked, not emitted")
	assert.Equal(t, 1, rcv.runs.Pending())

	patch := `{"end_time":"2026-01-02T03:04:09Z","outputs":{"usage_metadata":{"input_tokens":7,"output_tokens":3}}}`
	gate.refuse = true
	code, hdr, _ := do(t, http.MethodPatch, url+"/runs/"+id, "application/json", []byte(patch), nil)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.NotEmpty(t, hdr.Get("Retry-After"))
	assert.Equal(t, 1, rcv.runs.Pending())

	gate.refuse = false
	code, _, _ = do(t, http.MethodPatch, url+"/runs/"+id, "application/json", []byte(patch), nil)
	require.Equal(t, http.StatusAccepted, code)
	chats := spansNamed(sink, "chat gpt-4o")
	require.Len(t, chats, 1)
	u, _ := genai.UsageFromMap(chats[0].Attributes())
	assert.Equal(t, genai.Usage{Input: 7, Output: 3}, u)
	assert.Equal(t, 0, rcv.runs.Pending())
}

type switchable struct {
	next   consumer.Traces
	refuse bool
}

func (s *switchable) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (s *switchable) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if s.refuse {
		return errors.New("refused")
	}
	return s.next.ConsumeTraces(ctx, td)
}

func lsRun(id, parent, runType string, ended bool) string {
	m := map[string]any{
		"id": id, "trace_id": "01a22a31-cdc6-7000-8000-016bd484a2ba", "name": "ChatOpenAI", "run_type": runType,
		"start_time": "2026-01-02T03:04:05.000001Z",
		"extra":      map[string]any{"metadata": map[string]any{"ls_model_name": "gpt-4o", "ls_provider": "openai", "thread_id": "th1"}},
	}
	if parent != "" {
		m["parent_run_id"] = parent
	}
	if ended {
		m["end_time"] = 1767323046000
		m["outputs"] = map[string]any{"usage_metadata": map[string]any{"input_tokens": 10, "output_tokens": 2}}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestParkedRunIsEmittedAfterTimeout(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, func(c *Config) { c.PendingTimeout = 200 * time.Millisecond })
	code, _, _ := do(t, http.MethodPost, url+"/runs", "application/json", []byte(lsRun("01a22a31-cdeb-7000-8000-037a8c6bd3a0", "", "llm", false)), nil)
	require.Equal(t, http.StatusAccepted, code)
	require.Eventually(t, func() bool { return sink.SpanCount() == 1 }, 5*time.Second, 20*time.Millisecond)
}

func TestShutdownFlushesParkedRuns(t *testing.T) {
	sink := new(consumertest.TracesSink)
	cfg := createDefaultConfig().(*Config)
	cfg.ServerConfig.NetAddr.Endpoint = freeAddr(t)
	rcv, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	code, _, _ := do(t, http.MethodPost, "http://"+cfg.ServerConfig.NetAddr.Endpoint+"/runs", "application/json", []byte(lsRun("01a22a31-cdeb-7000-8000-037a8c6bd3a0", "", "llm", false)), nil)
	require.Equal(t, http.StatusAccepted, code)
	require.NoError(t, rcv.Shutdown(context.Background()))
	assert.Equal(t, 1, sink.SpanCount())
}

func TestLangSmithBatchWithBadItem(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	body := `{"post":[` + lsRun("01a22a31-cdeb-7000-8000-037a8c6bd3a0", "", "llm", true) + `,{"id":"not-a-uuid"},{"id":"01a22a31-cdeb-7000-8000-037a8c6bd3a1","tags":"x"}]}`
	code, _, resp := do(t, http.MethodPost, url+"/runs/batch", "application/json", []byte(body), nil)
	require.Equal(t, http.StatusMultiStatus, code, resp)
	assert.Contains(t, resp, "post[1]")
	assert.Contains(t, resp, "id: must be a UUID")
	assert.Contains(t, resp, "tags: must be an array of strings")
	assert.Equal(t, 1, sink.SpanCount())

	code, _, resp = do(t, http.MethodPost, url+"/runs/batch", "application/json", []byte(`{"post":{}}`), nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "post must be an array")
}

func TestLangSmithMultipart(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	part := func(name, body string) {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q`, name))
		h.Set("Content-Type", "application/json")
		w, err := mw.CreatePart(h)
		require.NoError(t, err)
		_, _ = w.Write([]byte(body))
	}
	id := "01a22a31-cdeb-7000-8000-037a8c6bd3a0"
	part("post."+id, `{"id":"`+id+`","trace_id":"01a22a31-cdc6-7000-8000-016bd484a2ba","name":"ChatOpenAI","run_type":"llm","start_time":"2026-01-02T03:04:05Z","end_time":"2026-01-02T03:04:06Z"}`)
	part("post."+id+".outputs", `{"generations":[[{"message":{"kwargs":{"tool_calls":[{"id":"call_a"},{"id":"call_b"}]}}}]],"usage_metadata":{"input_tokens":50,"output_tokens":5}}`)
	part("post."+id+".extra", `{"metadata":{"ls_model_name":"gpt-4o"}}`)
	part("attachment."+id+".img", `ignored`)
	bad := "01a22a31-cdeb-7000-8000-037a8c6bd3a1"
	part("post."+bad, `{"id":`)
	require.NoError(t, mw.Close())
	code, _, resp := do(t, http.MethodPost, url+"/runs/multipart", mw.FormDataContentType(), buf.Bytes(), nil)
	require.Equal(t, http.StatusMultiStatus, code, resp)
	assert.Contains(t, resp, "post."+bad)
	chats := spansNamed(sink, "chat gpt-4o")
	require.Len(t, chats, 1)
	assert.Equal(t, []string{"call_a", "call_b"}, genai.StringsFromMap(chats[0].Attributes(), genai.AttrResponseToolCallIDs))

	code, _, _ = do(t, http.MethodPost, url+"/runs/multipart", "application/json", []byte(`{}`), nil)
	assert.Equal(t, http.StatusBadRequest, code)
}

const lfBatch = `{"batch":[
 {"id":"e1","type":"trace-create","timestamp":"2026-01-02T03:04:05.000Z","body":{"id":"trace-1","name":"lead_agent","sessionId":"th1","userId":"u1"}},
 {"id":"e2","type":"generation-create","timestamp":"2026-01-02T03:04:05.100Z","body":{"id":"gen-1","traceId":"trace-1","name":"chat","model":"gpt-4o","startTime":"2026-01-02T03:04:05.100Z","usageDetails":{"input":70,"input_cached_tokens":30,"output":15,"output_reasoning_tokens":5}}},
 {"id":"e3","type":"generation-update","timestamp":"2026-01-02T03:04:05.900Z","body":{"id":"gen-1","traceId":"trace-1","endTime":"2026-01-02T03:04:05.900Z","output":{"tool_calls":[{"id":"call_1"}]}}}
]}`

func TestLangfuseIngestion207(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	body := lfBatch[:strings.LastIndex(lfBatch, "]}")] + (`,{"id":"e4","type":"span-create","body":{"id":"s","startTime":"yesterday"}},{"type":"span-create"},{"id":"e6","type":"bogus-create","body":{}},{"id":"e7","type":"score-create","body":{"name":"x","value":1}}]}`)
	code, _, resp := do(t, http.MethodPost, url+"/api/public/ingestion", "application/json", []byte(body), nil)
	require.Equal(t, http.StatusMultiStatus, code, resp)
	var got struct {
		Successes []struct {
			ID     string
			Status int
		}
		Errors []struct {
			ID      string
			Status  int
			Message string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(resp), &got))
	assert.Len(t, got.Successes, 4)
	require.Len(t, got.Errors, 3)
	assert.Equal(t, "e4", got.Errors[0].ID)
	assert.Contains(t, got.Errors[0].Message, "batch[3].body.startTime")
	assert.Equal(t, "unknown", got.Errors[1].ID)
	assert.Contains(t, got.Errors[2].Message, "unknown event type")

	chats := spansNamed(sink, "chat gpt-4o")
	require.Len(t, chats, 1)
	u, _ := genai.UsageFromMap(chats[0].Attributes())
	assert.Equal(t, genai.Usage{Input: 100, Output: 20, CacheRead: 30, Reasoning: 5}, u, "Langfuse's exclusive buckets become inclusive")
	conv, _ := chats[0].Attributes().Get(genai.AttrConversationID)
	assert.Equal(t, "th1", conv.Str())
	// the trace's root span follows once the trace has been quiet for RootIdle
	require.Eventually(t, func() bool { return len(spansNamed(sink, "invoke_agent lead_agent")) == 1 }, 10*time.Second, 50*time.Millisecond)

	code, _, _ = do(t, http.MethodPost, url+"/api/public/ingestion", "application/json", []byte(`{"batch":{}}`), nil)
	assert.Equal(t, http.StatusBadRequest, code)
}

func otlpTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ss.Scope().SetName("langfuse-sdk")
	s := ss.Spans().AppendEmpty()
	s.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	s.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	s.SetName("my-generation")
	s.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000))
	s.SetEndTimestamp(pcommon.Timestamp(1_700_000_001_000_000_000))
	a := s.Attributes()
	a.PutStr("langfuse.observation.type", "generation")
	a.PutStr("langfuse.observation.model.name", "claude-sonnet")
	a.PutStr("langfuse.observation.usage_details", `{"input":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":5,"output":40}`)
	a.PutStr("langfuse.observation.input", `"secret prompt"`)
	a.PutStr("langfuse.session.id", "th9")
	return td
}

func otlpJSON(t *testing.T) string {
	b, err := ptraceotlp.NewExportRequestFromTraces(otlpTraces()).MarshalJSON()
	require.NoError(t, err)
	return string(b)
}

func TestLangfuseOTLPFormats(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	pb, err := ptraceotlp.NewExportRequestFromTraces(otlpTraces()).MarshalProto()
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(pb)
	require.NoError(t, zw.Close())
	for _, tc := range []struct {
		name, ct string
		body     []byte
		hdr      map[string]string
	}{
		{"protobuf", "application/x-protobuf", pb, nil},
		{"json", "application/json", []byte(otlpJSON(t)), nil},
		{"gzip", "application/x-protobuf", gz.Bytes(), map[string]string{"Content-Encoding": "gzip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink.Reset()
			code, _, resp := do(t, http.MethodPost, url+"/api/public/otel/v1/traces", tc.ct, tc.body, tc.hdr)
			require.Equal(t, http.StatusOK, code, resp)
			chats := spansNamed(sink, "chat claude-sonnet")
			require.Len(t, chats, 1)
			a := chats[0].Attributes()
			u, _ := genai.UsageFromMap(a)
			assert.Equal(t, genai.Usage{Input: 105, Output: 40, CacheRead: 90, CacheCreation: 5}, u)
			_, hasPrompt := a.Get("langfuse.observation.input")
			assert.False(t, hasPrompt, "content is dropped")
			assert.Equal(t, ptrace.SpanKindClient, chats[0].Kind())
		})
	}
	code, _, resp := do(t, http.MethodPost, url+"/api/public/otel/v1/traces", "text/plain", []byte("x"), nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "Content-Type")
	code, _, _ = do(t, http.MethodPost, url+"/api/public/otel/v1/traces", "application/x-protobuf", []byte{0xff, 0xff, 0xff}, nil)
	assert.Equal(t, http.StatusBadRequest, code)
}

func TestProbesAndUnknownPaths(t *testing.T) {
	url, _ := startReceiver(t, consumertest.NewNop(), nil)
	code, _, body := do(t, http.MethodGet, url+"/info", "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"use_multipart_endpoint":true`)
	code, _, body = do(t, http.MethodGet, url+"/api/public/health", "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"status":"OK"`)
	code, _, _ = do(t, http.MethodGet, url+"/nope", "", nil, nil)
	assert.Equal(t, http.StatusNotFound, code)
	code, _, _ = do(t, http.MethodGet, url+"/v1/usage", "", nil, nil)
	assert.Equal(t, http.StatusMethodNotAllowed, code)
}

func TestStartFailsOnBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	cfg := createDefaultConfig().(*Config)
	cfg.ServerConfig.NetAddr.Endpoint = l.Addr().String()
	rcv, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	err = rcv.Start(context.Background(), componenttest.NewNopHost())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listen on")
	require.NoError(t, rcv.Shutdown(context.Background()))
}
