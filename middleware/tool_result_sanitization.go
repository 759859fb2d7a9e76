package middleware

import (
	"context"

	"github.com/agentmeter/agentmeter/runtime/agent"
)

// webResultTools return third-party content (as in DeerFlow).
var webResultTools = map[string]bool{"web_fetch": true, "web_search": true, "image_search": true, "web_capture": true}

// ToolResultSanitizationMiddleware (wrap_tool_call) neutralises framework tags in the
// results of web tools, whose content comes from third parties.
type ToolResultSanitizationMiddleware struct{}

// NewToolResultSanitizationMiddleware returns the middleware.
func NewToolResultSanitizationMiddleware() *ToolResultSanitizationMiddleware {
	return &ToolResultSanitizationMiddleware{}
}

// Name implements agent.Middleware.
func (*ToolResultSanitizationMiddleware) Name() string { return NameToolResultSanitization }

// WrapToolCall implements agent.WrapToolCallHook.
func (*ToolResultSanitizationMiddleware) WrapToolCall(ctx context.Context, req *agent.ToolRequest, next agent.ToolHandler) (*agent.ToolResponse, error) {
	resp, err := next(ctx, req)
	if err != nil || resp == nil || !webResultTools[req.Call.Name] {
		return resp, err
	}
	if clean := NeutraliseFrameworkTags(resp.Message.Content); clean != resp.Message.Content {
		out := *resp
		out.Message = resp.Message.Clone()
		out.Message.Content = clean
		return &out, nil
	}
	return resp, nil
}
