package middleware

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// Clock is the time source of time-dependent middlewares (circuit breaker, dynamic
// context date, backoff sleeps); tests inject a fake.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done (then it returns ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep implements Clock.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// runScopedMu makes get-or-create of run-scoped values atomic across the concurrent tool
// wrappers of one run.
var runScopedMu sync.Mutex

// runScoped returns the value stored under key in the run context, creating it with mk
// on first use. Middleware instances are shared by concurrent runs, so per-run data
// (queued warnings, reminder counts, lazily acquired sandboxes) lives here, not in the
// middleware (runtime/agent: "keep per-run data in Runtime.Context").
func runScoped[T any](rt *agent.Runtime, key string, mk func() T) T {
	if rt == nil || rt.Context == nil {
		return mk()
	}
	runScopedMu.Lock()
	defer runScopedMu.Unlock()
	if v, ok := rt.Context.Get(key); ok {
		if t, ok := v.(T); ok {
			return t
		}
	}
	v := mk()
	rt.Context.Set(key, v)
	return v
}

// threadID is the thread scope of per-thread state: a missing thread id is "default"
// (DeerFlow's fallback); runID the run scope.
func threadID(rt *agent.Runtime) string {
	if rt == nil || rt.ThreadID == "" {
		return "default"
	}
	return rt.ThreadID
}

func runID(rt *agent.Runtime) string {
	if rt == nil {
		return ""
	}
	return rt.RunID
}

// lastMessage returns the last message and true, or false for an empty list.
func lastMessage(msgs []message.Message) (message.Message, bool) {
	if len(msgs) == 0 {
		return message.Message{}, false
	}
	return msgs[len(msgs)-1], true
}

// lastAIIsLast returns the last message when it is an AI message.
func lastAIIsLast(msgs []message.Message) (message.Message, bool) {
	m, ok := lastMessage(msgs)
	if !ok || !m.IsAI() {
		return message.Message{}, false
	}
	return m, true
}

// appendText is DeerFlow's _append_text: "" + "\n\n" + text for empty content, else
// content + "\n\n" + text.
func appendText(content, text string) string {
	return content + "\n\n" + text
}

// finishReason reads response_metadata.finish_reason (else additional_kwargs), string only.
func finishReason(m message.Message) string {
	if s, ok := m.ResponseMetadata[message.MetaFinishReason].(string); ok {
		return s
	}
	if s, ok := m.AdditionalKwargs[message.MetaFinishReason].(string); ok {
		return s
	}
	return ""
}

// metaString reads a string from response_metadata, else additional_kwargs.
func metaString(m message.Message, key string) (string, bool) {
	if s, ok := m.ResponseMetadata[key].(string); ok {
		return s, true
	}
	if s, ok := m.AdditionalKwargs[key].(string); ok {
		return s, true
	}
	return "", false
}

// hasToolIntent reports structured, raw or legacy tool intent on an AI message (DeerFlow's
// todo/terminal-response helpers): tool calls, invalid calls, raw provider tool_calls,
// function_call, or a tool-ish finish reason.
func hasToolIntent(m message.Message) bool {
	if len(m.ToolCalls) > 0 {
		return true
	}
	for _, k := range []string{"tool_calls", "invalid_tool_calls", "function_call"} {
		if v, ok := m.AdditionalKwargs[k]; ok && v != nil {
			if l, isList := v.([]any); isList && len(l) == 0 {
				continue
			}
			return true
		}
	}
	switch finishReason(m) {
	case "tool_calls", "function_call":
		return true
	}
	return false
}

// withoutToolCalls returns a clone of m with structured and raw tool calls removed.
func withoutToolCalls(m message.Message) message.Message {
	c := m.Clone()
	c.ToolCalls = nil
	if c.AdditionalKwargs != nil {
		delete(c.AdditionalKwargs, "tool_calls")
		delete(c.AdditionalKwargs, "function_call")
	}
	return c
}

// hardStop is the budget and loop middlewares' hard stop of the lead's response: the
// update replacing last with a clone without its tool calls, notice appended to its
// content and a tool_calls finish reason turned into stop; the run's stop reason becomes
// stopReason.
func hardStop(rt *agent.Runtime, last message.Message, stopReason, notice string) *state.Update {
	stopped := withoutToolCalls(last)
	stopped.Content = appendText(stopped.Content, notice)
	if finishReason(stopped) == "tool_calls" {
		stopped = setFinishReason(stopped, "stop")
	}
	if rt != nil && rt.Context != nil {
		rt.Context.SetStopReason(stopReason)
	}
	return &state.Update{Messages: []message.Message{stopped}}
}

// budgetWarning is a budget's one-time warning: queued once when its warn ratio is
// passed, then added as a hidden human message to the next model request only.
type budgetWarning struct {
	mu      sync.Mutex
	warned  bool
	pending string
}

// queueOnce queues text unless a warning was already queued in this run; it reports
// whether it queued.
func (w *budgetWarning) queueOnce(text string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.warned {
		return false
	}
	w.warned, w.pending = true, text
	return true
}

// wrap sends req on, with the queued warning (named name) appended when there is one.
func (w *budgetWarning) wrap(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler, name string) (*agent.ModelResponse, error) {
	w.mu.Lock()
	text := w.pending
	w.pending = ""
	w.mu.Unlock()
	if text == "" {
		return next(ctx, req)
	}
	r := req.Request.Clone()
	r.Messages = append(r.Messages, hiddenHuman(message.NewID(), name, text))
	return next(ctx, req.WithRequest(r))
}

// setFinishReason returns a clone of m with response_metadata.finish_reason = reason.
func setFinishReason(m message.Message, reason string) message.Message {
	c := m.Clone()
	if c.ResponseMetadata == nil {
		c.ResponseMetadata = map[string]any{}
	}
	c.ResponseMetadata[message.MetaFinishReason] = reason
	return c
}

func kwargBool(m message.Message, key string) bool {
	b, _ := m.AdditionalKwargs[key].(bool)
	return b
}

func kwargString(m message.Message, key string) string {
	s, _ := m.AdditionalKwargs[key].(string)
	return s
}

// hiddenHuman builds a hidden HumanMessage (hide_from_ui) with a name.
func hiddenHuman(id, name, content string) message.Message {
	return message.Message{ID: id, Role: message.RoleHuman, Name: name, Content: content,
		AdditionalKwargs: map[string]any{"hide_from_ui": true}}
}

// approxTokens is LangChain's count_tokens_approximately: about 4 characters per token
// plus a few tokens of per-message overhead.
func approxTokens(msgs []message.Message) int {
	n := 0
	for _, m := range msgs {
		chars := len(m.Content) + len(m.Role)
		for _, tc := range m.ToolCalls {
			chars += len(tc.Name) + len(tc.ID) + 16*len(tc.Args)
			for _, v := range tc.Args {
				if s, ok := v.(string); ok {
					chars += len(s)
				}
			}
		}
		n += (chars+3)/4 + 3
	}
	return n
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// record writes a middleware journal event when the run has a journal.
func record(rt *agent.Runtime, tag, name, hook, action string, changes map[string]any) {
	if rt != nil && rt.Journal != nil {
		rt.Journal.RecordMiddleware(tag, name, hook, action, changes)
	}
}

// emit sends a custom stream event when the run has an emitter.
func emit(rt *agent.Runtime, event string, payload map[string]any) {
	if rt != nil && rt.Emit != nil {
		rt.Emit(event, payload)
	}
}

// checkModelName refuses a model_name the model factory does not know; empty (the run's
// own model) and a missing factory pass.
func checkModelName(models *model.Factory, name string) error {
	if name == "" || models == nil {
		return nil
	}
	if _, err := models.Get(name); err != nil {
		return fmt.Errorf("model_name: %w", err)
	}
	return nil
}
