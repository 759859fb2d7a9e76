package agent

import (
	"context"

	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// Middleware is the base of every middleware: a stable name used in errors, journal
// events and ordering checks. Hooks are the optional interfaces below.
type Middleware interface {
	Name() string
}

// BeforeAgentHook runs once per run before the first model call (list order).
type BeforeAgentHook interface {
	BeforeAgent(ctx context.Context, rt *Runtime, st *state.State) (*state.Update, error)
}

// BeforeModelHook runs before every model call (list order).
type BeforeModelHook interface {
	BeforeModel(ctx context.Context, rt *Runtime, st *state.State) (*state.Update, error)
}

// AfterModelHook runs after every model call (reverse list order). The response just
// produced is the last AI message of st; model.ResponseSpan(ctx) annotates its chat span
// (still open during after_model hooks; a no-op if the response was not a traced call).
type AfterModelHook interface {
	AfterModel(ctx context.Context, rt *Runtime, st *state.State) (*state.Update, error)
}

// AfterAgentHook runs once at the end of a run (reverse list order).
type AfterAgentHook interface {
	AfterAgent(ctx context.Context, rt *Runtime, st *state.State) (*state.Update, error)
}

// ModelRequest is what flows through the WrapModelCall chain.
type ModelRequest struct {
	// Request is the provider request; wrappers replace it with a modified Clone.
	Request *model.Request
	// Model is the model to call; a wrapper may substitute another (fallback models).
	Model model.ChatModel
	// State is the run state before the call; read-only.
	State *state.State
	// Runtime is the run's runtime.
	Runtime *Runtime
}

// WithRequest returns a copy of r carrying req (for wrappers that rewrite the request).
func (r *ModelRequest) WithRequest(req *model.Request) *ModelRequest {
	c := *r
	c.Request = req
	return &c
}

// ModelResponse is what the chain returns.
type ModelResponse struct {
	// Message is the AI message added to the state (its id is kept, so a wrapper that
	// edits it keeps the id).
	Message message.Message
	// Response is the provider response behind Message, nil when a wrapper produced the
	// message without calling the model.
	Response *model.Response
}

// ModelHandler calls the next layer (ultimately the model).
type ModelHandler func(ctx context.Context, req *ModelRequest) (*ModelResponse, error)

// WrapModelCallHook wraps every model call (first middleware outermost).
type WrapModelCallHook interface {
	WrapModelCall(ctx context.Context, req *ModelRequest, next ModelHandler) (*ModelResponse, error)
}

// ToolRequest is what flows through the WrapToolCall chain.
type ToolRequest struct {
	// Call is the tool call from the AI message (read-only; wrappers replace it on a copy).
	Call message.ToolCall
	// Tool is the resolved tool, nil when the model called an unknown tool (the innermost
	// handler then returns an error ToolMessage listing the available tools).
	Tool tool.Tool
	// State is the state when the tool node started; read-only.
	State *state.State
	// Runtime is the run's runtime.
	Runtime *Runtime
}

// ToolResponse is the outcome of one tool call.
type ToolResponse struct {
	// Message is the ToolMessage (tool_call_id = Call.ID).
	Message message.Message
	// Update is applied after the whole batch; Update.JumpTo "end" ends the run.
	Update *state.Update
	// Attributes are extra execute_tool span attributes (string values).
	Attributes map[string]string
}

// ToolHandler calls the next layer (ultimately the tool).
type ToolHandler func(ctx context.Context, req *ToolRequest) (*ToolResponse, error)

// WrapToolCallHook wraps every tool call (first middleware outermost). Called
// concurrently for the tool calls of one response.
type WrapToolCallHook interface {
	WrapToolCall(ctx context.Context, req *ToolRequest, next ToolHandler) (*ToolResponse, error)
}
