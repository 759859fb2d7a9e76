package langfuse

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/goldentest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// What @langfuse/otel exported for test/sdk/langfuse-otel.mjs (captured, OTLP JSON).
func TestGoldenSDKOTLP(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "otlp_sdk.json"))
	require.NoError(t, err)
	td, err := DecodeOTLP("application/json", body)
	require.NoError(t, err)
	require.Equal(t, 5, td.SpanCount())
	goldentest.Compare(t, filepath.Join("testdata", "otlp_sdk.expected.yaml"), td)
}

// The three batches the v3 SDK sent for test/sdk/langfuse-v3-ingestion.mjs (captured),
// out of order (updates before creates, the trace-create in the middle): reassembled
// into five complete spans.
func TestGoldenSDKIngestionBatches(t *testing.T) {
	in := NewIngester(time.Minute, 100)
	all := ptrace.NewTraces()
	for i := 1; i <= 3; i++ {
		body, err := os.ReadFile(filepath.Join("testdata", fmt.Sprintf("ingestion_sdk_%d.json", i)))
		require.NoError(t, err)
		events, errs, err := DecodeIngestion(body)
		require.NoError(t, err)
		require.Empty(t, errs)
		p := in.Plan(events)
		td := p.Build()
		require.Empty(t, p.Evict)
		p.Commit(t0)
		goldentest.Merge(all, td)
	}
	assert.Equal(t, 1, in.Pending(), "every observation found its create, end and trace; the root waits for quiet")
	assert.Empty(t, in.Expired(t0.Add(RootIdle/2)))
	roots := in.Expired(t0.Add(RootIdle))
	require.Len(t, roots, 1)
	goldentest.Merge(all, in.BuildObservations(roots))
	assert.Equal(t, 0, in.Pending())
	require.Equal(t, 5, all.SpanCount())
	var sum genai.Usage
	for s := range spaniter.All(all) {
		if u, ok := genai.UsageFromMap(s.Attributes()); ok {
			sum = sum.Add(u)
		}
		conv, _ := s.Attributes().Get(genai.AttrConversationID)
		assert.Equal(t, "thread-lf3", conv.Str(), s.Name())
	}
	assert.Equal(t, genai.Usage{Input: 1200, Output: 90, CacheRead: 450, Reasoning: 10}, sum)
	goldentest.Compare(t, filepath.Join("testdata", "ingestion_sdk.expected.yaml"), all)
}

func TestUsageDetails(t *testing.T) {
	cases := []struct {
		in   string
		want genai.Usage
	}{
		{`{"input":70,"input_cached_tokens":30,"output":15,"output_reasoning_tokens":5,"total":120}`, genai.Usage{Input: 100, Output: 20, CacheRead: 30, Reasoning: 5}},
		{`{"input":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":5,"output":1}`, genai.Usage{Input: 105, Output: 1, CacheRead: 90, CacheCreation: 5}},
		{`{"input":"8","input_cache_creation_5m":2,"input_cache_creation_1h":3,"output":2,"output_audio_tokens":1}`, genai.Usage{Input: 13, Output: 3, CacheCreation: 5}},
		{`{"prompt_tokens":100,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":60},"completion_tokens_details":{"reasoning_tokens":4}}`, genai.Usage{Input: 100, Output: 9, CacheRead: 60, Reasoning: 4}},
		{`{"input_tokens":50,"output_tokens":5,"input_tokens_details":{"cached_tokens":10}}`, genai.Usage{Input: 50, Output: 5, CacheRead: 10}},
	}
	for _, c := range cases {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.in), &m))
		u, ok := usageFromDetails(m)
		require.True(t, ok, c.in)
		assert.Equal(t, c.want, u, c.in)
	}
	_, ok := usageFromDetails(map[string]any{"input": -1, "x": "y"})
	assert.False(t, ok)
}

func TestIngestionEventErrors(t *testing.T) {
	body := `{"batch":[
 {"id":"a","type":"span-create","body":{"id":"s1","traceId":"t","startTime":"2026-01-01T00:00:00Z","metadata":"nope"}},
 {"id":"b","type":"generation-create","body":{"traceId":"t"}},
 {"id":"c","type":"trace-update","body":{"id":"t"}},
 {"id":"d","type":"span-create","body":{"id":"s2","name":5}},
 {"id":"e","type":"span-create","body":"x"},
 {"id":"f","type":"sdk-log","body":{"log":"hi"}}
]}`
	events, errs, err := DecodeIngestion([]byte(body))
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.True(t, events[0].Ignore)
	require.Len(t, errs, 5)
	want := []string{"batch[0].body.metadata: must be a JSON object", "batch[1].body.id: is required", "batch[2].type: unknown event type", "batch[3].body.name: must be a string", "batch[4].body: must be a JSON object"}
	for i, w := range want {
		assert.Contains(t, errs[i].Message, w)
		assert.Equal(t, 400, errs[i].Status)
	}
	for _, bad := range []string{``, `[]`, `{"batch":3}`} {
		_, _, err := DecodeIngestion([]byte(bad))
		assert.ErrorIs(t, err, ErrBody, bad)
	}
}

func TestObservationWithoutTraceCreateIsEmittedOnTimeout(t *testing.T) {
	in := NewIngester(time.Minute, 100)
	events, _, err := DecodeIngestion([]byte(`{"batch":[{"id":"a","type":"generation-create","body":{"id":"g","traceId":"t","model":"m","startTime":"2026-01-01T00:00:00Z","endTime":"2026-01-01T00:00:01Z","usage":{"promptTokens":3,"completionTokens":1}}}]}`))
	require.NoError(t, err)
	p := in.Plan(events)
	assert.Zero(t, p.Build().SpanCount(), "waits for the trace-create")
	p.Commit(t0)
	expired := in.Expired(t0.Add(2 * time.Minute))
	require.Len(t, expired, 1)
	td := in.BuildObservations(expired)
	s := slices.Collect(spaniter.All(td))[0]
	assert.Equal(t, "chat m", s.Name())
	u, _ := genai.UsageFromMap(s.Attributes())
	assert.Equal(t, genai.Usage{Input: 3, Output: 1}, u)
}

func TestOTLPDecodeErrors(t *testing.T) {
	_, err := DecodeOTLP("text/plain", []byte("x"))
	assert.ErrorIs(t, err, ErrBody)
	_, err = DecodeOTLP("application/json", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`))
	assert.ErrorIs(t, err, ErrBody)
	_, err = DecodeOTLP("application/x-protobuf", []byte{0x0a, 0xff})
	assert.ErrorIs(t, err, ErrBody)
}

// The flat fast path and encoding/json agree on every shape.
func TestUsageDetailsFastPathMatchesDecoder(t *testing.T) {
	for _, s := range []string{
		`{"input":70,"input_cached_tokens":30,"output":15,"output_reasoning_tokens":5,"total":120}`,
		` { "input" : 1 , "cache_creation_input_tokens":2 } `,
		`{}`,
		`{"input":1.5}`,
		`{"input":"8"}`,
		`{"prompt_tokens":100,"completion_tokens":9}`,
		`{"in\"put":3}`,
		`{"input":1,"input":2}`,
		`{"in\u0070ut":3,"output":1}`,
		`{"input":9223372036854775807}`,
		`{"input":99999999999999999999}`,
		`{"input":1e2}`,
		`{"input":-0}`,
		`{"a":{"b":1},"input":2}`,
		`{"input":1,}`,
		`{"k0":1,"k1":1,"k2":1,"k3":1,"k4":1,"k5":1,"k6":1,"k7":1,"k8":1,"k9":1,"ka":1,"kb":1,"kc":1,"kd":1,"ke":1,"kf":1,"input":3}`,
		`{"input":-1}`,
		`{"input":1}x`,
		`not json`,
	} {
		// numbers as json.Number, as the receiver decodes every body
		var ud map[string]any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		want, wantOK := genai.Usage{}, false
		if json.Valid([]byte(s)) && dec.Decode(&ud) == nil {
			want, wantOK = usageFromDetails(ud)
		}
		got, ok := usageFromDetailsJSON(s)
		assert.Equal(t, wantOK, ok, s)
		assert.Equal(t, want, got, s)
	}
}

// What @langfuse/langchain + @langfuse/otel exported for
// test/interop/langchain-langfuse.mjs (captured): a LangChain createAgent lead whose task
// tool invokes a second createAgent. Every chain run arrives as a plain span carrying the
// agent's metadata; the agents' own runs become invoke_agent spans, the task tool span
// gets the call id from the ToolMessage it returned, and the subagent's model call is
// attributed to it.
func TestGoldenLangChainOTLP(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "otlp_langchain.json"))
	require.NoError(t, err)
	td, err := DecodeOTLP("application/json", body)
	require.NoError(t, err)
	byID := map[string]ptrace.Span{}
	var agents []string
	for s := range spaniter.All(td) {
		byID[s.SpanID().String()] = s
		if op, _ := s.Attributes().Get(genai.AttrOperationName); op.Str() == genai.OpInvokeAgent {
			agents = append(agents, s.Name())
		}
	}
	assert.ElementsMatch(t, []string{"invoke_agent lead_agent", "invoke_agent researcher"}, agents,
		"graph nodes (model_request, tools, RunnableLambda, __start__) are not agents")
	str := func(s ptrace.Span, k string) string {
		if v, ok := s.Attributes().Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	for _, s := range byID {
		switch s.Name() {
		case "execute_tool task":
			assert.Equal(t, "call_task_1", str(s, genai.AttrToolCallID), "from the ToolMessage output")
		case "invoke_agent researcher":
			assert.Equal(t, "execute_tool task", byID[s.ParentSpanID().String()].Name())
			assert.Equal(t, genai.SubagentCaller("researcher"), str(s, genai.AttrCaller))
		case "chat gpt-4o-mini":
			assert.Equal(t, genai.SubagentCaller("researcher"), str(s, genai.AttrCaller))
			assert.Equal(t, "openai", str(s, genai.AttrProviderName))
		case "chat gpt-4o":
			assert.Empty(t, str(s, genai.AttrCaller), "nothing says who called it: the lead's, decided downstream")
			assert.Equal(t, "openai", str(s, genai.AttrProviderName))
		}
	}
	goldentest.Compare(t, filepath.Join("testdata", "otlp_langchain.expected.yaml"), td)
}

func TestToolCallIDFromContent(t *testing.T) {
	cases := map[string]struct{ out, in string }{
		"call_lc":   {out: `{"lc":1,"type":"constructor","id":["langchain_core","messages","ToolMessage"],"kwargs":{"content":"x","tool_call_id":"call_lc"}}`},
		"call_oai":  {out: `{"role":"tool","tool_call_id":"call_oai","content":"x"}`},
		"toolu_res": {out: `[{"type":"tool_result","tool_use_id":"toolu_res","content":"x"}]`},
		"call_in":   {out: `"plain text"`, in: `{"id":"call_in","type":"function","function":{"name":"task","arguments":"{}"}}`},
		"toolu_in":  {in: `{"type":"tool_use","id":"toolu_in","name":"task","input":{}}`},
		"call_tc":   {in: `{"tool_call":{"id":"call_tc","name":"task","args":{}}}`},
		"":          {out: `"no id here"`, in: `{"prompt":"x","id":"not-a-call"}`},
	}
	for want, c := range cases {
		a := ptrace.NewSpan().Attributes()
		if c.out != "" {
			a.PutStr(lfObsOutput, c.out)
		}
		if c.in != "" {
			a.PutStr(lfObsInput, c.in)
		}
		assert.Equal(t, want, toolCallIDFromContent(a), "out %s in %s", c.out, c.in)
	}
}

// splitSubtree moves the spans under (and including) the span named root out of td
// into a new request, as the SDK's batch exporter does when a long subagent's spans end
// and are exported before the task span around them.
func splitSubtree(td ptrace.Traces, root string) (sub, rest ptrace.Traces) {
	parent := map[string]string{}
	name := map[string]string{}
	for s := range spaniter.All(td) {
		parent[s.SpanID().String()] = s.ParentSpanID().String()
		name[s.SpanID().String()] = s.Name()
	}
	under := func(id string) bool {
		for i := 0; i < 64 && id != ""; i++ {
			if name[id] == root {
				return true
			}
			id = parent[id]
		}
		return false
	}
	sub, rest = ptrace.NewTraces(), ptrace.NewTraces()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
			ss := rss.At(i).ScopeSpans().At(j)
			for _, dst := range []ptrace.Traces{sub, rest} {
				nrs := dst.ResourceSpans().AppendEmpty()
				rss.At(i).Resource().CopyTo(nrs.Resource())
				ss.Scope().CopyTo(nrs.ScopeSpans().AppendEmpty().Scope())
			}
			for k := 0; k < ss.Spans().Len(); k++ {
				s := ss.Spans().At(k)
				dst := rest
				if under(s.SpanID().String()) {
					dst = sub
				}
				last := dst.ResourceSpans().At(dst.ResourceSpans().Len() - 1).ScopeSpans().At(0)
				s.CopyTo(last.Spans().AppendEmpty())
			}
		}
	}
	return sub, rest
}

// The subagent's spans arrive in a request of their own, before its task span: the
// face cannot see that a tool dispatched them, so it names no caller (not lead_agent);
// subagentmerge attributes them from the whole trace (internal/e2e covers that).
func TestLangChainSubagentExportedBeforeItsTask(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "otlp_langchain.json"))
	require.NoError(t, err)
	req := ptraceotlp.NewExportRequest()
	require.NoError(t, req.UnmarshalJSON(body))
	sub, rest := splitSubtree(req.Traces(), "researcher")
	require.Equal(t, 4, sub.SpanCount(), "researcher, __start__, model_request, its chat")
	require.NoError(t, mapOTLP(sub))
	for s := range spaniter.All(sub) {
		_, has := s.Attributes().Get(genai.AttrCaller)
		assert.False(t, has, "%s: the request does not say who called it", s.Name())
		if s.Name() == "invoke_agent researcher" {
			continue
		}
		if op, ok := s.Attributes().Get(genai.AttrOperationName); ok {
			assert.NotEqual(t, genai.OpInvokeAgent, op.Str(), "%s is a node of the researcher, not an agent", s.Name())
		}
	}
	var agents []string
	for s := range spaniter.All(sub) {
		if op, ok := s.Attributes().Get(genai.AttrOperationName); ok && op.Str() == genai.OpInvokeAgent {
			agents = append(agents, s.Name())
		}
	}
	assert.Equal(t, []string{"invoke_agent researcher"}, agents, "named after its lc_agent_name")
	require.NoError(t, mapOTLP(rest))
	for s := range spaniter.All(rest) {
		if s.Name() == "execute_tool task" {
			v, _ := s.Attributes().Get(genai.AttrToolCallID)
			assert.Equal(t, "call_task_1", v.Str())
		}
	}
}

// The in-place decoder reads events as a decoded map would: the last of duplicate keys
// wins, null is absent, escapes are resolved; only the metadata keys the face reads are
// kept; a body with anything after its JSON value is refused.
func TestIngestionDecodingDetails(t *testing.T) {
	body := `{"batch":[{"id":"e1","type":"generation-create","type":"span-create","body":{
		"id":"s1","traceId":"t","name":"t\u00e9st \"q\"","model":null,"startTime":"2026-01-01T00:00:00Z","startTime":1767225601,
		"metadata":{"caller":"subagent:r","run_id":"run-1","other":{"big":[1,2,3]}},"tags":["lead_agent",3,null],"output":null}}],"ignored":1}`
	events, errs, err := DecodeIngestion([]byte(body))
	require.NoError(t, err)
	require.Empty(t, errs)
	require.Len(t, events, 1)
	o := events[0].Obs
	assert.Equal(t, "span", o.Kind)
	assert.Equal(t, `tést "q"`, o.Name)
	assert.Empty(t, o.Model)
	assert.Equal(t, t0.Add(time.Second), o.Start, "the last startTime")
	assert.Equal(t, map[string]any{"caller": "subagent:r", "run_id": "run-1"}, o.Metadata)
	assert.Equal(t, []string{"lead_agent"}, o.Tags)
	assert.Nil(t, o.Output)

	for _, bad := range []string{`{"batch":[]} x`, `{"batch":[]}{}`, `{"batch":[{"id":"a",}]}`, `{"batch":[1e]}`} {
		_, _, err := DecodeIngestion([]byte(bad))
		assert.ErrorIs(t, err, ErrBody, bad)
	}
	_, errs, err = DecodeIngestion([]byte(`{"batch":[7,{"id":"x","type":"span-create","body":{"id":"s","startTime":{}}},{"id":"y","type":"span-create","body":{"id":"s","usage":[],"metadata":[]}}]}`))
	require.NoError(t, err)
	require.Len(t, errs, 3)
	assert.Equal(t, EventError{ID: "unknown", Status: 400, Message: "batch[0]: must be a JSON object"}, errs[0])
	assert.Contains(t, errs[1].Message, "batch[1].body.startTime: not an RFC 3339")
	assert.Equal(t, "batch[2].body.metadata: must be a JSON object", errs[2].Message)
}

// A held observation is stored as JSON (the receiver's `storage`) and read back after a
// restart: it round-trips, and its raw output still names the tool call it answered.
func TestStoredObservationRoundTrip(t *testing.T) {
	events, errs, err := DecodeIngestion([]byte(`{"batch":[{"id":"e","type":"tool-create","body":{"id":"tool-1","traceId":"t","name":"task",
		"startTime":"2026-01-01T00:00:00Z","metadata":{"subagent_status":"completed","x":1},
		"output":{"lc":1,"type":"constructor","id":["langchain_core","messages","ToolMessage"],"kwargs":{"content":"done","tool_call_id":"call_7"}}}}]}`))
	require.NoError(t, err)
	require.Empty(t, errs)
	o := events[0].Obs
	stored, err := json.Marshal(o)
	require.NoError(t, err)
	var back Observation
	require.NoError(t, json.Unmarshal(stored, &back))
	assert.Equal(t, o, back)

	in := NewIngester(time.Minute, 10)
	in.Restore([]Observation{back}, t0)
	td := in.BuildObservations(in.Drain())
	got := map[string]string{}
	for s := range spaniter.All(td) {
		id, _ := s.Attributes().Get(genai.AttrToolCallID)
		st, _ := s.Attributes().Get(genai.AttrSubagentStatus)
		got[id.Str()] = st.Str()
	}
	assert.Equal(t, map[string]string{"call_7": "completed"}, got)
}

// On the OTLP face a contract key the emitter already set wins over what the Langfuse
// keys say; the builder names a model call after its request model, as semconv does.
func TestOTLPEmitterContractKeysWin(t *testing.T) {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	gen := spans.AppendEmpty()
	gen.SetTraceID([16]byte{1})
	gen.SetSpanID([8]byte{1})
	gen.SetName("llm")
	a := gen.Attributes()
	a.PutStr(lfObsType, "generation")
	a.PutStr(lfModel, "gpt-4o-2024-08-06")
	a.PutStr(genai.AttrRequestModel, "gpt-4o")
	a.PutStr(lfSessionID, "session-lf")
	a.PutStr(genai.AttrConversationID, "thread-own")
	a.PutStr(lfObsOutput, `{"tool_calls":[{"id":"call_1"}]}`)
	tool := spans.AppendEmpty()
	tool.SetTraceID([16]byte{1})
	tool.SetSpanID([8]byte{2})
	tool.SetParentSpanID([8]byte{1})
	tool.SetName("search")
	b := tool.Attributes()
	b.PutStr(lfObsType, "tool")
	b.PutStr(lfObsMetaPrefix+"tool_call_id", `"call_meta"`)
	b.PutStr(genai.AttrToolCallID, "call_own")
	b.PutStr(genai.AttrToolType, "extension")

	require.NoError(t, mapOTLP(td))
	str := func(m ptrace.Span, k string) string {
		v, _ := m.Attributes().Get(k)
		return v.AsString()
	}
	assert.Equal(t, "chat gpt-4o", gen.Name(), "named after the request model")
	assert.Equal(t, "gpt-4o", str(gen, genai.AttrRequestModel))
	assert.Equal(t, "gpt-4o-2024-08-06", str(gen, genai.AttrResponseModel), "Langfuse's model fills what the emitter left out")
	assert.Equal(t, "thread-own", str(gen, genai.AttrConversationID))
	assert.Equal(t, ptrace.SpanKindClient, gen.Kind())
	assert.Equal(t, []string{"call_1"}, genai.StringsFromMap(gen.Attributes(), genai.AttrResponseToolCallIDs))
	_, hasOutput := gen.Attributes().Get(lfObsOutput)
	assert.False(t, hasOutput, "content is dropped")
	assert.Equal(t, "execute_tool search", tool.Name())
	assert.Equal(t, "call_own", str(tool, genai.AttrToolCallID))
	assert.Equal(t, "extension", str(tool, genai.AttrToolType))
	assert.Equal(t, "session-lf", str(tool, genai.AttrConversationID), "the trace's session reaches spans without one")
}

// Updates of observations held past max_pending (what a restart could not hand on was
// held again) keep them held, and a new unfinished observation in the same batch goes on
// at once, as one past a full store does.
func TestPlanPastTheBound(t *testing.T) {
	t0 := time.Unix(0, 0)
	in := NewIngester(time.Minute, 1)
	obs := func(id string) Observation {
		return Observation{ID: id, TraceID: "t", Kind: "generation", Created: true}
	}
	in.Hold([]Observation{obs("a"), obs("b")}, t0)
	var p *Plan
	require.NotPanics(t, func() {
		p = in.Plan([]Event{
			{ID: "e1", Update: true, Obs: Observation{ID: "a", TraceID: "t", Name: "x"}},
			{ID: "e2", Update: true, Obs: Observation{ID: "b", TraceID: "t", Name: "y"}},
			{ID: "e3", Obs: obs("c")},
		})
	})
	var parked, evicted []string
	for _, o := range p.Park {
		parked = append(parked, o.ID+"="+o.Name)
	}
	for _, o := range p.Evict {
		evicted = append(evicted, o.ID)
	}
	assert.ElementsMatch(t, []string{"a=x", "b=y"}, parked)
	assert.Equal(t, []string{"c"}, evicted)
	assert.Empty(t, p.Complete)
}
