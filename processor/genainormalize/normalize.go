package genainormalize

import (
	"encoding/json"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// convMask is a set of conventions; bit i is allConventions[i]. convContract (the
// contract's own keys) is always read.
type convMask uint8

const (
	convSemconv convMask = 1 << iota
	convOpenLLMetry
	convOpenInference
	convAISDK
	convLangChain
	convContract
)

// slot is one attribute the normalisation reads. A span's attributes are scanned once
// into a view indexed by slot, so each rule below is an array lookup, not a Map.Get (a
// linear search over the span's attributes).
type slot uint8

const (
	// contract keys: present means "the emitter said it", never overwritten
	sOp slot = iota
	sInput
	sOutput
	sCacheRead
	sCacheCreation
	sCacheWrite
	sReasoning
	sProvider
	sReqModel
	sRespModel
	sRepIn
	sRepOut
	sRespToolIDs
	sOutMsgs
	// older semconv
	sSystem
	sPrompt
	sCompletion
	// OpenLLMetry
	sLLMPrompt
	sLLMCompletion
	sCacheReadFlat
	sCacheCreationFlat
	sReasoningFlat
	sRequestType
	// OpenInference
	sOIPrompt
	sOICompletion
	sOICacheRead
	sOICacheWrite
	sOIReasoning
	sOIModel
	sOIReqModel
	sOIRespModel
	sOIProvider
	sOISystem
	sOIMetadata
	// AI SDK
	sAIInput
	sAIOutput
	sAIPrompt
	sAICompletion
	sAICacheRead
	sAICached
	sAICacheWrite
	sAIOutReasoning
	sAIReasoning
	sAIModelID
	sAIProvider
	sAIRespModel
	sAIToolCalls
	// LangChain metadata, in precedence order
	sLSProviderLS
	sLSProviderLF
	sLSProviderMeta
	sLSProvider
	sLSModelLS
	sLSModelLF
	sLSModelMeta
	sLSModel
	sInDetails
	sOutDetails
	sCache1h // contract's 1-hour cache-write part
	numSlots
)

type keyInfo struct {
	slot slot
	conv convMask
}

// keys maps every attribute name the normalisation reads on model-call spans to its slot.
var keys = map[string]keyInfo{
	genai.AttrOperationName:       {sOp, convContract},
	genai.AttrUsageInput:          {sInput, convContract},
	genai.AttrUsageOutput:         {sOutput, convContract},
	genai.AttrUsageCacheRead:      {sCacheRead, convContract},
	genai.AttrUsageCacheCreat:     {sCacheCreation, convContract},
	genai.AttrUsageCacheWrite:     {sCacheWrite, convContract},
	genai.AttrUsageReasoning:      {sReasoning, convContract},
	genai.AttrProviderName:        {sProvider, convContract},
	genai.AttrRequestModel:        {sReqModel, convContract},
	genai.AttrResponseModel:       {sRespModel, convContract},
	genai.AttrUsageReportedInput:  {sRepIn, convContract},
	genai.AttrUsageReportedOutput: {sRepOut, convContract},
	genai.AttrResponseToolCallIDs: {sRespToolIDs, convContract},
	genai.AttrOutputMessages:      {sOutMsgs, convContract},

	genai.AttrSystem:          {sSystem, convSemconv},
	genai.AttrUsagePrompt:     {sPrompt, convSemconv},
	genai.AttrUsageCompletion: {sCompletion, convSemconv},

	genai.AttrLLMUsagePrompt:         {sLLMPrompt, convOpenLLMetry},
	genai.AttrLLMUsageCompletion:     {sLLMCompletion, convOpenLLMetry},
	genai.AttrUsageCacheReadFlat:     {sCacheReadFlat, convOpenLLMetry},
	genai.AttrUsageCacheCreationFlat: {sCacheCreationFlat, convOpenLLMetry},
	genai.AttrUsageReasoningFlat:     {sReasoningFlat, convOpenLLMetry},
	genai.AttrLLMRequestType:         {sRequestType, convOpenLLMetry},

	genai.AttrOIPromptTokens:      {sOIPrompt, convOpenInference},
	genai.AttrOICompletionTokens:  {sOICompletion, convOpenInference},
	genai.AttrOICacheRead:         {sOICacheRead, convOpenInference},
	genai.AttrOICacheWrite:        {sOICacheWrite, convOpenInference},
	genai.AttrOIReasoning:         {sOIReasoning, convOpenInference},
	genai.AttrOIModelName:         {sOIModel, convOpenInference},
	genai.AttrOIRequestModelName:  {sOIReqModel, convOpenInference},
	genai.AttrOIResponseModelName: {sOIRespModel, convOpenInference},
	genai.AttrOIProvider:          {sOIProvider, convOpenInference},
	genai.AttrOISystem:            {sOISystem, convOpenInference},
	genai.AttrOIMetadata:          {sOIMetadata, convLangChain},

	genai.AttrAIInputTokens:       {sAIInput, convAISDK},
	genai.AttrAIOutputTokens:      {sAIOutput, convAISDK},
	genai.AttrAIPromptTokens:      {sAIPrompt, convAISDK},
	genai.AttrAICompletionTokens:  {sAICompletion, convAISDK},
	genai.AttrAICacheReadTokens:   {sAICacheRead, convAISDK},
	genai.AttrAICachedInputTokens: {sAICached, convAISDK},
	genai.AttrAICacheWriteTokens:  {sAICacheWrite, convAISDK},
	genai.AttrAIOutputReasoning:   {sAIOutReasoning, convAISDK},
	genai.AttrAIReasoningTokens:   {sAIReasoning, convAISDK},
	genai.AttrAIModelID:           {sAIModelID, convAISDK},
	genai.AttrAIModelProvider:     {sAIProvider, convAISDK},
	genai.AttrAIResponseModel:     {sAIRespModel, convAISDK},
	genai.AttrAIResponseToolCalls: {sAIToolCalls, convAISDK},

	genai.AttrLSProviderLangSmith: {sLSProviderLS, convLangChain},
	genai.AttrLSProviderLangfuse:  {sLSProviderLF, convLangChain},
	genai.AttrLSProviderMeta:      {sLSProviderMeta, convLangChain},
	genai.AttrLSProvider:          {sLSProvider, convLangChain},
	genai.AttrLSModelLangSmith:    {sLSModelLS, convLangChain},
	genai.AttrLSModelLangfuse:     {sLSModelLF, convLangChain},
	genai.AttrLSModelNameMeta:     {sLSModelMeta, convLangChain},
	genai.AttrLSModelName:         {sLSModel, convLangChain},
	genai.AttrUsageInputDetails:   {sInDetails, convLangChain},
	genai.AttrUsageOutputDetails:  {sOutDetails, convLangChain},
	genai.AttrUsageCacheCreat1h:   {sCache1h, convContract},
}

// Sources of each contract value, best first. The contract key itself comes first, so
// an emitter that sent both its own and the semconv name keeps its semconv value.
var (
	inputSources         = []slot{sInput, sPrompt, sOIPrompt, sAIInput, sAIPrompt, sLLMPrompt}
	outputSources        = []slot{sOutput, sCompletion, sOICompletion, sAIOutput, sAICompletion, sLLMCompletion}
	cacheReadSources     = []slot{sCacheRead, sCacheReadFlat, sOICacheRead, sAICacheRead, sAICached}
	cacheCreationSources = []slot{sCacheCreation, sCacheWrite, sCacheCreationFlat, sOICacheWrite, sAICacheWrite}
	reasoningSources     = []slot{sReasoning, sReasoningFlat, sOIReasoning, sAIOutReasoning, sAIReasoning}
	// LangChain's ls_provider comes before gen_ai.system: LangSmith's export writes both,
	// and its gen_ai.system is a guess from the model name ("langchain" when it has none).
	providerSources  = []slot{sProvider, sLSProviderLS, sLSProviderLF, sLSProviderMeta, sLSProvider, sSystem, sOIProvider, sOISystem, sAIProvider}
	reqModelSources  = []slot{sReqModel, sOIReqModel, sOIModel, sAIModelID, sLSModelLS, sLSModelLF, sLSModelMeta, sLSModel}
	respModelSources = []slot{sRespModel, sOIRespModel, sAIRespModel}
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

var contentSources = []struct {
	output, input string
	conv          convMask
}{
	{genai.AttrTraceloopEntityOutput, genai.AttrTraceloopEntityInput, convOpenLLMetry},
	{genai.AttrOIOutputValue, genai.AttrOIInputValue, convOpenInference},
}

// decodeJSONAttr decodes a JSON object or array held in a string attribute; anything
// else (absent, plain text, malformed) is nil.
func decodeJSONAttr(attrs pcommon.Map, key string) any {
	v, ok := attrs.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		return nil
	}
	raw := strings.TrimSpace(v.Str())
	if raw == "" || (raw[0] != '{' && raw[0] != '[') {
		return nil
	}
	var out any
	if json.Unmarshal([]byte(raw), &out) != nil {
		return nil
	}
	return out
}

type sourceKey struct {
	key  string
	conv convMask
}

var (
	nameSources = []sourceKey{
		{genai.AttrAIToolCallName, convAISDK},
		{genai.AttrOIToolName, convOpenInference},
		{genai.AttrTraceloopEntityName, convOpenLLMetry},
	}
	callIDSources = []sourceKey{
		{genai.AttrAIToolCallID, convAISDK},
		{genai.AttrOIToolCallID, convOpenInference},
		{genai.AttrOIToolID, convOpenInference},
	}
)

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

// tokenDetails are LangChain's input/output token details, decoded from JSON.
type tokenDetails struct{ in, out detailMap }

type detailMap map[string]any

func (d detailMap) count(key string) (int64, bool) {
	f, ok := d[key].(float64)
	if !ok || f < 0 {
		return 0, false
	}
	return int64(f), true
}

// details decodes a JSON-object attribute; nil when absent or not an object.
func (v *view) details(s slot) detailMap {
	if !v.set[s] || v.vals[s].Type() != pcommon.ValueTypeStr {
		return nil
	}
	raw := v.vals[s].Str()
	if raw == "" || raw[0] != '{' {
		return nil
	}
	var m map[string]any
	if json.Unmarshal([]byte(raw), &m) != nil {
		return nil
	}
	return m
}

// lcMetadata is the LangChain run metadata OpenInference's LangChain instrumentation
// puts, as one JSON object, in its metadata attribute.
type lcMetadata struct {
	Provider  string `json:"ls_provider"`
	ModelName string `json:"ls_model_name"`
}

func (v *view) langChainMetadata() lcMetadata {
	if !v.set[sOIMetadata] {
		return lcMetadata{}
	}
	raw := v.vals[sOIMetadata].AsString()
	// decode only what can hold the keys: metadata may be a large object
	if !strings.Contains(raw, `"ls_`) {
		return lcMetadata{}
	}
	return decodeLCMetadata(raw)
}

// decodeLCMetadata is apart from langChainMetadata so that only a span with metadata pays
// for the value json.Unmarshal makes escape to the heap.
func decodeLCMetadata(raw string) lcMetadata {
	var md lcMetadata
	_ = json.Unmarshal([]byte(raw), &md) // malformed metadata just yields nothing
	return md
}

// aiSDKToolCallIDs reads the ids of ai.response.toolCalls, the JSON array the AI SDK
// records on a provider call ({"toolCallId": ..., "toolName": ..., ...}).
func aiSDKToolCallIDs(raw string) []string {
	if raw == "" || raw[0] != '[' {
		return nil
	}
	var calls []struct {
		ID string `json:"toolCallId"`
	}
	if json.Unmarshal([]byte(raw), &calls) != nil {
		return nil
	}
	ids := make([]string, 0, len(calls))
	for _, c := range calls {
		if c.ID != "" {
			ids = append(ids, c.ID)
		}
	}
	return ids
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
