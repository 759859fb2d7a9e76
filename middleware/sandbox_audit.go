package middleware

import (
	"context"
	"fmt"
	"regexp"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
)

// Sandbox audit risk levels.
const (
	AuditLow     = "low"
	AuditMedium  = "medium"
	AuditBlocked = "blocked"
)

type auditRule struct {
	re     *regexp.Regexp
	level  string
	reason string
}

// auditRules classify shell commands. Blocked ones are command-position substitutions and
// download-and-execute pipes, which turn data into code; the rest is recorded only. This is
// an audit, not a security boundary (the sandbox confinement is).
var auditRules = []auditRule{
	{regexp.MustCompile("(^|[;&|(]\\s*)(\\$\\(|`)"), AuditBlocked, "a command substitution in command position executes generated text"},
	{regexp.MustCompile(`(curl|wget)\b[^|;&]*\|\s*(sudo\s+)?(ba|z|k|da)?sh\b`), AuditBlocked, "downloaded content is piped into a shell"},
	{regexp.MustCompile(`\b(eval|source)\s+["']?\$`), AuditBlocked, "a variable is evaluated as shell code"},
	{regexp.MustCompile(`:\(\)\s*\{\s*:\|:&\s*\};:`), AuditBlocked, "a fork bomb"},
	{regexp.MustCompile(`\brm\s+(-[a-zA-Z]*r[a-zA-Z]*f|-[a-zA-Z]*f[a-zA-Z]*r)[a-zA-Z]*\s+(/|~|\$HOME)(\s|$)`), AuditBlocked, "recursive removal of the root or home folder"},
	{regexp.MustCompile(`\b(mkfs|dd\s+.*of=/dev/|shutdown|reboot)\b`), AuditBlocked, "a destructive system command"},
	{regexp.MustCompile(`\b(curl|wget|nc|ssh|scp)\b`), AuditMedium, "network access"},
	{regexp.MustCompile(`\b(rm|mv|chmod|chown)\b`), AuditMedium, "file removal or permission change"},
}

// AuditCommand classifies a shell command: the first matching rule wins, else low.
func AuditCommand(cmd string) (level, reason string) {
	for _, r := range auditRules {
		if r.re.MatchString(cmd) {
			return r.level, r.reason
		}
	}
	return AuditLow, ""
}

// SandboxAuditMiddleware (wrap_tool_call) classifies every bash command, records the audit
// on the journal (middleware:sandbox_audit) and blocks the high-risk patterns with an error
// ToolMessage (as in DeerFlow).
type SandboxAuditMiddleware struct{}

// NewSandboxAuditMiddleware returns the middleware.
func NewSandboxAuditMiddleware() *SandboxAuditMiddleware { return &SandboxAuditMiddleware{} }

// Name implements agent.Middleware.
func (*SandboxAuditMiddleware) Name() string { return NameSandboxAudit }

// WrapToolCall implements agent.WrapToolCallHook.
func (*SandboxAuditMiddleware) WrapToolCall(ctx context.Context, req *agent.ToolRequest, next agent.ToolHandler) (*agent.ToolResponse, error) {
	if req.Call.Name != "bash" {
		return next(ctx, req)
	}
	cmd, _ := req.Call.Args["command"].(string)
	level, reason := AuditCommand(cmd)
	record(req.Runtime, "sandbox_audit", NameSandboxAudit, "wrap_tool_call", level, map[string]any{"reason": reason, "tool_call_id": req.Call.ID})
	if level != AuditBlocked {
		return next(ctx, req)
	}
	return &agent.ToolResponse{
		Message: message.Tool(req.Call.ID, req.Call.Name,
			fmt.Sprintf("Error: the sandbox audit blocked this command: %s. Rewrite it without that construct.", reason), message.ToolError),
		Attributes: map[string]string{"error.type": "sandbox_audit_blocked"},
	}, nil
}
