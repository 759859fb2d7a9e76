package model

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentmeter/agentmeter/runtime/message"
)

// Provider is what a backend implements. See the package comment for the contract.
type Provider interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// ChatModel is what callers use: a Provider wrapped by the factory with tracing and
// observers, plus the static facts about the configured model.
type ChatModel interface {
	Provider
	Info() Info
}

// Info describes a configured model (from config.yaml).
type Info struct {
	Name             string // config name ("main"), used by agents and middlewares
	Provider         string // gen_ai.provider.name: "openai", "anthropic", "scripted", ...
	Model            string // gen_ai.request.model
	SupportsVision   bool
	SupportsThinking bool
	ContextWindow    int
	Stream           bool // default of Request.Stream
}

// ToolSpec describes a tool the model may call. Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// Request is one model call. Callers build a fresh Request per call; wrap_model_call
// hooks may replace fields on a copy (request rewrites are ephemeral, DeerFlow's hook execution model).
type Request struct {
	// Messages is the conversation, system messages first. Read-only.
	Messages []message.Message
	// Tools the model may call; empty means none.
	Tools []ToolSpec
	// ToolChoice is "", "auto", "none", "required" or a tool name.
	ToolChoice string
	// Caller overrides the caller tag taken from the context (telemetry.WithCaller), e.g.
	// "middleware:title". It becomes agentmeter.caller on the span and the journal bucket.
	Caller string
	// Stream selects the streaming API; nil means the model's configured default. The
	// traced model resolves it before calling the provider, so providers see non-nil.
	Stream *bool
	// OnDelta, when set, receives streamed deltas (see Provider contract).
	OnDelta func(Delta)
	// MaxTokens and Temperature override the configured values when non-zero/non-nil.
	MaxTokens   int
	Temperature *float64
	// Thinking enables extended thinking / reasoning on models that support it;
	// ReasoningEffort is passed to providers that accept one ("low", "medium", "high").
	Thinking        bool
	ReasoningEffort string
	// Metadata is free-form caller data (never sent to the provider).
	Metadata map[string]any
}

// Clone returns a shallow copy whose slices and map can be replaced without touching r.
func (r *Request) Clone() *Request {
	c := *r
	c.Messages = append([]message.Message(nil), r.Messages...)
	c.Tools = append([]ToolSpec(nil), r.Tools...)
	return &c
}

// StreamEnabled reports the resolved stream flag (false when unset).
func (r *Request) StreamEnabled() bool { return r.Stream != nil && *r.Stream }

// Delta is one streamed increment.
type Delta struct {
	Content   string // text delta
	Reasoning string // reasoning/thinking delta
}

// Response is the aggregated result of one call.
type Response struct {
	// Message is the AI message: content, tool calls, usage_metadata, response_metadata.
	Message message.Message
	// ID is the provider's response id (gen_ai.response.id); Model the model that
	// answered (gen_ai.response.model); FinishReasons as reported (gen_ai.response.finish_reasons).
	ID            string
	Model         string
	FinishReasons []string
	// CallID is unique per model call, set by the traced model (LangChain's run_id): the
	// dedupe key of the RunJournal and of subagent token collectors.
	CallID string
	// Caller is the resolved caller tag of the call, set by the traced model.
	Caller string
	// Span annotates this call's chat span; never nil after the traced model returns
	// (a no-op when the call was not traced or the span already ended).
	Span SpanAnnotator
}

// StatusError is an HTTP error from a provider's backend. Providers wrap SDK errors so
// that errors.As(err, &*StatusError) finds the status code for retry classification.
type StatusError struct {
	Provider   string
	StatusCode int
	Message    string
	Err        error
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: HTTP %d %s: %s", e.Provider, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

func (e *StatusError) Unwrap() error { return e.Err }

// Retryable reports whether the status is worth retrying (429 and 5xx).
func (e *StatusError) Retryable() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

// IsRetryable reports whether err wraps a retryable StatusError.
func IsRetryable(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Retryable()
}
