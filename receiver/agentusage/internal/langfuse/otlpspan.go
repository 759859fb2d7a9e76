package langfuse

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

// metaKey is a metadata key read by mapOTLP: its name in the JSON object of
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

// otlpMetaKeys are the names of the metadata keys mapOTLP reads: only these are decoded
// from the JSON object (LangChain's metadata is large and mostly of no interest).
var otlpMetaKeys = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range []metaKey{mkCaller, mkRunID, mkToolCallID, mkResponseCalls, mkLCAgentName, mkLangGraphNode, mkLSIntegration, mkLSProviderName} {
		m[k.name] = true
	}
	return m
}()

// decodeJSON decodes an attribute's JSON text; ok is false when it is not JSON.
func decodeJSON(s string) (any, bool) {
	d, ok := rawjson.Parse([]byte(s))
	if !ok {
		return nil, false
	}
	return rawjson.Value(d.Root()), true
}

// decodeMeta reads the keys mapOTLP uses from the JSON object in
// langfuse.observation.metadata; nil when it is not one.
func decodeMeta(s string) map[string]any {
	d, ok := rawjson.Parse([]byte(s))
	if !ok {
		return nil
	}
	var meta map[string]any
	d.Fields(d.Root(), func(k, v []byte) bool {
		if otlpMetaKeys[string(k)] {
			if meta == nil {
				meta = map[string]any{}
			}
			meta[string(k)] = rawjson.Value(v)
		}
		return true
	})
	return meta
}

// metaValue reads a metadata key from langfuse.observation.metadata.<k> or from the
// JSON object in langfuse.observation.metadata.
func metaValue(a pcommon.Map, meta map[string]any, k metaKey) string {
	key := k.name
	if v, ok := a.Get(k.attr); ok {
		s := v.AsString()
		if js, ok := decodeJSON(s); ok { // the JS SDK JSON-encodes values
			if js, ok := js.(string); ok {
				return js
			}
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
	switch strings.ToLower(genai.StringAttr(a, lfObsType)) {
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
		out, _ := decodeJSON(v.AsString())
		return out
	}
	return genai.ToolCallIDOf(decode(lfObsOutput), decode(lfObsInput))
}

// decideSpan decides what one Langfuse-SDK span is. Every field starts from the
// contract key the emitter set, if any; Langfuse's own keys fill the rest.
func decideSpan(s ptrace.Span, session, user string, parentIsTool bool) record.Record {
	a := s.Attributes()
	var meta map[string]any
	if v, ok := a.Get(lfObsMetadata); ok {
		meta = decodeMeta(v.AsString())
	}
	rec := record.Record{Kind: record.Step, Name: s.Name(), SpanKind: s.Kind()}
	rec.ThreadID = genai.StringAttr(a, genai.AttrConversationID)
	if rec.ThreadID == "" {
		rec.ThreadID = session
	}
	rec.UserID = genai.StringAttr(a, genai.AttrEndUserID)
	if rec.UserID == "" {
		rec.UserID = user
	}
	rec.Caller = genai.StringAttr(a, genai.AttrCaller)
	if rec.Caller == "" {
		rec.Caller = metaValue(a, meta, mkCaller)
	}
	if rec.Caller == "" {
		rec.Caller = genai.CallerFromTags(genai.StringsFromMap(a, "langfuse.trace.tags"))
	}
	rec.RunID = genai.StringAttr(a, genai.AttrRunID)
	if rec.RunID == "" {
		rec.RunID = metaValue(a, meta, mkRunID)
	}
	op := genai.StringAttr(a, genai.AttrOperationName)
	lcName := ""
	if op == "" {
		switch strings.ToLower(genai.StringAttr(a, lfObsType)) {
		case "generation":
			op = genai.OpChat
		case "agent":
			op = genai.OpInvokeAgent
		case "tool":
			op = genai.OpExecuteTool
		default:
			if name, ok := langchainAgent(s, a, meta, parentIsTool); ok {
				op, lcName = genai.OpInvokeAgent, name
			}
		}
	}
	switch op {
	case genai.OpChat:
		rec.Kind = record.ModelCall
		rec.Operation = op
		rec.SpanKind = ptrace.SpanKindClient
		model := genai.FirstStringAttr(a, lfModel, genai.AttrResponseModel, genai.AttrRequestModel)
		if rec.RequestModel = genai.StringAttr(a, genai.AttrRequestModel); rec.RequestModel == "" {
			rec.RequestModel = model
		}
		if rec.ResponseModel = genai.StringAttr(a, genai.AttrResponseModel); rec.ResponseModel == "" {
			rec.ResponseModel = model
		}
		if rec.Provider = genai.StringAttr(a, genai.AttrProviderName); rec.Provider == "" {
			// LangChain's chat models name their provider in the run metadata
			rec.Provider = metaValue(a, meta, mkLSProviderName)
		}
		if v, ok := a.Get(lfUsageDetails); ok {
			rec.Usage, rec.HasUsage = usageFromDetailsJSON(v.AsString())
		}
		if _, has := a.Get(genai.AttrResponseToolCallIDs); !has { // else the emitter's stay
			rec.ResponseToolCallIDs = metaStrings(a, meta, mkResponseCalls)
			if len(rec.ResponseToolCallIDs) == 0 {
				if v, ok := a.Get(lfObsOutput); ok {
					if out, ok := decodeJSON(v.AsString()); ok {
						rec.ResponseToolCallIDs = genai.ResponseToolCallIDs(out)
					}
				}
			}
		}
	case genai.OpExecuteTool:
		rec.Kind = record.ToolCall
		if name := genai.StringAttr(a, genai.AttrToolName); name != "" {
			rec.Name = name
		}
		rec.ToolType = genai.StringAttr(a, genai.AttrToolType)
		rec.SubagentStatus = genai.StringAttr(a, genai.AttrSubagentStatus)
		if rec.ToolCallID = genai.StringAttr(a, genai.AttrToolCallID); rec.ToolCallID == "" {
			rec.ToolCallID = metaValue(a, meta, mkToolCallID)
		}
		if rec.ToolCallID == "" {
			rec.ToolCallID = toolCallIDFromContent(a)
		}
	case genai.OpInvokeAgent:
		rec.Kind = record.AgentRun
		switch name := genai.StringAttr(a, genai.AttrAgentName); {
		case name != "":
			rec.Name = name
		case lcName != "":
			rec.Name = lcName
		}
		rec.AgentID = genai.StringAttr(a, genai.AttrAgentID)
		if rec.ToolCallID = genai.StringAttr(a, genai.AttrToolCallID); rec.ToolCallID == "" {
			rec.ToolCallID = metaValue(a, meta, mkToolCallID)
		}
	}
	return rec
}

func metaStrings(a pcommon.Map, meta map[string]any, k metaKey) []string {
	key := k.name
	if v, ok := a.Get(k.attr); ok {
		if arr, ok := stringArray(v.AsString()); ok {
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

// stringArray reads a JSON array of strings (null is an empty one); ok is false for
// anything else.
func stringArray(s string) ([]string, bool) {
	v, ok := decodeJSON(s)
	if !ok {
		return nil, false
	}
	if v == nil {
		return nil, true
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}
