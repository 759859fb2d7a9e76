package middleware

import (
	"context"
	"maps"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
)

// SystemMessageCoalescingMiddleware merges every system message of a request into one
// leading system message (joined by blank lines, only the last dynamic-context reminder
// kept, first id kept, kwargs merged), for providers that accept a single system prompt.
// A request with at most one system message, already first, passes through.
type SystemMessageCoalescingMiddleware struct{}

// NewSystemMessageCoalescingMiddleware returns the middleware.
func NewSystemMessageCoalescingMiddleware() *SystemMessageCoalescingMiddleware {
	return &SystemMessageCoalescingMiddleware{}
}

// Name implements agent.Middleware.
func (*SystemMessageCoalescingMiddleware) Name() string { return NameSystemMessageCoalescing }

// CoalesceSystemMessages returns the coalesced list and whether anything changed.
func CoalesceSystemMessages(msgs []message.Message) ([]message.Message, bool) {
	n, lastReminder := 0, -1
	for i, m := range msgs {
		if m.IsSystem() {
			n++
			if isReminder(m) {
				lastReminder = i
			}
		}
	}
	if n == 0 || (n == 1 && msgs[0].IsSystem()) {
		return msgs, false
	}
	var merged message.Message
	var parts []string
	rest := make([]message.Message, 0, len(msgs))
	for i, m := range msgs {
		if !m.IsSystem() {
			rest = append(rest, m)
			continue
		}
		if isReminder(m) && i != lastReminder {
			continue
		}
		if merged.ID == "" {
			merged = message.Message{ID: m.ID, Role: message.RoleSystem}
		}
		if len(m.AdditionalKwargs) > 0 {
			if merged.AdditionalKwargs == nil {
				merged.AdditionalKwargs = map[string]any{}
			}
			maps.Copy(merged.AdditionalKwargs, m.AdditionalKwargs)
		}
		if s := strings.TrimSpace(m.Content); s != "" {
			parts = append(parts, s)
		}
	}
	merged.Content = strings.Join(parts, "\n\n")
	return append([]message.Message{merged}, rest...), true
}

// WrapModelCall implements agent.WrapModelCallHook.
func (*SystemMessageCoalescingMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	out, changed := CoalesceSystemMessages(req.Request.Messages)
	if !changed {
		return next(ctx, req)
	}
	r := req.Request.Clone()
	r.Messages = out
	return next(ctx, req.WithRequest(r))
}
