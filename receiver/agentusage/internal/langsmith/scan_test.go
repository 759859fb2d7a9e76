package langsmith

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

func tracesJSON(t *testing.T, ops []Op) string {
	t.Helper()
	tr := NewTranslator(time.Minute, 100)
	p := tr.Plan(ops)
	td := p.Build()
	p.Commit(t0)
	more := tr.BuildRuns(tr.Drain())
	more.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	// parked runs drain in no fixed order
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		sss := td.ResourceSpans().At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			sss.At(j).Spans().Sort(func(a, b ptrace.Span) bool {
				x, y := a.SpanID(), b.SpanID()
				return bytes.Compare(x[:], y[:]) < 0
			})
		}
	}
	td.ResourceSpans().Sort(func(a, b ptrace.ResourceSpans) bool {
		x, _ := a.Resource().Attributes().Get("service.name")
		y, _ := b.Resource().Attributes().Get("service.name")
		return x.Str() < y.Str()
	})
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return string(b)
}

// checkScanMatchesTyped: whatever the scanning decoder accepts, the typed decoder
// accepts too, and both runs translate to the same spans.
func checkScanMatchesTyped(t *testing.T, body []byte) bool {
	t.Helper()
	scanned, err := decodeBatchScan(body)
	if err != nil {
		return false
	}
	typed, err := decodeBatchFast(body)
	require.NoError(t, err, "scanner accepted a body the typed path refuses: %s", body)
	require.Len(t, scanned, len(typed))
	for i := range typed {
		s, f := scanned[i].Run, typed[i].Run
		require.Equal(t, f.inputs(), s.inputs())
		require.Equal(t, f.outputs().decode(), s.outputs().decode())
		require.Equal(t, f.extra().decode(), s.extra().decode())
		s.Inputs, s.RawInputs, s.Outputs, s.rawOutputs, s.Extra, s.rawExtra = nil, nil, nil, nil, nil, nil
		f.Inputs, f.RawInputs, f.Outputs, f.rawOutputs, f.Extra, f.rawExtra = nil, nil, nil, nil, nil, nil
		require.Equal(t, f, s)
		require.Equal(t, typed[i].Patch, scanned[i].Patch)
	}
	require.JSONEq(t, tracesJSON(t, typed), tracesJSON(t, scanned))
	return true
}

const (
	scanLLM  = "01a22a31-cdeb-7000-8000-037a8c6bd3a1"
	scanTool = "01a22a31-cdeb-7000-8000-037a8c6bd3a2"
	scanRoot = "01a22a31-cdeb-7000-8000-037a8c6bd3a0"
)

var scanBodies = []string{
	// LangChain LLMResult: usage and tool calls deep inside generations
	`{"post":[{"id":"` + scanLLM + `","trace_id":"` + scanRoot + `","parent_run_id":"` + scanRoot + `","run_type":"llm","name":"ChatOpenAI","start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:01Z",
	  "outputs":{"generations":[[{"text":"","message":{"lc":1,"kwargs":{"content":"x\n\"q\"","tool_calls":[{"id":"call_1","name":"task"},{"id":"call_1"},{"id":"call_2"}],
	    "response_metadata":{"model_name":"gpt-4o-2024","token_usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}},
	    "usage_metadata":{"input_tokens":10,"output_tokens":3,"input_token_details":{"cache_read":4,"ephemeral_5m_input_tokens":2},"output_token_details":{"reasoning":1}}}}}]],
	  "llm_output":{"token_usage":{"prompt_tokens":99}}},
	  "extra":{"metadata":{"ls_provider":"openai","thread_id":"th","user_id":"u"},"invocation_params":{"model":"gpt-4o"}},"tags":["lead_agent"]}]}`,
	// provider usage only (Anthropic), duplicate keys, escapes, unicode
	`{"post":[{"id":"` + scanLLM + `","run_type":"llm","end_time":1767225601000,"start_time":1767225600000,
	  "outputs":{"b":{"usage":{"input_tokens":5,"output_tokens":2,"cache_read_input_tokens":null,"cache_creation_input_tokens":7}},"a":{"content":[{"type":"tool_use","id":"toolu_1"},{"type":"function_call","call_id":"fc_1","id":"x"}]},"model_name":"","m\u006fdel_name":"claude-é"},
	  "extra":{"metadata":{"thread_id":"a","thread_id":"b","ls_model_name":"\u00e9m"}},"error":"boom \"x\"","tags":[]}],"patch":null}`,
	// tool run: tool_call_id in extra / inputs / outputs; subagent chain under it
	`{"post":[{"id":"` + scanTool + `","trace_id":"` + scanRoot + `","parent_run_id":"` + scanRoot + `","run_type":"tool","name":"task","end_time":"2026-01-01T00:00:02Z",
	  "inputs":{"tool_call":{"id":"call_in"}},"outputs":{"output":{"tool_call_id":"call_out","subagent_status":"completed"}}},
	  {"id":"` + scanLLM + `","trace_id":"` + scanRoot + `","parent_run_id":"` + scanTool + `","run_type":"chain","name":"general-purpose","end_time":"2026-01-01T00:00:03Z","extra":{"metadata":{"lc_agent_name":"gp"}}}],
	  "patch":[{"id":"` + scanRoot + `","end_time":"2026-01-01T00:00:04Z","outputs":{},"extra":{"runtime":{}}}]}`,
	// usage in metadata; usage_metadata present but not an object; numbers as strings and floats
	`{"post":[{"id":"` + scanLLM + `","run_type":"chat_model","end_time":"2026-01-01T00:00:01Z","outputs":{"usage_metadata":3,"x":[{"usage_metadata":{"input_tokens":"12","output_tokens":1.5e1}}]},
	  "extra":{"metadata":{"usage_metadata":{"input_tokens":1}}}}]}`,
	`{"post":[{"id":"` + scanLLM + `","run_type":"llm","end_time":"2026-01-01T00:00:01Z","extra":{"metadata":{"usage_metadata":{"output_tokens":9,"output_token_details":{"reasoning":2}}}}}]}`,
	// OpenAI Responses usage
	`{"post":[{"id":"` + scanLLM + `","run_type":"llm","end_time":"2026-01-01T00:00:01Z","outputs":{"usage":{"input_tokens":8,"output_tokens":2,"input_tokens_details":{"cached_tokens":3},"output_tokens_details":{"reasoning_tokens":1}}}}]}`,
	// POST and PATCH of one run in one batch: extra merged
	`{"post":[{"id":"` + scanLLM + `","run_type":"llm","start_time":"2026-01-01T00:00:00Z","extra":{"metadata":{"thread_id":"t1","ls_model_name":"m1"}},"outputs":{"usage_metadata":{"input_tokens":1}}}],
	  "patch":[{"id":"` + scanLLM + `","end_time":"2026-01-01T00:00:01Z","extra":{"metadata":{"run_id":"r1"},"runtime":{"sdk":"js"}},"outputs":{"usage_metadata":{"input_tokens":2,"output_tokens":1}}}]}`,
	// patch group first: posts still come first
	`{"patch":[{"id":"` + scanLLM + `","end_time":"2026-01-01T00:00:01Z"}],"other":[1,{"a":null}],"post":[{"id":"` + scanLLM + `","run_type":"llm","start_time":"2026-01-01T00:00:00Z"}]}`,
	// bodies the scanner must leave to the typed path
	`{"post":[{"id":"` + scanLLM + `"}],"post":[]}`,
	`{"Post":[{"id":"` + scanLLM + `"}]}`,
	`{"post":[{"ID":"` + scanLLM + `"}]}`,
	`{"post":[{"id":"` + scanLLM + `","error":{"code":1}}]}`,
	`{"post":[{"id":"` + scanLLM + `","tags":[null]}]}`,
	`{"post":[{"id":"` + scanLLM + `","outputs":{"a":1e400}}]}`,
	`{"post":[{"id":"` + scanLLM + `"}]} x`,
	`{"post":[{"id":"nope"}]}`,
	`{"post":{}}`,
	`{}`,
}

func TestBatchScanMatchesTypedPath(t *testing.T) {
	accepted := 0
	for _, body := range scanBodies {
		if checkScanMatchesTyped(t, []byte(body)) {
			accepted++
		}
	}
	require.Equal(t, 9, accepted, "the well-formed bodies take the scanning path")
}

func FuzzBatchScanMatchesTyped(f *testing.F) {
	for _, b := range scanBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkScanMatchesTyped(t, body) })
}

// checkMultipartScanMatchesMIME: whatever the scanning multipart decoder accepts, the
// mime/multipart decoder accepts without item errors, and both translate alike.
func checkMultipartScanMatchesMIME(t *testing.T, boundary string, body []byte) bool {
	t.Helper()
	parts, ok := splitMultipart(nil, body, boundary)
	if !ok {
		return false
	}
	scanned, ok := decodeMultipartScan(parts)
	if !ok {
		return false
	}
	slow, errs, err := decodeMultipartMIME(boundary, bytes.NewReader(body))
	require.NoError(t, err, "scanner accepted a body mime/multipart refuses: %q", body)
	require.Empty(t, errs, "%q", body)
	require.Len(t, scanned, len(slow))
	for i := range slow {
		s, f := scanned[i].Run, slow[i].Run
		require.Equal(t, f.inputs(), s.inputs())
		require.Equal(t, f.outputs().decode(), s.outputs().decode())
		require.Equal(t, f.extra().decode(), s.extra().decode())
		s.Inputs, s.RawInputs, s.Outputs, s.rawOutputs, s.Extra, s.rawExtra, s.Tags = nil, nil, nil, nil, nil, nil, nil
		f.Inputs, f.RawInputs, f.Outputs, f.rawOutputs, f.Extra, f.rawExtra, f.Tags = nil, nil, nil, nil, nil, nil, nil
		require.Equal(t, f, s)
		require.Equal(t, slow[i].Patch, scanned[i].Patch)
		require.Equal(t, slow[i].Field, scanned[i].Field)
		require.Equal(t, len(slow[i].Run.Tags), len(scanned[i].Run.Tags))
	}
	require.JSONEq(t, tracesJSON(t, slow), tracesJSON(t, scanned))
	return true
}

func mpBody(parts ...string) []byte {
	var b bytes.Buffer
	for i := 0; i+1 < len(parts); i += 2 {
		b.WriteString("--b\r\nContent-Disposition: form-data; name=\"" + parts[i] + "\"\r\nContent-Type: application/json; length=1\r\n\r\n" + parts[i+1] + "\r\n")
	}
	b.WriteString("--b--\r\n")
	return b.Bytes()
}

var mpBodies = [][]byte{
	mpBody("post."+scanLLM, `{"trace_id":"`+scanRoot+`","parent_run_id":"`+scanRoot+`","run_type":"llm","end_time":"2026-01-01T00:00:01Z","outputs":{"x":1},"tags":["lead_agent"]}`,
		"post."+scanLLM+".outputs", `{"generations":[[{"message":{"kwargs":{"tool_calls":[{"id":"c1"}],"usage_metadata":{"input_tokens":3,"output_tokens":1}}}}]]}`+"\n",
		"post."+scanLLM+".extra", ` {"metadata":{"ls_model_name":"m","thread_id":"t"}} `,
		"post."+scanLLM+".events", `not json`,
		"attachment.x", `whatever`),
	mpBody("post."+scanTool+".inputs", `{"tool_call":{"id":"call_in"}}`,
		"post."+scanTool, `{"id":"`+scanTool+`","run_type":"tool","name":"task","start_time":"2026-01-01T00:00:00Z"}`,
		"patch."+scanTool, `{"end_time":"2026-01-01T00:00:02Z","error":"x"}`,
		"patch."+scanTool+".outputs", `null`,
		"patch."+scanTool+".error", `"boom"`),
	mpBody("patch."+scanRoot, `{"id":"`+scanRoot+`","end_time":1767225601000}`, "post."+scanRoot, `{"run_type":"chain","name":"lead_agent","start_time":1767225600000}`),
	// left to mime/multipart
	mpBody("post."+scanLLM, `{"id":null}`),
	mpBody("post."+scanLLM, `{}`, "post."+scanLLM, `{}`),
	mpBody("post."+scanLLM+".outputs", `[1]`),
	mpBody("post.", `{}`),
	[]byte("preamble\r\n--b\r\nContent-Disposition: form-data; name=\"post." + scanLLM + "\"\r\n\r\n{}\r\n--b--\r\n"),
	[]byte("--b\r\nContent-Disposition: form-data; name=\"post." + scanLLM + "\"\r\n\r\n{}\r\n--b--"),
	[]byte("--b\r\nContent-Disposition: form-data; name=post." + scanLLM + "\r\n\r\n{}\r\n--b--\r\n"),
}

func TestMultipartScanMatchesMIME(t *testing.T) {
	accepted := 0
	for _, body := range mpBodies {
		if checkMultipartScanMatchesMIME(t, "b", body) {
			accepted++
		}
	}
	require.Equal(t, 4, accepted, "the well-formed bodies take the scanning path")
	seed, err := os.ReadFile(filepath.Join("testdata", "multipart_sdk.txt"))
	require.NoError(t, err)
	require.True(t, checkMultipartScanMatchesMIME(t, "----LangSmithFormBoundary5ngw3md24wu", seed), "the captured SDK body takes the scanning path")
}

func FuzzMultipartScanMatchesMIME(f *testing.F) {
	for _, b := range mpBodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkMultipartScanMatchesMIME(t, "b", body) })
}

// A run parked from a pooled multipart body keeps its own copy of the raw parts: the
// buffer is reused by the next request once released.
func TestPooledMultipartParkedRunSurvivesBufferReuse(t *testing.T) {
	post := mpBody("post."+scanLLM, `{"run_type":"llm","start_time":"2026-01-01T00:00:00Z","trace_id":"`+scanRoot+`"}`,
		"post."+scanLLM+".outputs", `{"usage_metadata":{"input_tokens":7,"output_tokens":2}}`,
		"post."+scanLLM+".extra", `{"metadata":{"ls_model_name":"gpt-x","thread_id":"th-1"}}`)
	tr := NewTranslator(time.Minute, 10)
	ops, errs, release, err := DecodeMultipartPooled("multipart/form-data; boundary=b", bytes.NewReader(post), int64(len(post)))
	require.NoError(t, err)
	require.Empty(t, errs)
	p := tr.Plan(ops)
	require.Len(t, p.Park, 1)
	p.Build()
	p.Commit(t0)
	release()
	// the next request reuses the buffer: scribble over all of it
	if bp, ok := readBufs.Get().(*[]byte); ok {
		b := (*bp)[:cap(*bp)]
		for i := range b {
			b[i] = 'x'
		}
		readBufs.Put(bp)
	}
	patch := mpBody("patch."+scanLLM, `{"end_time":"2026-01-01T00:00:01Z"}`)
	ops, errs, release, err = DecodeMultipartPooled("multipart/form-data; boundary=b", bytes.NewReader(patch), int64(len(patch)))
	require.NoError(t, err)
	require.Empty(t, errs)
	defer release()
	p = tr.Plan(ops)
	spans := spansOf(p.Build())
	require.Len(t, spans, 1)
	a := spans[0].Attributes()
	model, _ := a.Get(genai.AttrRequestModel)
	assert.Equal(t, "gpt-x", model.Str())
	in, _ := a.Get(genai.AttrUsageInput)
	assert.Equal(t, int64(7), in.Int())
	th, _ := a.Get(genai.AttrConversationID)
	assert.Equal(t, "th-1", th.Str())
}
