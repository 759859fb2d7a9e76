// Package langfuse decodes what the Langfuse SDKs send: OTLP/HTTP spans carrying
// langfuse.* attributes (POST /api/public/otel/v1/traces, SDK v4+) and the legacy
// batch of create/update events (POST /api/public/ingestion, SDK v2/v3), and maps both
// to the contract's spans.
package langfuse

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

// ErrBody is a request-level decoding error.
var ErrBody = errors.New("request body")

// DecodeOTLP parses an OTLP/HTTP export request (protobuf or JSON, already
// decompressed) and maps langfuse.* attributes onto the contract in place. Like
// Langfuse, a body that does not parse is refused as a whole.
func DecodeOTLP(contentType string, body []byte) (ptrace.Traces, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	req := ptraceotlp.NewExportRequest()
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		if err := req.UnmarshalProto(body); err != nil {
			return ptrace.Traces{}, fmt.Errorf("%w: invalid OTLP protobuf: %v", ErrBody, err)
		}
	case "application/json":
		if err := req.UnmarshalJSON(body); err != nil {
			return ptrace.Traces{}, fmt.Errorf("%w: invalid OTLP JSON: %v", ErrBody, err)
		}
	default:
		return ptrace.Traces{}, fmt.Errorf("%w: Content-Type must be application/x-protobuf or application/json, got %q", ErrBody, contentType)
	}
	td := req.Traces()
	MapOTLP(td)
	return td, nil
}

// Langfuse attribute keys read by MapOTLP (Langfuse's own names; see
// docs/langfuse.md#mapping).
const (
	lfObsType       = "langfuse.observation.type"
	lfModel         = "langfuse.observation.model.name"
	lfUsageDetails  = "langfuse.observation.usage_details"
	lfObsMetadata   = "langfuse.observation.metadata"
	lfObsMetaPrefix = "langfuse.observation.metadata."
	lfObsOutput     = "langfuse.observation.output"
	lfObsInput      = "langfuse.observation.input"
	lfTraceInput    = "langfuse.trace.input"
	lfTraceOutput   = "langfuse.trace.output"
	lfSessionID     = "langfuse.session.id"
	lfUserID        = "langfuse.user.id"
	lfTraceName     = "langfuse.trace.name"
	lfTraceMetaPref = "langfuse.trace.metadata."
	otelSessionID   = "session.id"
	otelUserID      = "user.id"
)

// MapOTLP rewrites Langfuse-SDK spans into contract spans:
//   - observation type generation → chat (name "chat <model>", CLIENT), agent →
//     invoke_agent, tool → execute_tool; spans that already carry
//     gen_ai.operation.name keep it;
//   - langfuse.observation.model.name → gen_ai.request.model / response.model;
//   - langfuse.observation.usage_details (Langfuse's exclusive buckets: input without
//     cache, output without reasoning) → gen_ai.usage.* inclusive (docs/contract.md#usage);
//   - session → gen_ai.conversation.id, user → enduser.id, copied to every span of the
//     trace (the SDK sets them on some spans only);
//   - metadata caller / tool_call_id / run_id / response_tool_call_ids → agentmeter keys;
//     tool call ids a generation's output asked for → agentmeter.response.tool_call_ids;
//   - prompt and completion content (langfuse.*.input/output) is dropped: the contract
//     keeps content off unless the emitter opts in with gen_ai.*.messages.
//
// Span and trace ids are kept: they are the client's own, so a resend is the same span.
func MapOTLP(td ptrace.Traces) {
	session := map[pcommon.TraceID]string{}
	user := map[pcommon.TraceID]string{}
	forEachSpan(td, func(s ptrace.Span) {
		a := s.Attributes()
		if v := firstStr(a, lfSessionID, otelSessionID, genai.AttrConversationID); v != "" {
			session[s.TraceID()] = v
		}
		if v := firstStr(a, lfUserID, otelUserID, genai.AttrEndUserID); v != "" {
			user[s.TraceID()] = v
		}
	})
	// tool observations of the request: a LangChain run directly under one is a subagent
	tools := map[pcommon.SpanID]bool{}
	forEachSpan(td, func(s ptrace.Span) {
		a := s.Attributes()
		if firstStr(a, genai.AttrOperationName) == genai.OpExecuteTool || strings.EqualFold(firstStr(a, lfObsType), "tool") {
			tools[s.SpanID()] = true
		}
	})
	forEachSpan(td, func(s ptrace.Span) {
		mapSpan(s, session[s.TraceID()], user[s.TraceID()], tools[s.ParentSpanID()])
	})
	inheritCallers(td)
}

// inheritCallers gives every span an agentmeter.run.id (its own, else the trace's in
// the request, else the trace id) and an agentmeter.caller when the request says one:
// its own, else its nearest ancestor's in the request (a subagent's invoke_agent under a
// tool span is subagent:<name>). A span whose chain says none keeps none: the SDK
// exports a long run in several batches (a subagent's spans end, and leave, before its
// task span), so "no caller in this request" is not "the lead's"; subagentmerge
// attributes it from the whole trace, and an uncalled span counts as the lead's.
func inheritCallers(td ptrace.Traces) {
	type node struct {
		parent pcommon.SpanID
		span   ptrace.Span
	}
	nodes := map[pcommon.SpanID]node{}
	forEachSpan(td, func(s ptrace.Span) { nodes[s.SpanID()] = node{s.ParentSpanID(), s} })
	var resolve func(id pcommon.SpanID, depth int) string
	resolve = func(id pcommon.SpanID, depth int) string {
		n, ok := nodes[id]
		if !ok || depth > 256 {
			return ""
		}
		a := n.span.Attributes()
		if c := firstStr(a, genai.AttrCaller); c != "" {
			return c
		}
		if firstStr(a, genai.AttrOperationName) == genai.OpInvokeAgent {
			if p, ok := nodes[n.parent]; ok && firstStr(p.span.Attributes(), genai.AttrOperationName) == genai.OpExecuteTool {
				c := genai.SubagentCaller(firstStr(a, genai.AttrAgentName))
				a.PutStr(genai.AttrCaller, c)
				return c
			}
		}
		c := resolve(n.parent, depth+1)
		if c != "" {
			a.PutStr(genai.AttrCaller, c)
		}
		return c
	}
	runs := map[pcommon.TraceID]string{}
	forEachSpan(td, func(s ptrace.Span) {
		if r := firstStr(s.Attributes(), genai.AttrRunID); r != "" {
			runs[s.TraceID()] = r
		}
	})
	forEachSpan(td, func(s ptrace.Span) {
		a := s.Attributes()
		resolve(s.SpanID(), 0)
		if _, has := a.Get(genai.AttrRunID); !has {
			r := runs[s.TraceID()]
			if r == "" {
				r = s.TraceID().String()
			}
			a.PutStr(genai.AttrRunID, r)
		}
	})
}

func forEachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				f(spans.At(k))
			}
		}
	}
}

func firstStr(m pcommon.Map, keys ...string) string {
	for _, k := range keys {
		if v, ok := m.Get(k); ok {
			if s := v.AsString(); s != "" {
				return s
			}
		}
	}
	return ""
}

// metaKey is a metadata key read by MapOTLP: its name in the JSON object of
// langfuse.observation.metadata and its flattened attribute key
// (langfuse.observation.metadata.<name>), built once so a lookup allocates nothing.
type metaKey struct{ name, attr string }

func newMetaKey(name string) metaKey { return metaKey{name, lfObsMetaPrefix + name} }

var (
	mkCaller         = newMetaKey("caller")
	mkRunID          = newMetaKey("run_id")
	mkToolCallID     = newMetaKey("tool_call_id")
	mkResponseCalls  = newMetaKey("response_tool_call_ids")
	mkLCAgentName    = newMetaKey("lc_agent_name")
	mkLangGraphNode  = newMetaKey("langgraph_node")
	mkLSIntegration  = newMetaKey("ls_integration")
	mkLSProviderName = newMetaKey("ls_provider")
)

// metaValue reads a metadata key from langfuse.observation.metadata.<k> or from the
// JSON object in langfuse.observation.metadata.
func metaValue(a pcommon.Map, meta map[string]any, k metaKey) string {
	key := k.name
	if v, ok := a.Get(k.attr); ok {
		s := v.AsString()
		var js string
		if json.Unmarshal([]byte(s), &js) == nil { // the JS SDK JSON-encodes values
			return js
		}
		return s
	}
	if s, ok := meta[key].(string); ok {
		return s
	}
	return ""
}

// langchainAgent reports whether a generic span observation is a LangChain/LangGraph
// agent's own run, and the agent's name. @langfuse/langchain sends every chain run as a
// plain span and copies the agent's metadata (lc_agent_name, langgraph_node, ...) onto
// every run inside it, so the metadata alone says "inside agent X", not "is agent X".
// The agent's own run is the one named after it (createAgent names its graph run
// lc_agent_name), the root of a LangChain trace, or a run directly under a tool call
// (a subagent invoked by a tool, as the LangSmith face decides too). Graph nodes
// (model_request, tools, RunnableLambda, __start__) are none of these.
func langchainAgent(s ptrace.Span, a pcommon.Map, meta map[string]any, parentIsTool bool) (string, bool) {
	switch strings.ToLower(firstStr(a, lfObsType)) {
	case "", "span", "chain":
	default:
		return "", false
	}
	lc := metaValue(a, meta, mkLCAgentName)
	if lc == "" && metaValue(a, meta, mkLangGraphNode) == "" && !strings.HasPrefix(metaValue(a, meta, mkLSIntegration), "langchain") {
		return "", false
	}
	name := s.Name()
	if name == "" {
		name = lc
	}
	if name == "" {
		return "", false
	}
	if (lc != "" && s.Name() == lc) || s.ParentSpanID().IsEmpty() || parentIsTool {
		return name, true
	}
	return "", false
}

// toolCallIDFromContent reads the call id a tool observation answered from its output
// (a LangChain ToolMessage) or input (the tool call), before the content is dropped.
func toolCallIDFromContent(a pcommon.Map) string {
	decode := func(key string) any {
		v, ok := a.Get(key)
		if !ok {
			return nil
		}
		var out any
		if json.Unmarshal([]byte(v.AsString()), &out) != nil {
			return nil
		}
		return out
	}
	return genai.ToolCallIDOf(decode(lfObsOutput), decode(lfObsInput))
}

func mapSpan(s ptrace.Span, session, user string, parentIsTool bool) {
	a := s.Attributes()
	var meta map[string]any
	if v, ok := a.Get(lfObsMetadata); ok {
		_ = json.Unmarshal([]byte(v.AsString()), &meta)
	}
	if session != "" {
		if _, has := a.Get(genai.AttrConversationID); !has {
			a.PutStr(genai.AttrConversationID, session)
		}
	}
	if user != "" {
		if _, has := a.Get(genai.AttrEndUserID); !has {
			a.PutStr(genai.AttrEndUserID, user)
		}
	}
	caller := firstStr(a, genai.AttrCaller)
	if caller == "" {
		caller = metaValue(a, meta, mkCaller)
	}
	if caller == "" {
		caller = genai.CallerFromTags(genai.StringsFromMap(a, "langfuse.trace.tags"))
	}
	if caller != "" {
		a.PutStr(genai.AttrCaller, caller)
	}
	if _, has := a.Get(genai.AttrRunID); !has {
		if v := metaValue(a, meta, mkRunID); v != "" {
			a.PutStr(genai.AttrRunID, v)
		}
	}
	model := firstStr(a, lfModel, genai.AttrResponseModel, genai.AttrRequestModel)
	op := firstStr(a, genai.AttrOperationName)
	if op == "" {
		switch strings.ToLower(firstStr(a, lfObsType)) {
		case "generation":
			op = genai.OpChat
		case "agent":
			op = genai.OpInvokeAgent
		case "tool":
			op = genai.OpExecuteTool
		}
		if op == "" {
			if name, ok := langchainAgent(s, a, meta, parentIsTool); ok {
				op = genai.OpInvokeAgent
				a.PutStr(genai.AttrAgentName, name)
			}
		}
		if op != "" {
			a.PutStr(genai.AttrOperationName, op)
		}
	}
	switch op {
	case genai.OpChat:
		s.SetName(genai.SpanName(genai.OpChat, model))
		s.SetKind(ptrace.SpanKindClient)
		if model != "" {
			if _, has := a.Get(genai.AttrRequestModel); !has {
				a.PutStr(genai.AttrRequestModel, model)
			}
			if _, has := a.Get(genai.AttrResponseModel); !has {
				a.PutStr(genai.AttrResponseModel, model)
			}
		}
		if _, has := a.Get(genai.AttrProviderName); !has {
			// LangChain's chat models name their provider in the run metadata
			if p := metaValue(a, meta, mkLSProviderName); p != "" {
				a.PutStr(genai.AttrProviderName, p)
			}
		}
		if v, ok := a.Get(lfUsageDetails); ok {
			if u, ok := usageFromDetailsJSON(v.AsString()); ok {
				genai.PutUsage(a, u)
			}
		}
		if _, has := a.Get(genai.AttrResponseToolCallIDs); !has {
			ids := metaStrings(a, meta, mkResponseCalls)
			if len(ids) == 0 {
				if v, ok := a.Get(lfObsOutput); ok {
					var out any
					if json.Unmarshal([]byte(v.AsString()), &out) == nil {
						ids = genai.ResponseToolCallIDs(out)
					}
				}
			}
			if len(ids) > 0 {
				genai.PutStrings(a, genai.AttrResponseToolCallIDs, ids)
			}
		}
	case genai.OpExecuteTool:
		name := firstStr(a, genai.AttrToolName)
		if name == "" {
			name = s.Name()
			a.PutStr(genai.AttrToolName, name)
		}
		s.SetName(genai.SpanName(genai.OpExecuteTool, name))
		if _, has := a.Get(genai.AttrToolType); !has {
			a.PutStr(genai.AttrToolType, genai.ToolTypeFunction)
		}
		if _, has := a.Get(genai.AttrToolCallID); !has {
			id := metaValue(a, meta, mkToolCallID)
			if id == "" {
				id = toolCallIDFromContent(a)
			}
			if id != "" {
				a.PutStr(genai.AttrToolCallID, id)
			}
		}
	case genai.OpInvokeAgent:
		name := firstStr(a, genai.AttrAgentName)
		if name == "" {
			name = s.Name()
			a.PutStr(genai.AttrAgentName, name)
		}
		s.SetName(genai.SpanName(genai.OpInvokeAgent, name))
		if _, has := a.Get(genai.AttrToolCallID); !has {
			if id := metaValue(a, meta, mkToolCallID); id != "" {
				a.PutStr(genai.AttrToolCallID, id)
			}
		}
	}
	for _, k := range []string{lfObsInput, lfObsOutput, lfTraceInput, lfTraceOutput} {
		a.Remove(k)
	}
}

func metaStrings(a pcommon.Map, meta map[string]any, k metaKey) []string {
	key := k.name
	if v, ok := a.Get(k.attr); ok {
		var arr []string
		if json.Unmarshal([]byte(v.AsString()), &arr) == nil {
			return arr
		}
	}
	if arr, ok := meta[key].([]any); ok {
		var out []string
		for _, e := range arr {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// UsageFromDetails converts Langfuse usage details to the contract's inclusive usage.
// Langfuse buckets are exclusive (input excludes cache, output excludes reasoning) and
// each key is priced on its own; the contract counts input with cache and output with
// reasoning. OpenAI-shaped objects (prompt_tokens/completion_tokens, or the Responses
// input_tokens/output_tokens with *_details) are already inclusive, as Langfuse itself
// treats them. ok is false when no token count is present.
func UsageFromDetails(ud map[string]any) (genai.Usage, bool) {
	n := func(k string) int64 { v, _ := record.Count(ud[k]); return v }
	has := func(k string) bool { _, ok := record.Count(ud[k]); return ok }
	var u genai.Usage
	if has("prompt_tokens") || has("completion_tokens") {
		u.Input, u.Output = n("prompt_tokens"), n("completion_tokens")
		if d, ok := ud["prompt_tokens_details"].(map[string]any); ok {
			u.CacheRead, _ = record.Count(d["cached_tokens"])
		}
		if d, ok := ud["completion_tokens_details"].(map[string]any); ok {
			u.Reasoning, _ = record.Count(d["reasoning_tokens"])
		}
		return u, true
	}
	if (has("input_tokens") || has("output_tokens")) && !has("input") && !has("output") {
		u.Input, u.Output = n("input_tokens"), n("output_tokens")
		if d, ok := ud["input_tokens_details"].(map[string]any); ok {
			u.CacheRead, _ = record.Count(d["cached_tokens"])
		}
		if d, ok := ud["output_tokens_details"].(map[string]any); ok {
			u.Reasoning, _ = record.Count(d["reasoning_tokens"])
		}
		return u, true
	}
	var acc bucketAcc
	for k, v := range ud {
		if c, ok := record.Count(v); ok {
			acc.add(k, c)
		}
	}
	return acc.u, acc.found
}

// bucketAcc folds Langfuse's exclusive usage keys into the contract's inclusive usage.
type bucketAcc struct {
	u     genai.Usage
	found bool
}

func (b *bucketAcc) add(k string, c int64) {
	b.found = true
	u := &b.u
	switch {
	case k == "total":
		// derived: the contract has no total attribute
	case k == "input_cached_tokens" || k == "input_cache_read" || k == "cache_read_input_tokens" || k == "input_cached":
		u.CacheRead += c
		u.Input += c
	case strings.HasPrefix(k, "input_cache_creation") || k == "cache_creation_input_tokens" || k == "input_cache_write":
		u.CacheCreation += c
		u.Input += c
	case k == "output_reasoning_tokens" || k == "output_reasoning":
		u.Reasoning += c
		u.Output += c
	case k == "input" || strings.HasPrefix(k, "input_"):
		u.Input += c
	case k == "output" || strings.HasPrefix(k, "output_"):
		u.Output += c
	}
}

// usageFromDetailsJSON is UsageFromDetails for the JSON string of
// langfuse.observation.usage_details. The SDKs send a flat object of counts; that
// common case is scanned without building a map (it is most of this face's cost),
// anything else goes through encoding/json.
func usageFromDetailsJSON(s string) (genai.Usage, bool) {
	if u, ok, flat := scanFlatCounts(s); flat {
		return u, ok
	}
	var ud map[string]any
	if json.Unmarshal([]byte(s), &ud) != nil {
		return genai.Usage{}, false
	}
	return UsageFromDetails(ud)
}

// scanFlatCounts reads {"key": <non-negative integer>, ...} with plain keys. flat is
// false for anything else (nested objects, escapes, strings, floats, OpenAI-shaped
// keys), and the caller falls back to the full decoder.
func scanFlatCounts(s string) (u genai.Usage, ok, flat bool) {
	var acc bucketAcc
	i := skipWS(s, 0)
	if i >= len(s) || s[i] != '{' {
		return u, false, false
	}
	i = skipWS(s, i+1)
	if i < len(s) && s[i] == '}' {
		return u, false, skipWS(s, i+1) == len(s)
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return u, false, false
		}
		j := i + 1
		for j < len(s) && s[j] != '"' && s[j] != '\\' {
			j++
		}
		if j >= len(s) || s[j] != '"' {
			return u, false, false
		}
		key := s[i+1 : j]
		switch key {
		case "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens":
			return u, false, false // OpenAI shapes are inclusive: the slow path knows them
		}
		i = skipWS(s, j+1)
		if i >= len(s) || s[i] != ':' {
			return u, false, false
		}
		i = skipWS(s, i+1)
		start := i
		var n int64
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if n > (1<<62)/10 {
				return u, false, false
			}
			n = n*10 + int64(s[i]-'0')
			i++
		}
		if i == start {
			return u, false, false
		}
		acc.add(key, n)
		i = skipWS(s, i)
		if i < len(s) && s[i] == ',' {
			i = skipWS(s, i+1)
			continue
		}
		if i < len(s) && s[i] == '}' && skipWS(s, i+1) == len(s) {
			return acc.u, acc.found, true
		}
		return u, false, false
	}
}

func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
