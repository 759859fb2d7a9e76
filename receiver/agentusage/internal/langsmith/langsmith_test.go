package langsmith

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/goldentest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func spansOf(td ptrace.Traces) []ptrace.Span { return slices.Collect(spaniter.All(td)) }

// buildCaptured decodes the captured multipart request testdata/<name>.txt (its
// Content-Type in <name>.content-type), whose runs all ended, and builds its spans.
func buildCaptured(t *testing.T, name string) ptrace.Traces {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name+".txt"))
	require.NoError(t, err)
	ct, err := os.ReadFile(filepath.Join("testdata", name+".content-type"))
	require.NoError(t, err)
	ops, errs, err := DecodeMultipart(string(ct), bytes.NewReader(body))
	require.NoError(t, err)
	require.Empty(t, errs)
	plan := NewTranslator(time.Minute, 100).Plan(ops)
	require.Empty(t, plan.Park, "every run ended")
	return plan.Build()
}

// What the official JS SDK sent for test/sdk/langsmith-deerflow-run.mjs (captured):
// one multipart request, POST and PATCH of each run already combined by the SDK.
func TestGoldenSDKMultipart(t *testing.T) {
	td := buildCaptured(t, "multipart_sdk")
	assert.Equal(t, 9, td.SpanCount())
	goldentest.Compare(t, filepath.Join("testdata", "multipart_sdk.expected.yaml"), td)
}

const (
	traceID = "01a22a31-cdc6-7000-8000-016bd484a2ba"
	llmID   = "01a22a31-cdeb-7000-8000-037a8c6bd3a0"
	toolID  = "01a22a31-cdeb-7000-8000-037a8c6bd3a1"
)

// POST and PATCH in separate batch requests become one span, in either order.
func TestGoldenBatchPostThenPatch(t *testing.T) {
	post := `{"post":[
 {"id":"` + traceID + `","trace_id":"` + traceID + `","dotted_order":"20260101T000000000001Z` + traceID + `","name":"lead_agent","run_type":"chain","start_time":"2026-01-01T00:00:00.000001","extra":{"metadata":{"thread_id":"th","run_id":"run"}}},
 {"id":"` + llmID + `","trace_id":"` + traceID + `","parent_run_id":"` + traceID + `","dotted_order":"20260101T000000000001Z` + traceID + `.20260101T000000100000Z` + llmID + `","name":"ChatAnthropic","run_type":"llm","start_time":"2026-01-01T00:00:00.1Z","extra":{"metadata":{"ls_provider":"anthropic","ls_model_name":"claude-sonnet"}}}
]}`
	patch := `{"patch":[
 {"id":"` + llmID + `","trace_id":"` + traceID + `","dotted_order":"20260101T000000000001Z` + traceID + `.20260101T000000100000Z` + llmID + `","end_time":"2026-01-01T00:00:02Z",
  "outputs":{"llm_output":{"usage":{"input_tokens":10,"cache_read_input_tokens":80,"cache_creation_input_tokens":5,"output_tokens":20}},
   "generations":[[{"message":{"content":[{"type":"text","text":"x"},{"type":"tool_use","id":"toolu_1","name":"task"}]}}]]}},
 {"id":"` + traceID + `","trace_id":"` + traceID + `","dotted_order":"20260101T000000000001Z` + traceID + `","end_time":"2026-01-01T00:00:03Z","error":"ValueError('boom')"}
]}`
	tr := NewTranslator(time.Minute, 100)
	ops, errs, err := DecodeBatch([]byte(post))
	require.NoError(t, err)
	require.Empty(t, errs)
	p1 := tr.Plan(ops)
	assert.Zero(t, p1.Build().SpanCount(), "nothing ended yet")
	p1.Commit(t0)
	assert.Equal(t, 2, tr.Pending())

	ops, errs, err = DecodeBatch([]byte(patch))
	require.NoError(t, err)
	require.Empty(t, errs)
	p2 := tr.Plan(ops)
	td := p2.Build()
	p2.Commit(t0)
	assert.Equal(t, 0, tr.Pending())
	require.Equal(t, 2, td.SpanCount())
	for s := range spaniter.All(td) {
		if s.Name() == "chat claude-sonnet" {
			u, ok := genai.UsageFromMap(s.Attributes())
			require.True(t, ok)
			assert.Equal(t, genai.Usage{Input: 95, Output: 20, CacheRead: 80, CacheCreation: 5}, u, "Anthropic cache is added into input")
			assert.Equal(t, []string{"toolu_1"}, genai.StringsFromMap(s.Attributes(), genai.AttrResponseToolCallIDs))
		}
	}
	goldentest.Compare(t, filepath.Join("testdata", "batch_post_patch.expected.yaml"), td)
}

func TestPatchBeforePostWaitsForPost(t *testing.T) {
	tr := NewTranslator(time.Minute, 100)
	patch, err := DecodeRun([]byte(`{"end_time":"2026-01-01T00:00:02Z","outputs":{"usage_metadata":{"input_tokens":4,"output_tokens":2}}}`), true, llmID)
	require.NoError(t, err)
	p := tr.Plan([]Op{patch})
	assert.Zero(t, p.Build().SpanCount(), "a PATCH alone lacks name, type and model")
	p.Commit(t0)
	post, err := DecodeRun([]byte(`{"id":"`+llmID+`","trace_id":"`+traceID+`","parent_run_id":"`+traceID+`","name":"ChatOpenAI","run_type":"llm","start_time":"2026-01-01T00:00:01Z","extra":{"metadata":{"ls_model_name":"gpt-4o"}}}`), false, "")
	require.NoError(t, err)
	p = tr.Plan([]Op{post})
	td := p.Build()
	require.Equal(t, 1, td.SpanCount())
	s := spansOf(td)[0]
	assert.Equal(t, "chat gpt-4o", s.Name())
	u, _ := genai.UsageFromMap(s.Attributes())
	assert.Equal(t, genai.Usage{Input: 4, Output: 2}, u, "the PATCH's data is kept when the POST arrives later")
}

func TestExpiredAndEvicted(t *testing.T) {
	tr := NewTranslator(time.Minute, 2)
	for i, id := range []string{llmID, toolID, traceID} {
		op, err := DecodeRun([]byte(`{"id":"`+id+`","name":"n","run_type":"chain","start_time":"2026-01-01T00:00:00Z"}`), false, "")
		require.NoError(t, err)
		p := tr.Plan([]Op{op})
		if i == 2 {
			require.Len(t, p.Evict, 1, "the oldest run leaves a full store, in the request that needs its room")
			assert.Equal(t, llmID, p.Evict[0].ID)
			assert.Equal(t, 1, p.Build().SpanCount(), "it goes on as it is")
		} else {
			assert.Empty(t, p.Evict)
		}
		p.Commit(t0.Add(time.Duration(i) * time.Second))
	}
	assert.Equal(t, 2, tr.Pending())
	assert.Empty(t, tr.Expired(t0.Add(30*time.Second)))
	assert.Len(t, tr.Expired(t0.Add(2*time.Minute)), 2)
}

func TestDecodeErrorsNameTheField(t *testing.T) {
	_, err := DecodeRun([]byte(`{"id":"`+llmID+`","start_time":{}}`), false, "")
	require.ErrorIs(t, err, ErrBody)
	assert.Contains(t, err.Error(), "start_time")
	_, err = DecodeRun([]byte(`{"name":"x"}`), false, "")
	assert.Contains(t, err.Error(), "id: is required")
	_, err = DecodeRun([]byte(`[]`), false, "")
	assert.Contains(t, err.Error(), "JSON")
	_, errs, err := DecodeBatch([]byte(`{"post":[1,{"id":"` + llmID + `","extra":"x"}],"patch":[{"id":"` + llmID + `","trace_id":"t"}]}`))
	require.NoError(t, err)
	require.Len(t, errs, 3)
	assert.Equal(t, "post[0]", errs[0].Field)
	assert.Contains(t, errs[1].Message, "extra: must be a JSON object")
	assert.Contains(t, errs[2].Message, "trace_id: must be a UUID")
	_, _, err = DecodeMultipart("multipart/form-data", strings.NewReader(""))
	assert.ErrorIs(t, err, ErrBody)
}

func TestSubagentChainUnderToolInLaterRequest(t *testing.T) {
	tr := NewTranslator(time.Minute, 100)
	tool := `{"id":"` + toolID + `","trace_id":"` + traceID + `","parent_run_id":"` + traceID + `","name":"task","run_type":"tool","start_time":"2026-01-01T00:00:01Z","inputs":{"tool_call":{"id":"call_9"}}}`
	op, err := DecodeRun([]byte(tool), false, "")
	require.NoError(t, err)
	p := tr.Plan([]Op{op})
	p.Build()
	p.Commit(t0)
	agentID := "01a22a31-cdeb-7000-8000-037a8c6bd3a2"
	op, err = DecodeRun([]byte(`{"id":"`+agentID+`","trace_id":"`+traceID+`","parent_run_id":"`+toolID+`","name":"bash","run_type":"chain","start_time":"2026-01-01T00:00:02Z","end_time":"2026-01-01T00:00:03Z"}`), false, "")
	require.NoError(t, err)
	td := tr.Plan([]Op{op}).Build()
	s := spansOf(td)[0]
	assert.Equal(t, "invoke_agent bash", s.Name())
	c, _ := s.Attributes().Get(genai.AttrCaller)
	assert.Equal(t, "subagent:bash", c.Str())
	id, _ := s.Attributes().Get(genai.AttrToolCallID)
	assert.Equal(t, "call_9", id.Str(), "from the parked tool run")
}

// inputs parts are kept raw and decoded only for tool runs; events and serialized parts
// are not decoded at all (bad JSON there is ignored like an unknown field).
func TestMultipartInputsDecodedOnlyForTools(t *testing.T) {
	body := "--b\r\nContent-Disposition: form-data; name=\"post." + toolID + "\"\r\n\r\n" +
		`{"id":"` + toolID + `","trace_id":"` + traceID + `","parent_run_id":"` + traceID + `","name":"task","run_type":"tool","start_time":"2026-01-01T00:00:01Z","end_time":"2026-01-01T00:00:02Z"}` +
		"\r\n--b\r\nContent-Disposition: form-data; name=\"post." + toolID + ".inputs\"\r\n\r\n" + `{"tool_call":{"id":"call_in"}}` +
		"\r\n--b\r\nContent-Disposition: form-data; name=\"post." + toolID + ".events\"\r\n\r\n" + `not json` +
		"\r\n--b--\r\n"
	ops, errs, err := DecodeMultipart("multipart/form-data; boundary=b", strings.NewReader(body))
	require.NoError(t, err)
	require.Empty(t, errs)
	require.Len(t, ops, 1)
	assert.JSONEq(t, `{"tool_call":{"id":"call_in"}}`, string(ops[0].Run.inputs), "kept as sent")
	td := NewTranslator(time.Minute, 10).Plan(ops).Build()
	s := spansOf(td)[0]
	id, _ := s.Attributes().Get(genai.AttrToolCallID)
	assert.Equal(t, "call_in", id.Str())
}

// What the JS SDK sent for test/interop/langchain-langsmith.mjs (captured): a LangChain
// createAgent lead whose task tool invokes a second createAgent. LangGraph copies
// lc_agent_name into every node's metadata; only each agent's own run becomes an
// invoke_agent span, the graph nodes stay plain spans, and the subagent's calls are
// attributed to it.
func TestGoldenLangChainAgentsMultipart(t *testing.T) {
	testLangChainAgents(t, "multipart_langchain", "call_task_4")
}

// The same app with the subagent invoked with the tool's run config (captured): every
// run inside the subagent inherits the lead's lc_agent_name; the subagent is still one
// agent run, named after its own run.
func TestGoldenLangChainSubagentWithCallerConfig(t *testing.T) {
	testLangChainAgents(t, "multipart_langchain_config", "call_task_1")
}

func testLangChainAgents(t *testing.T, name, callID string) {
	td := buildCaptured(t, name)

	byID := map[string]ptrace.Span{}
	var agents, nodes []string
	for s := range spaniter.All(td) {
		byID[s.SpanID().String()] = s
		op, _ := s.Attributes().Get(genai.AttrOperationName)
		switch op.Str() {
		case genai.OpInvokeAgent:
			agents = append(agents, s.Name())
		case "":
			nodes = append(nodes, s.Name())
		}
	}
	assert.ElementsMatch(t, []string{"invoke_agent lead_agent", "invoke_agent researcher"}, agents, "one agent span per agent run")
	assert.Contains(t, nodes, "model_request")
	assert.Contains(t, nodes, "tools")
	for _, s := range byID {
		if s.Name() != "invoke_agent researcher" {
			continue
		}
		p := byID[s.ParentSpanID().String()]
		assert.Equal(t, "execute_tool task", p.Name(), "the subagent hangs under its task call")
		id, _ := p.Attributes().Get(genai.AttrToolCallID)
		assert.Equal(t, callID, id.Str())
	}
	for _, s := range byID {
		if s.Name() == "chat gpt-4o-mini" {
			c, _ := s.Attributes().Get(genai.AttrCaller)
			assert.Equal(t, genai.SubagentCaller("researcher"), c.Str())
		}
	}
	goldentest.Compare(t, filepath.Join("testdata", name+".expected.yaml"), td)
}

// A long run's runs come in several batches: a subagent's runs can arrive before the
// task tool run they sit under. The face then cannot tell they are the subagent's, and
// says nothing rather than "lead_agent": the merge attributes uncalled spans from the
// whole trace. The lead's own runs carry no caller either (an uncalled call counts as
// the lead's).
func TestNoDefaultCallerForRunsOfUnknownParents(t *testing.T) {
	tr := NewTranslator(time.Minute, 100)
	agentID := "01a22a31-cdeb-7000-8000-037a8c6bd3a2"
	chatID := "01a22a31-cdeb-7000-8000-037a8c6bd3a3"
	sub := `{"post":[
 {"id":"` + agentID + `","trace_id":"` + traceID + `","parent_run_id":"` + toolID + `","name":"researcher","run_type":"chain","start_time":"2026-01-01T00:00:02Z","end_time":"2026-01-01T00:00:04Z","extra":{"metadata":{"lc_agent_name":"researcher"}}},
 {"id":"` + chatID + `","trace_id":"` + traceID + `","parent_run_id":"` + agentID + `","name":"ChatOpenAI","run_type":"llm","start_time":"2026-01-01T00:00:02Z","end_time":"2026-01-01T00:00:03Z","extra":{"metadata":{"ls_model_name":"gpt-4o-mini","lc_agent_name":"researcher"}},"outputs":{"usage_metadata":{"input_tokens":5,"output_tokens":1}}}]}`
	ops, errs, err := DecodeBatch([]byte(sub))
	require.NoError(t, err)
	require.Empty(t, errs)
	p := tr.Plan(ops)
	spans := spansOf(p.Build())
	require.Len(t, spans, 2, "the subagent's runs are emitted, not held for their parent")
	for _, s := range spans {
		_, has := s.Attributes().Get(genai.AttrCaller)
		assert.False(t, has, "%s: the face cannot know the caller yet", s.Name())
	}
	p.Commit(t0)

	lead := `{"post":[
 {"id":"` + traceID + `","trace_id":"` + traceID + `","name":"lead_agent","run_type":"chain","start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:05Z"},
 {"id":"` + toolID + `","trace_id":"` + traceID + `","parent_run_id":"` + traceID + `","name":"task","run_type":"tool","start_time":"2026-01-01T00:00:01Z","end_time":"2026-01-01T00:00:04Z","inputs":{"tool_call":{"id":"call_1"}}}]}`
	ops, _, err = DecodeBatch([]byte(lead))
	require.NoError(t, err)
	spans = spansOf(tr.Plan(ops).Build())
	require.Len(t, spans, 2)
	for _, s := range spans {
		_, has := s.Attributes().Get(genai.AttrCaller)
		assert.False(t, has, "%s: the lead's runs carry no default caller", s.Name())
	}
}

// One-hour cache writes are a part of cache_creation with their own price: LangChain's
// input_token_details.ephemeral_1h_input_tokens and Anthropic's usage.cache_creation.
func TestOneHourCacheWrites(t *testing.T) {
	body := `{"post":[
 {"id":"` + llmID + `","run_type":"llm","end_time":"2026-01-01T00:00:01Z","outputs":{"usage_metadata":{"input_tokens":100,"output_tokens":5,"input_token_details":{"cache_read":10,"ephemeral_5m_input_tokens":20,"ephemeral_1h_input_tokens":30}}}},
 {"id":"` + toolID + `","run_type":"llm","end_time":"2026-01-01T00:00:01Z","outputs":{"llm_output":{"usage":{"input_tokens":4,"output_tokens":1,"cache_creation_input_tokens":50,"cache_creation":{"ephemeral_5m_input_tokens":10,"ephemeral_1h_input_tokens":40}}}}}]}`
	ops, errs, err := DecodeBatch([]byte(body))
	require.NoError(t, err)
	require.Empty(t, errs)
	var got [][2]int64 // cache_creation, of it 1h
	for _, s := range spansOf(NewTranslator(time.Minute, 10).Plan(ops).Build()) {
		u, _ := genai.UsageFromMap(s.Attributes())
		h, ok := s.Attributes().Get(genai.AttrUsageCacheCreat1h)
		require.True(t, ok, s.Name())
		got = append(got, [2]int64{u.CacheCreation, h.Int()})
	}
	assert.ElementsMatch(t, [][2]int64{{50, 30}, {50, 40}}, got)
}
