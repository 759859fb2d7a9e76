package genainormalize

import "github.com/agentmeter/agentmeter/genai"

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

var contentSources = []struct {
	output, input string
	conv          convMask
}{
	{genai.AttrTraceloopEntityOutput, genai.AttrTraceloopEntityInput, convOpenLLMetry},
	{genai.AttrOIOutputValue, genai.AttrOIInputValue, convOpenInference},
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
