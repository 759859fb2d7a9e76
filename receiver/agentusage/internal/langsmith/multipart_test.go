package langsmith

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// checkSplitMatchesMIME: whatever the hand splitter accepts, mime/multipart splits
// into the same post/patch parts.
func checkSplitMatchesMIME(t *testing.T, boundary string, body []byte) bool {
	t.Helper()
	parts, ok := splitMultipart(nil, body, boundary)
	if !ok {
		return false
	}
	slow, err := mimeParts(nil, body, boundary)
	require.NoError(t, err, "the splitter accepted a body mime/multipart refuses: %q", body)
	var fast []mpPart
	for _, p := range parts {
		if k, _, _ := bytes.Cut(p.name, []byte(".")); string(k) == "post" || string(k) == "patch" {
			fast = append(fast, p)
		}
	}
	require.Len(t, fast, len(slow))
	for i := range slow {
		require.Equal(t, string(slow[i].name), string(fast[i].name))
		require.Equal(t, string(slow[i].data), string(fast[i].data))
	}
	ops, errs, err := DecodeMultipart("multipart/form-data; boundary="+boundary, bytes.NewReader(body))
	require.NoError(t, err)
	slowOps, slowErrs := decodeParts(slow)
	require.Equal(t, errs, slowErrs)
	require.Equal(t, tracesJSON(t, slowOps), tracesJSON(t, ops))
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

func TestMultipartSplitMatchesMIME(t *testing.T) {
	accepted := 0
	for _, body := range mpBodies {
		if checkSplitMatchesMIME(t, "b", body) {
			accepted++
		}
	}
	require.Equal(t, 8, accepted, "the CRLF form-data bodies are split by hand")
	seed, err := os.ReadFile(filepath.Join("testdata", "multipart_sdk.txt"))
	require.NoError(t, err)
	require.True(t, checkSplitMatchesMIME(t, "----LangSmithFormBoundary5ngw3md24wu", seed), "the captured SDK body is split by hand")
}

func FuzzMultipartSplitMatchesMIME(f *testing.F) {
	for _, b := range mpBodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkSplitMatchesMIME(t, "b", body) })
}

// The multipart decoder on its own rules: split parts win over the run's part, a bad
// part names itself, a bad field names the run's part and the field.
func TestMultipartDecoderBehaviour(t *testing.T) {
	decode := func(body []byte) ([]Op, []ItemError) {
		ops, errs, err := DecodeMultipart("multipart/form-data; boundary=b", bytes.NewReader(body))
		require.NoError(t, err)
		return ops, errs
	}
	ops, errs := decode(mpBodies[1])
	require.Empty(t, errs)
	require.Len(t, ops, 2)
	assert.False(t, ops[0].Patch)
	assert.True(t, ops[1].Patch)
	assert.Equal(t, "boom", ops[1].Run.Error, "the error part wins over error in the run's part")
	assert.Nil(t, ops[1].Run.outputs, "a null outputs part clears outputs")
	assert.Equal(t, scanTool, ops[1].Run.ID, "the id comes from the part name")

	ops, errs = decode(mpBodies[3]) // {"id":null}
	assert.Empty(t, ops)
	require.Len(t, errs, 1)
	assert.Equal(t, "post."+scanLLM+".id: is required", errs[0].Message)

	ops, errs = decode(mpBodies[4]) // two run parts: merged, the last wins
	assert.Empty(t, errs)
	assert.Len(t, ops, 1)

	_, errs = decode(mpBodies[5]) // outputs part [1]
	require.Len(t, errs, 1)
	assert.Equal(t, "post."+scanLLM+".outputs: must be a JSON object", errs[0].Message)

	_, errs = decode(mpBodies[6]) // post.
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Message, "missing run id")

	_, errs = decode(mpBody("post."+scanLLM, `{"end_time":2026}`, "post."+scanLLM+".extra", `{"metadata":`, "post."+scanTool, `{"start_time":"soon"}`))
	require.Len(t, errs, 2)
	assert.Equal(t, "post."+scanLLM, errs[0].Field)
	assert.Contains(t, errs[0].Message, "post."+scanLLM+".extra: invalid JSON at byte")
	assert.Equal(t, "post."+scanTool, errs[1].Field)
	assert.Contains(t, errs[1].Message, "post."+scanTool+".start_time: not an RFC 3339")
	assert.True(t, errors.Is(func() error {
		_, _, err := DecodeMultipart("multipart/form-data; boundary=b", strings.NewReader("--b\r\nbroken"))
		return err
	}(), ErrBody))
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
	scribbleReadBuffer()
	patch := mpBody("patch."+scanLLM, `{"end_time":"2026-01-01T00:00:01Z"}`)
	ops, errs, release, err = DecodeMultipartPooled("multipart/form-data; boundary=b", bytes.NewReader(patch), int64(len(patch)))
	require.NoError(t, err)
	require.Empty(t, errs)
	defer release()
	p = tr.Plan(ops)
	assertHeldRunSpan(t, spansOf(p.Build()))
}

// assertHeldRunSpan: the one span is the held run's, with what its POST said.
func assertHeldRunSpan(t *testing.T, spans []ptrace.Span) {
	t.Helper()
	require.Len(t, spans, 1)
	a := spans[0].Attributes()
	model, _ := a.Get(genai.AttrRequestModel)
	assert.Equal(t, "gpt-x", model.Str())
	in, _ := a.Get(genai.AttrUsageInput)
	assert.Equal(t, int64(7), in.Int())
	th, _ := a.Get(genai.AttrConversationID)
	assert.Equal(t, "th-1", th.Str())
}

// A multipart inputs part is kept as sent, space around it included, and still read.
func TestMultipartInputsWithSpaceAreRead(t *testing.T) {
	body := mpBody("post."+scanTool, `{"run_type":"tool","name":"task","end_time":"2026-01-01T00:00:02Z"}`,
		"post."+scanTool+".inputs", "\n  {\"tool_call\":{\"id\":\"call_sp\"}}\n")
	ops, errs, err := DecodeMultipart("multipart/form-data; boundary=b", bytes.NewReader(body))
	require.NoError(t, err)
	require.Empty(t, errs)
	spans := spansOf(NewTranslator(time.Minute, 10).Plan(ops).Build())
	require.Len(t, spans, 1)
	id, _ := spans[0].Attributes().Get(genai.AttrToolCallID)
	assert.Equal(t, "call_sp", id.Str())
}

// scribbleReadBuffer overwrites a recycled read buffer, as the next request would.
func scribbleReadBuffer() {
	if bp, ok := readBufs.Get().(*[]byte); ok {
		b := (*bp)[:cap(*bp)]
		for i := range b {
			b[i] = 'x'
		}
		readBufs.Put(bp)
	}
}
