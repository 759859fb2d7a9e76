package genainormalize

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// view is one span's attributes as the normalisation reads them.
type view struct {
	vals [numSlots]pcommon.Value
	set  [numSlots]bool
	// oiToolCallIDs are OpenInference's flattened output tool-call ids, in order.
	oiToolCallIDs []string
}

type normalizer struct {
	convs convMask
}

// span normalises one span. exclusive says the span's instrumentation scope is known to
// report input tokens without the cache tokens that are part of them.
func (n *normalizer) span(sp ptrace.Span, exclusive bool) {
	attrs := sp.Attributes()
	name := sp.Name()
	// the operation is derived once (genai.Classify), not once per rule
	c := genai.Classify(name, attrs)
	if c.Kind == genai.SpanModelCall {
		var v view
		n.scan(attrs, &v)
		n.modelCall(name, attrs, &v, exclusive)
		return
	}
	if c.Operation != "" {
		return // a semconv span that is not a model call: nothing to map
	}
	if c.Kind == genai.SpanToolCall {
		n.toolCall(attrs)
		return
	}
	if agent, ok := genai.AgentRunNameOf(c, name, attrs); ok {
		attrs.PutStr(genai.AttrOperationName, genai.OpInvokeAgent)
		if _, has := attrs.Get(genai.AttrAgentName); !has && agent != "" {
			attrs.PutStr(genai.AttrAgentName, agent)
		}
	}
}

func (n *normalizer) scan(attrs pcommon.Map, v *view) {
	convs := n.convs | convContract
	attrs.Range(func(k string, val pcommon.Value) bool {
		if ki, ok := keys[k]; ok {
			if ki.conv&convs != 0 {
				if ki.slot <= sOutMsgs && val.Type() == pcommon.ValueTypeStr && val.Str() == "" {
					return true // an empty contract string is as good as absent
				}
				v.vals[ki.slot], v.set[ki.slot] = val, true
			}
			return true
		}
		if convs&convOpenInference != 0 && strings.HasPrefix(k, genai.AttrOIOutputMessagesRoot) && strings.HasSuffix(k, genai.OIToolCallIDSuffix) {
			if id := val.AsString(); id != "" {
				v.oiToolCallIDs = append(v.oiToolCallIDs, id)
			}
		}
		return true
	})
}

func (n *normalizer) modelCall(name string, attrs pcommon.Map, v *view, exclusive bool) {
	if !v.set[sOp] {
		attrs.PutStr(genai.AttrOperationName, modelOperation(name, v))
	}

	in, inFrom, hasIn := v.count(inputSources)
	out, outFrom, hasOut := v.count(outputSources)
	cr, crFrom, hasCR := v.count(cacheReadSources)
	cw, cwFrom, hasCW := v.count(cacheCreationSources)
	rs, rsFrom, hasRS := v.count(reasoningSources)
	// LangChain's usage_metadata details, as LangSmith's export writes them (JSON)
	var det tokenDetails
	if !hasCR || !hasCW || !v.set[sCache1h] {
		det.in = v.details(sInDetails)
	}
	if !hasRS {
		det.out = v.details(sOutDetails)
	}
	if c, ok := det.in.count("cache_read"); ok && !hasCR {
		cr, crFrom, hasCR = c, sInDetails, true
	}
	if c, ok := det.in.count("cache_creation"); ok && !hasCW {
		cw, cwFrom, hasCW = c, sInDetails, true
	}
	if c, ok := det.out.count("reasoning"); ok && !hasRS {
		rs, rsFrom, hasRS = c, sOutDetails, true
	}
	if c, ok := det.in.count("ephemeral_1h_input_tokens"); ok && c > 0 && !v.set[sCache1h] {
		attrs.PutInt(genai.AttrUsageCacheCreat1h, c)
	}
	if hasIn && inFrom != sInput {
		attrs.PutInt(genai.AttrUsageInput, in)
	}
	if hasOut && outFrom != sOutput {
		attrs.PutInt(genai.AttrUsageOutput, out)
	}
	// Detail kinds are written only when non-zero, as every contract writer does
	// (absent reads as 0); the newer cache_write name is copied to cache_creation.
	if hasCR && crFrom != sCacheRead && cr != 0 {
		attrs.PutInt(genai.AttrUsageCacheRead, cr)
	}
	if hasCW && cwFrom != sCacheCreation && cw != 0 {
		attrs.PutInt(genai.AttrUsageCacheCreat, cw)
	}
	if hasRS && rsFrom != sReasoning && rs != 0 {
		attrs.PutInt(genai.AttrUsageReasoning, rs)
	}

	// The contract's input includes its cache parts and its output the reasoning part.
	// A reported input smaller than its own cache parts can only be exclusive; so is any
	// input from an emitter known to report it that way. The reported count is kept.
	if parts := cr + cw; hasIn && parts > 0 && !v.set[sRepIn] && (exclusive || parts > in) {
		attrs.PutInt(genai.AttrUsageReportedInput, in)
		attrs.PutInt(genai.AttrUsageInput, in+parts)
	}
	if hasOut && rs > out && !v.set[sRepOut] {
		attrs.PutInt(genai.AttrUsageReportedOutput, out)
		attrs.PutInt(genai.AttrUsageOutput, out+rs)
	}

	// OpenInference's metadata JSON is decoded at most once, and only when needed.
	var lc lcMetadata
	lcRead := false
	if !v.set[sProvider] {
		p, _ := v.str(providerSources)
		if p == "" {
			lc, lcRead = v.langChainMetadata(), true
			p = lc.Provider
		}
		if p = canonicalProvider(p); p != "" && p != genai.LangChainSystem {
			attrs.PutStr(genai.AttrProviderName, p)
		}
	}
	if !v.set[sReqModel] {
		m, _ := v.str(reqModelSources)
		if m == "" {
			if !lcRead {
				lc = v.langChainMetadata()
			}
			m = lc.ModelName
		}
		if m != "" {
			attrs.PutStr(genai.AttrRequestModel, m)
		}
	}
	if !v.set[sRespModel] {
		if m, _ := v.str(respModelSources); m != "" {
			attrs.PutStr(genai.AttrResponseModel, m)
		}
	}

	// The merge finds a dispatching call by the tool-call ids its response asked for.
	if !v.set[sRespToolIDs] && !v.set[sOutMsgs] {
		ids := v.oiToolCallIDs
		if len(ids) == 0 && v.set[sAIToolCalls] {
			ids = aiSDKToolCallIDs(v.vals[sAIToolCalls].AsString())
		}
		if len(ids) > 0 {
			genai.PutStrings(attrs, genai.AttrResponseToolCallIDs, ids)
		}
	}
}

// modelOperation names a recognised model call that lacks gen_ai.operation.name: the
// operation in a semconv span name, text_completion for OpenLLMetry's completion
// requests, else chat (every convention's default model call).
func modelOperation(name string, v *view) string {
	if head, _, _ := strings.Cut(name, " "); genai.IsModelCall(head) {
		return head
	}
	if v.set[sRequestType] && v.vals[sRequestType].AsString() == "completion" {
		return genai.OpTextCompletion
	}
	return genai.OpChat
}

// toolCall maps a foreign tool span (AI SDK ai.toolCall, OpenInference TOOL, OpenLLMetry
// tool) onto execute_tool with the tool's name and call id, so the merge sees it.
func (n *normalizer) toolCall(attrs pcommon.Map) {
	attrs.PutStr(genai.AttrOperationName, genai.OpExecuteTool)
	if _, has := attrs.Get(genai.AttrToolName); !has {
		if s := n.first(attrs, nameSources); s != "" {
			attrs.PutStr(genai.AttrToolName, s)
		}
	}
	if _, has := attrs.Get(genai.AttrToolCallID); !has {
		if s := n.first(attrs, callIDSources); s != "" {
			attrs.PutStr(genai.AttrToolCallID, s)
		} else if s := n.callIDFromContent(attrs); s != "" {
			attrs.PutStr(genai.AttrToolCallID, s)
		}
	}
}

// callIDFromContent finds the call id in the tool's recorded input or output, when the
// convention has no attribute for it: OpenLLMetry records a tool function's arguments
// (often the tool call itself) and result, OpenInference its input and output values.
func (n *normalizer) callIDFromContent(attrs pcommon.Map) string {
	for _, io := range contentSources {
		if n.convs&io.conv == 0 {
			continue
		}
		out, in := decodeJSONAttr(attrs, io.output), decodeJSONAttr(attrs, io.input)
		if out == nil && in == nil {
			continue
		}
		if id := genai.ToolCallIDOf(out, in); id != "" {
			return id
		}
	}
	return ""
}

func (n *normalizer) first(attrs pcommon.Map, srcs []sourceKey) string {
	for _, s := range srcs {
		if n.convs&s.conv == 0 {
			continue
		}
		if v, ok := attrs.Get(s.key); ok {
			if str := v.AsString(); str != "" {
				return str
			}
		}
	}
	return ""
}

// count returns the first source that holds a token count, and which one it was.
func (v *view) count(srcs []slot) (int64, slot, bool) {
	for _, s := range srcs {
		if v.set[s] {
			if c, ok := genai.IntValue(v.vals[s]); ok && c >= 0 {
				return c, s, true
			}
		}
	}
	return 0, 0, false
}

// str returns the first non-empty string source.
func (v *view) str(srcs []slot) (string, slot) {
	for _, s := range srcs {
		if v.set[s] {
			if str := v.vals[s].AsString(); str != "" {
				return str, s
			}
		}
	}
	return "", 0
}

// reportsExclusiveInput names instrumentation scopes known to report
// gen_ai.usage.input_tokens without the cache tokens that are part of it: OpenLLMetry-JS's
// Anthropic instrumentation up to 0.27.0 passed Anthropic's input_tokens through as sent.
func reportsExclusiveInput(scope, version string) bool {
	return scope == genai.TraceloopAnthropicScope && versionAtMost(version, [3]int{0, 27, 0})
}

// versionAtMost compares a "v1.2.3[-pre]" version with max; unparsable is false.
func versionAtMost(version string, max [3]int) bool {
	version = strings.TrimPrefix(version, "v")
	version, _, _ = strings.Cut(version, "-")
	parts := strings.Split(version, ".")
	if len(parts) != 3 {
		return false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		if n != max[i] {
			return n < max[i]
		}
	}
	return true
}
