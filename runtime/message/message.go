package message

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strings"
)

// Role is the kind of a message (LangChain's message "type").
type Role string

const (
	RoleHuman  Role = "human"
	RoleAI     Role = "ai"
	RoleTool   Role = "tool"
	RoleSystem Role = "system"
)

// ToolStatus is a ToolMessage's status, as LangChain's ToolMessage.status.
type ToolStatus string

const (
	ToolSuccess ToolStatus = "success"
	ToolError   ToolStatus = "error"
)

// Well-known additional_kwargs keys the runtime itself writes or reads.
const (
	// KwargSubagentTokenUsage is the {input_tokens, output_tokens, total_tokens} map the
	// task tool stamps on its terminal ToolMessage (DeerFlow's terminal ToolMessage contract).
	KwargSubagentTokenUsage = "subagent_token_usage"
	// KwargSubagentStatus is the terminal subagent status on the task ToolMessage.
	KwargSubagentStatus = "subagent_status"
	// KwargErrorFallback marks an AIMessage produced by LLM error handling instead of a
	// model (DeerFlow's deerflow_error_fallback; the journal reports it).
	KwargErrorFallback = "deerflow_error_fallback"
)

// Response-metadata keys (LangChain's response_metadata).
const (
	MetaModelName    = "model_name"
	MetaModel        = "model"
	MetaFinishReason = "finish_reason"
	MetaResponseID   = "id"
	MetaProvider     = "model_provider"
	// MetaProviderCostUSD is the cost the provider reported for the call (OpenRouter's
	// usage.cost, USD); it wins over the price table (docs/cost.md).
	MetaProviderCostUSD = "provider_cost_usd"
)

// ToolCall is one tool invocation requested by an AI message. ID is the provider's
// tool-call id (the correlation key with the ToolMessage answering it and with the
// chat span's agentmeter.response.tool_call_ids).
type ToolCall struct {
	ID   string         `json:"id"`
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// Message is one conversation message. Which fields are meaningful depends on Role:
//
//   - RoleHuman, RoleSystem: Content.
//   - RoleAI: Content (may be empty when the model only called tools), ToolCalls,
//     UsageMetadata (nil when the provider reported none — not the same as zeros),
//     ResponseMetadata (model_name, finish_reason, id, model_provider), AdditionalKwargs
//     (reasoning_content, token_usage_attribution, ...).
//   - RoleTool: Content, ToolCallID, Name (the tool name), Status, AdditionalKwargs
//     (subagent_status, subagent_token_usage, ...).
type Message struct {
	ID               string         `json:"id"`
	Role             Role           `json:"type"`
	Content          string         `json:"content"`
	Name             string         `json:"name,omitempty"`
	ToolCalls        []ToolCall     `json:"tool_calls,omitempty"`
	ToolCallID       string         `json:"tool_call_id,omitempty"`
	Status           ToolStatus     `json:"status,omitempty"`
	UsageMetadata    *UsageMetadata `json:"usage_metadata,omitempty"`
	AdditionalKwargs map[string]any `json:"additional_kwargs,omitempty"`
	ResponseMetadata map[string]any `json:"response_metadata,omitempty"`
}

// NewID returns a fresh message id ("msg_" + 24 hex characters from crypto/rand).
func NewID() string { return "msg_" + randomHex(12) }

// NewToolCallID returns a fresh tool-call id in OpenAI's "call_" shape, for models
// (e.g. the scripted one) whose script does not name its tool calls.
func NewToolCallID() string { return "call_" + randomHex(12) }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand never fails on supported platforms (Go 1.24+ panics instead).
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Human builds a human message with a fresh id.
func Human(content string) Message { return Message{ID: NewID(), Role: RoleHuman, Content: content} }

// System builds a system message with a fresh id.
func System(content string) Message { return Message{ID: NewID(), Role: RoleSystem, Content: content} }

// AI builds an AI message with a fresh id.
func AI(content string, calls ...ToolCall) Message {
	return Message{ID: NewID(), Role: RoleAI, Content: content, ToolCalls: calls}
}

// Tool builds a tool message answering the tool call callID of tool name.
func Tool(callID, name, content string, status ToolStatus) Message {
	if status == "" {
		status = ToolSuccess
	}
	return Message{ID: NewID(), Role: RoleTool, Content: content, Name: name, ToolCallID: callID, Status: status}
}

// Clone returns a deep-enough copy: slices, maps (one level of maps nested in
// additional_kwargs too) and the usage are copied, so mutating the copy never changes m.
func (m Message) Clone() Message {
	c := m
	if m.ToolCalls != nil {
		c.ToolCalls = make([]ToolCall, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			tc.Args = cloneMap(tc.Args)
			c.ToolCalls[i] = tc
		}
	}
	if m.UsageMetadata != nil {
		u := m.UsageMetadata.Clone()
		c.UsageMetadata = &u
	}
	c.AdditionalKwargs = cloneMap(m.AdditionalKwargs)
	c.ResponseMetadata = cloneMap(m.ResponseMetadata)
	return c
}

func cloneMap(in map[string]any) map[string]any {
	if in == nil {
		return nil
	}
	out := make(map[string]any, len(in))
	for k, v := range in {
		if sub, ok := v.(map[string]any); ok {
			v = maps.Clone(sub)
		}
		out[k] = v
	}
	return out
}

// IsAI, IsTool, IsHuman and IsSystem test the role.
func (m Message) IsAI() bool     { return m.Role == RoleAI }
func (m Message) IsTool() bool   { return m.Role == RoleTool }
func (m Message) IsHuman() bool  { return m.Role == RoleHuman }
func (m Message) IsSystem() bool { return m.Role == RoleSystem }

// ToolCallIDs returns the ids of the message's tool calls, in order, skipping empty ones.
func (m Message) ToolCallIDs() []string {
	var ids []string
	for _, tc := range m.ToolCalls {
		if id := strings.TrimSpace(tc.ID); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// ModelName is response_metadata.model_name, else response_metadata.model, else "" —
// DeerFlow's lookup order for the per-model journal bucket (DeerFlow's LLM-end accounting).
func (m Message) ModelName() string {
	for _, k := range []string{MetaModelName, MetaModel} {
		if s, ok := m.ResponseMetadata[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// Kwarg returns additional_kwargs[key].
func (m Message) Kwarg(key string) (any, bool) {
	v, ok := m.AdditionalKwargs[key]
	return v, ok
}

// WithKwarg returns a clone of m with additional_kwargs[key] = value.
func (m Message) WithKwarg(key string, value any) Message {
	c := m.Clone()
	if c.AdditionalKwargs == nil {
		c.AdditionalKwargs = map[string]any{}
	}
	c.AdditionalKwargs[key] = value
	return c
}

// String renders the message as JSON (for logs and debugging; content included).
func (m Message) String() string {
	b, err := json.Marshal(m)
	if err != nil {
		return string(m.Role) + ":" + m.ID
	}
	return string(b)
}

// ProviderCostUSD is the cost the provider reported for this response (response_metadata
// provider_cost_usd), when it did.
func (m Message) ProviderCostUSD() (float64, bool) {
	switch v := m.ResponseMetadata[MetaProviderCostUSD].(type) {
	case float64:
		return v, v >= 0
	case json.Number:
		f, err := v.Float64()
		return f, err == nil && f >= 0
	}
	return 0, false
}
