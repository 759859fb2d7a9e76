package middleware

import (
	"context"
	"regexp"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
)

// User-input boundary markers (as in DeerFlow).
const (
	UserInputBegin = "--- BEGIN USER INPUT ---"
	UserInputEnd   = "--- END USER INPUT ---"
)

// frameworkTags are tag names the framework (or a model's chat template) gives meaning to;
// in user-authored text they are escaped so a user cannot forge them.
var frameworkTags = []string{
	"system-reminder", "system_reminder", "system", "memory", "current_date", "current_uploads", "instruction",
	"instructions", "durable_context_data", "conversation_summary", "existing_summary", "new_messages",
	"tool_call", "tool_calls", "tool_result", "tool_response", "function_call", "function_results", "assistant",
	"user", "human", "ai", "developer", "context", "think", "thinking", "reasoning", "policy", "rules",
	"admin", "root", "sudo", "override", "important", "im_start", "im_end", "skill", "skill_context",
	"loop_warning", "budget_warning", "todo_reminder",
}

var frameworkTagRE = regexp.MustCompile(`(?i)<\s*/?\s*(` + strings.Join(quoteAll(frameworkTags), "|") + `)\b[^<>]*>`)

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = regexp.QuoteMeta(n)
	}
	return out
}

// NeutraliseFrameworkTags escapes framework tags (<system-reminder>, </memory>, ...) to
// &lt;...&gt; and defuses forged user-input boundary markers.
func NeutraliseFrameworkTags(s string) string {
	if !strings.Contains(s, "<") && !strings.Contains(s, "---") {
		return s // nothing to neutralise: skip the regexp
	}
	s = frameworkTagRE.ReplaceAllStringFunc(s, func(tag string) string {
		return "&lt;" + tag[1:len(tag)-1] + "&gt;"
	})
	s = strings.ReplaceAll(s, UserInputBegin, "- - - BEGIN USER INPUT - - -")
	return strings.ReplaceAll(s, UserInputEnd, "- - - END USER INPUT - - -")
}

// InputSanitizationMiddleware (wrap_model_call, request only) escapes framework tags in the
// last genuine user message and wraps its user-authored part in BEGIN/END USER INPUT
// markers, so injected text cannot pose as system reminders or tool results. Only the
// user-authored part is touched: a block prepended by UploadsMiddleware stays outside.
type InputSanitizationMiddleware struct{}

// NewInputSanitizationMiddleware returns the middleware.
func NewInputSanitizationMiddleware() *InputSanitizationMiddleware {
	return &InputSanitizationMiddleware{}
}

// Name implements agent.Middleware.
func (*InputSanitizationMiddleware) Name() string { return NameInputSanitization }

// lastGenuineUser is the last human message a user wrote (not a hidden framework message).
func lastGenuineUser(msgs []message.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.IsHuman() && !isReminder(m) && !kwargBool(m, "hide_from_ui") && m.Name != "summary" {
			return i
		}
	}
	return -1
}

// SanitizeUserMessage returns the sanitised message.
func SanitizeUserMessage(m message.Message) message.Message {
	prefix, user := "", m.Content
	if orig, ok := m.AdditionalKwargs["original_user_content"].(string); ok && strings.HasSuffix(m.Content, orig) {
		prefix, user = strings.TrimSuffix(m.Content, orig), orig
	}
	c := m
	c.Content = prefix + UserInputBegin + "\n" + NeutraliseFrameworkTags(user) + "\n" + UserInputEnd
	return c
}

// WrapModelCall implements agent.WrapModelCallHook.
func (*InputSanitizationMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	i := lastGenuineUser(req.Request.Messages)
	if i < 0 || strings.HasPrefix(req.Request.Messages[i].Content, UserInputBegin) {
		return next(ctx, req)
	}
	r := req.Request.Clone()
	r.Messages[i] = SanitizeUserMessage(r.Messages[i])
	return next(ctx, req.WithRequest(r))
}
