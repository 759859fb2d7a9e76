package message

import "github.com/agentmeter/agentmeter/genai"

// UsageMetadata is LangChain's usage_metadata of an AIMessage. Input includes the cached
// part and Output includes reasoning, exactly as genai.Usage (docs/contract.md#usage); providers that
// report cache separately (Anthropic) are normalised before they build one.
type UsageMetadata struct {
	InputTokens        int64               `json:"input_tokens"`
	OutputTokens       int64               `json:"output_tokens"`
	TotalTokens        int64               `json:"total_tokens"`
	InputTokenDetails  *InputTokenDetails  `json:"input_token_details,omitempty"`
	OutputTokenDetails *OutputTokenDetails `json:"output_token_details,omitempty"`
}

// InputTokenDetails are the parts of InputTokens (LangChain's input_token_details).
type InputTokenDetails struct {
	CacheRead     int64 `json:"cache_read,omitempty"`
	CacheCreation int64 `json:"cache_creation,omitempty"`
	Audio         int64 `json:"audio,omitempty"`
	// CacheCreation1h is the part of CacheCreation written with a 1-hour lifetime
	// (Anthropic's cache_creation.ephemeral_1h_input_tokens; LangChain's key), billed at
	// a higher rate than 5-minute writes.
	CacheCreation1h int64 `json:"ephemeral_1h_input_tokens,omitempty"`
}

// OutputTokenDetails are the parts of OutputTokens (LangChain's output_token_details).
type OutputTokenDetails struct {
	Reasoning int64 `json:"reasoning,omitempty"`
	Audio     int64 `json:"audio,omitempty"`
}

// UsageFromGenAI builds usage_metadata from a normalised genai.Usage, with TotalTokens =
// input + output and detail blocks only when they carry a non-zero value.
func UsageFromGenAI(u genai.Usage) UsageMetadata {
	um := UsageMetadata{InputTokens: u.Input, OutputTokens: u.Output, TotalTokens: u.Total()}
	if u.CacheRead != 0 || u.CacheCreation != 0 {
		um.InputTokenDetails = &InputTokenDetails{CacheRead: u.CacheRead, CacheCreation: u.CacheCreation}
	}
	if u.Reasoning != 0 {
		um.OutputTokenDetails = &OutputTokenDetails{Reasoning: u.Reasoning}
	}
	return um
}

// GenAI converts to the contract's usage value (the five kinds; total is derived).
func (u UsageMetadata) GenAI() genai.Usage {
	g := genai.Usage{Input: u.InputTokens, Output: u.OutputTokens}
	if u.InputTokenDetails != nil {
		g.CacheRead = u.InputTokenDetails.CacheRead
		g.CacheCreation = u.InputTokenDetails.CacheCreation
	}
	if u.OutputTokenDetails != nil {
		g.Reasoning = u.OutputTokenDetails.Reasoning
	}
	return g
}

// Total is TotalTokens, or input + output when TotalTokens is 0 (DeerFlow's rule for
// providers that omit the total, as DeerFlow's SubagentTokenCollector and LLM-end accounting do).
func (u UsageMetadata) Total() int64 {
	if u.TotalTokens > 0 {
		return u.TotalTokens
	}
	return u.InputTokens + u.OutputTokens
}

// CacheCreation1h is input_token_details.ephemeral_1h_input_tokens (0 when absent).
func (u UsageMetadata) CacheCreation1h() int64 {
	if u.InputTokenDetails == nil || u.InputTokenDetails.CacheCreation1h < 0 {
		return 0
	}
	return u.InputTokenDetails.CacheCreation1h
}

// CacheRead is input_token_details.cache_read (0 when absent or negative).
func (u UsageMetadata) CacheRead() int64 {
	if u.InputTokenDetails == nil || u.InputTokenDetails.CacheRead < 0 {
		return 0
	}
	return u.InputTokenDetails.CacheRead
}

// Clone copies the detail blocks.
func (u UsageMetadata) Clone() UsageMetadata {
	c := u
	if u.InputTokenDetails != nil {
		d := *u.InputTokenDetails
		c.InputTokenDetails = &d
	}
	if u.OutputTokenDetails != nil {
		d := *u.OutputTokenDetails
		c.OutputTokenDetails = &d
	}
	return c
}
