package middleware

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
)

// MissingToolCallID is the tool_call_id of an error message for a call without one.
const MissingToolCallID = "missing_tool_call_id"

// ToolErrorHandlingMiddleware turns tool errors into status=error ToolMessages the model
// can react to (as in DeerFlow); cancellation of the run is returned, never swallowed.
type ToolErrorHandlingMiddleware struct{}

// NewToolErrorHandlingMiddleware returns the middleware.
func NewToolErrorHandlingMiddleware() *ToolErrorHandlingMiddleware {
	return &ToolErrorHandlingMiddleware{}
}

// Name implements agent.Middleware.
func (*ToolErrorHandlingMiddleware) Name() string { return NameToolErrorHandling }

// ToolErrorMessage is the model-visible text of a failed tool call.
func ToolErrorMessage(tool string, err error) string {
	return fmt.Sprintf("Error: Tool '%s' failed with %s: %s. Continue with available context, or choose an alternative tool.",
		tool, errorTypeName(err), clipRunes(strings.TrimSpace(err.Error()), 500))
}

// WrapToolCall implements agent.WrapToolCallHook.
func (*ToolErrorHandlingMiddleware) WrapToolCall(ctx context.Context, req *agent.ToolRequest, next agent.ToolHandler) (*agent.ToolResponse, error) {
	resp, err := next(ctx, req)
	if err == nil {
		return resp, nil
	}
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return nil, err
	}
	id := req.Call.ID
	if strings.TrimSpace(id) == "" {
		id = MissingToolCallID
	}
	msg := message.Tool(id, req.Call.Name, ToolErrorMessage(req.Call.Name, err), message.ToolError)
	msg.AdditionalKwargs = map[string]any{"deerflow_tool_meta": map[string]any{"status": "error", "source": "exception", "error_type": errorTypeName(err)}}
	if req.Call.Name == genai.TaskToolName {
		msg.AdditionalKwargs[message.KwargSubagentStatus] = "failed"
		msg.AdditionalKwargs["subagent_error"] = clipRunes(err.Error(), 500)
	}
	return &agent.ToolResponse{Message: msg, Attributes: map[string]string{genai.AttrErrorType: "tool_error"}}, nil
}
