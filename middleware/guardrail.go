package middleware

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
)

// GuardrailRequest is one tool call put to a guardrail provider.
type GuardrailRequest struct {
	ToolName   string
	ToolCallID string
	Args       map[string]any
	ThreadID   string
	UserID     string
	AgentName  string
}

// GuardrailDecision is a provider's verdict; Code and Reason explain a denial.
type GuardrailDecision struct {
	Allow  bool
	Code   string
	Reason string
}

// GuardrailProvider evaluates tool calls (DeerFlow's deerflow/guardrails). Safe for
// concurrent use.
type GuardrailProvider interface {
	Evaluate(ctx context.Context, req GuardrailRequest) (GuardrailDecision, error)
}

// guardrailToolPolicy is the built-in guardrail provider; another
// provider is passed in code (Options.GuardrailProvider).
const guardrailToolPolicy = "tool_policy"

// NewGuardrailProvider builds the provider named by cfg.Provider.
func NewGuardrailProvider(cfg GuardrailsConfig) (GuardrailProvider, error) {
	if err := checkGuardrailProvider(cfg.Provider); err != nil {
		return nil, err
	}
	return ToolPolicyProvider{Deny: cfg.DenyTools, Allow: cfg.AllowTools}, nil
}

// checkGuardrailProvider refuses a provider name the configuration cannot build.
func checkGuardrailProvider(name string) error {
	if name != guardrailToolPolicy {
		return fmt.Errorf("provider %q is not a built-in provider (built in: %s)", name, guardrailToolPolicy)
	}
	return nil
}

// ToolPolicyProvider is the built-in provider: a deny list, and an allow list that, when
// non-empty, admits only the tools it names.
type ToolPolicyProvider struct {
	Deny  []string
	Allow []string
}

// Evaluate implements GuardrailProvider.
func (p ToolPolicyProvider) Evaluate(_ context.Context, req GuardrailRequest) (GuardrailDecision, error) {
	if slices.Contains(p.Deny, req.ToolName) {
		return GuardrailDecision{Code: "tool_denied", Reason: "the tool is on the deny list"}, nil
	}
	if len(p.Allow) > 0 && !slices.Contains(p.Allow, req.ToolName) {
		return GuardrailDecision{Code: "tool_not_allowed", Reason: "the tool is not on the allow list"}, nil
	}
	return GuardrailDecision{Allow: true}, nil
}

// GuardrailMiddleware evaluates every tool call with its provider before it runs; a
// denial becomes an error ToolMessage, and provider errors follow fail_closed.
type GuardrailMiddleware struct {
	provider   GuardrailProvider
	failClosed bool
}

// NewGuardrailMiddleware returns the middleware.
func NewGuardrailMiddleware(p GuardrailProvider, failClosed bool) *GuardrailMiddleware {
	return &GuardrailMiddleware{provider: p, failClosed: failClosed}
}

// Name implements agent.Middleware.
func (*GuardrailMiddleware) Name() string { return NameGuardrail }

// GuardrailDeniedMessage is the model-visible denial.
func GuardrailDeniedMessage(tool, code, reason string) string {
	return fmt.Sprintf("Guardrail denied: tool '%s' was blocked (%s). Reason: %s. Choose an alternative approach.", tool, code, reason)
}

// WrapToolCall implements agent.WrapToolCallHook.
func (m *GuardrailMiddleware) WrapToolCall(ctx context.Context, req *agent.ToolRequest, next agent.ToolHandler) (*agent.ToolResponse, error) {
	rt := req.Runtime
	gr := GuardrailRequest{ToolName: req.Call.Name, ToolCallID: req.Call.ID, Args: req.Call.Args}
	if rt != nil {
		gr.ThreadID, gr.UserID, gr.AgentName = rt.ThreadID, rt.UserID, rt.AgentName
	}
	d, err := m.provider.Evaluate(ctx, gr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !m.failClosed {
			record(rt, "guardrail", NameGuardrail, "wrap_tool_call", "provider_error_allowed", map[string]any{"tool": req.Call.Name})
			return next(ctx, req)
		}
		d = GuardrailDecision{Code: "guardrail_provider_error", Reason: "the guardrail provider failed and guardrails fail closed"}
	}
	if d.Allow {
		return next(ctx, req) // only denials and provider failures are audited
	}
	record(rt, "guardrail", NameGuardrail, "wrap_tool_call", "deny", map[string]any{"tool": req.Call.Name, "code": d.Code})
	return &agent.ToolResponse{
		Message:    message.Tool(req.Call.ID, req.Call.Name, GuardrailDeniedMessage(req.Call.Name, d.Code, d.Reason), message.ToolError),
		Attributes: map[string]string{"error.type": "guardrail_denied"},
	}, nil
}
